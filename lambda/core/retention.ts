import type { PrivacySettings } from "./privacy";
import type { InteractionRecord } from "./record";

/**
 * Retention by whole UTC day partitions (docs/privacy.md). A day is past a limit of N days once all
 * of it is: its end lies N days or more before now. So with 30 days, on 2026-11-26 the records of
 * 2026-10-26 and older are removed and 2026-10-27 is kept. Anything that rewrites the warehouse (the
 * retention run, compaction, deletion) asks these same rules, so none of them brings expired data back.
 */
const DAY_MS = 86_400_000;

export interface RetentionCutoffs {
  /** Days before this one (YYYY-MM-DD, exclusive) are removed; absent: records are kept. */
  recordsBefore?: string;
  /** Days before this one lose their bodies; absent: bodies live as long as the records. */
  bodiesBefore?: string;
}

/** The first day a limit of `days` keeps. */
export function firstKeptDay(days: number, now: number): string {
  const lastExpiredDayEnd = Math.floor((now - days * DAY_MS) / DAY_MS) * DAY_MS;
  return new Date(lastExpiredDayEnd).toISOString().slice(0, 10);
}

export function retentionCutoffs(settings: PrivacySettings, now: number): RetentionCutoffs {
  const { retentionDays, bodyRetentionDays } = settings;
  return {
    ...(retentionDays !== undefined && { recordsBefore: firstKeptDay(retentionDays, now) }),
    ...(bodyRetentionDays !== undefined && { bodiesBefore: firstKeptDay(bodyRetentionDays, now) }),
  };
}

/** The day's records are past the project's retention. */
export function recordsExpired(cutoffs: RetentionCutoffs, day: string): boolean {
  return cutoffs.recordsBefore !== undefined && day < cutoffs.recordsBefore;
}

/** The day's bodies are past the project's body retention (its records may still be kept). */
export function bodiesExpired(cutoffs: RetentionCutoffs, day: string): boolean {
  return cutoffs.bodiesBefore !== undefined && day < cutoffs.bodiesBefore;
}

/**
 * A record without its bodies: what body retention leaves. `store_level` then says `metadata`, which
 * is what the record keeps from now on (the dashboard explains missing bodies from it).
 */
export function withoutBodies(record: InteractionRecord): InteractionRecord {
  return {
    ...record,
    request_body: null,
    response_body: null,
    truncated: false,
    store_level: record.store_level === "none" ? "none" : "metadata",
  };
}

export function hasBodies(record: Pick<InteractionRecord, "request_body" | "response_body">): boolean {
  return record.request_body !== null || record.response_body !== null;
}

/** What one project's part of a run did (or, dry, would do). */
export interface ProjectRetention {
  projectId: string;
  retentionDays: number | null;
  bodyRetentionDays: number | null;
  /** Day partitions removed whole, oldest first. */
  partitionsRemoved: string[];
  filesRemoved: number;
  rowsRemoved: number;
  /** Day partitions whose files were rewritten without bodies. */
  bodyPartitions: string[];
  filesRewritten: number;
  rowsBlanked: number;
  /** The dashboard's index: entries removed, and entries whose bodies were dropped. */
  indexRemoved: number;
  indexBlanked: number;
}

/** The audit entry every run leaves (`retention-audit/<started>-<run id>.json` in the warehouse). */
export interface RetentionAudit {
  runId: string;
  status: "running" | "completed" | "failed";
  dryRun: boolean;
  startedAt: string;
  finishedAt: string | null;
  projects: ProjectRetention[];
  /** Why a run failed: our words, never row data. */
  error: string | null;
}

/** The dashboard's index under the same limits (adapters/dynamodb/interactions.ts). */
export interface RetentionIndex {
  /**
   * Removes the project's entries of days before `recordsBefore` and drops the bodies of entries of
   * days before `bodiesBefore`, leaving the rollups (billing totals) as they are. Idempotent.
   */
  expire(projectId: string, cutoffs: RetentionCutoffs): Promise<{ removed: number; blanked: number }>;
}
