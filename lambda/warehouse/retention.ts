import { randomBytes } from "node:crypto";
import type { WarehouseFiles } from "../core/deletion";
import { ERASED_USAGE_PREFIX } from "../core/erased-usage";
import { errorFields, type Logger } from "../core/logger";
import type { Project } from "../core/model";
import type { ObjectStore } from "../core/object-store";
import { INTERACTIONS_PREFIX } from "../core/record";
import type { RecordCodec } from "../core/record-codec";
import {
  bodiesExpired,
  hasBodies,
  type ProjectRetention,
  type RetentionAudit,
  type RetentionIndex,
  recordsExpired,
  retentionCutoffs,
  withoutBodies,
} from "../core/retention";

/**
 * The retention run (docs/privacy.md): for each project with limits, removes the day partitions past
 * its record retention, rewrites the files of days past its body retention without bodies, and holds
 * the dashboard's index to the same limits. Rollups and the credit ledger are other tables: untouched.
 * The scheduled function in AWS and `dmt retention run` locally call this with their own adapters.
 *
 * Safe to interrupt and run again: every step is idempotent (a removed file is not listed again; a
 * rewritten file has no bodies left, and the day's note of body-free files skips it next time), and
 * each run leaves its own audit entry, `running` until it ends.
 */
export interface RetentionDeps {
  /** The project list, and one project's current limits (a fanned-out worker's). */
  projects: {
    listProjects(): Promise<Project[]>;
    getProject(projectId: string): Promise<Project | undefined>;
  };
  /** The warehouse bucket (folder locally): listing, and the audit entries and notes. */
  objects: Pick<ObjectStore, "list" | "get" | "put">;
  /** Reads, replaces and removes warehouse files with every older version (deletion's adapters). */
  files: WarehouseFiles;
  codec: RecordCodec;
  index?: RetentionIndex;
  logger: Logger;
  clock: () => number;
}

export interface RetentionOptions {
  /** Only this project (its limits still come from its settings). */
  projectId?: string;
  /** Say what would be removed; change nothing and leave no audit entry. */
  dryRun?: boolean;
}

export const RETENTION_AUDIT_PREFIX = "retention-audit/";
/** Per project and day, the files already without bodies: `retention-state/project=<id>/dt=<day>.json`. */
const BODY_NOTES_PREFIX = "retention-state/";

const PARTITION = /^interactions\/project=([^/]+)\/dt=(\d{4}-\d{2}-\d{2})\/[^/]+\.parquet$/;
const ERASED_PARTITION = /^erased-usage\/project=([^/]+)\/dt=(\d{4}-\d{2}-\d{2})\/[^/]+\.parquet$/;

/** A project a run is to do: the unit AWS fans out, one worker each (lib/retention.ts). */
export interface PlannedProject {
  projectId: string;
}

const hasLimits = (p: Project) => p.retentionDays !== undefined || p.bodyRetentionDays !== undefined;

/** A whole run in one process (the local host, `dmt retention run`): each project in turn, one audit entry. */
export async function runRetention(
  deps: RetentionDeps,
  options: RetentionOptions = {},
): Promise<RetentionAudit> {
  const started = deps.clock();
  const projects = (await deps.projects.listProjects()).filter(
    (p) => (options.projectId === undefined || p.projectId === options.projectId) && hasLimits(p),
  );
  const { audit, error } = await auditedRun(deps, projects, started, options.dryRun === true);
  if (error !== undefined) throw error;
  return audit;
}

/** Every project a run has to do (those with a limit), in the project list's order. */
export async function planRetention(
  deps: Pick<RetentionDeps, "projects">,
  options: Pick<RetentionOptions, "projectId"> = {},
): Promise<PlannedProject[]> {
  return (await deps.projects.listProjects())
    .filter((p) => (options.projectId === undefined || p.projectId === options.projectId) && hasLimits(p))
    .map((p) => ({ projectId: p.projectId }));
}

/**
 * One planned project, what a worker does: its limits read again now (a limit raised since the plan
 * is honoured), with an audit entry of its own. Undefined when the project is gone or has no limit
 * left; a failed run's audit says `failed` (the message is tried again: every step is idempotent).
 */
export async function retainPlanned(
  deps: RetentionDeps,
  planned: PlannedProject,
): Promise<RetentionAudit | undefined> {
  const project = await deps.projects.getProject(planned.projectId);
  if (!project || !hasLimits(project)) return undefined;
  return (await auditedRun(deps, [project], deps.clock(), false)).audit;
}

/** A run's id. */
export const newRetentionRunId = (): string => `ret_${randomBytes(8).toString("hex")}`;

/** Retains the projects in turn, the audit entry rewritten as each ends; a failure ends the run. */
async function auditedRun(
  deps: RetentionDeps,
  projects: Project[],
  started: number,
  dryRun: boolean,
): Promise<{ audit: RetentionAudit; error?: unknown }> {
  const audit: RetentionAudit = {
    runId: newRetentionRunId(),
    status: "running",
    dryRun,
    startedAt: new Date(started).toISOString(),
    finishedAt: null,
    projects: [],
    error: null,
  };
  const auditKey = `${RETENTION_AUDIT_PREFIX}${audit.startedAt.replace(/[:.]/g, "")}-${audit.runId}.json`;
  const save = async () => {
    if (!dryRun)
      await deps.objects.put(auditKey, Buffer.from(JSON.stringify(audit, null, 2)), "application/json");
  };
  await save();
  let error: unknown;
  try {
    for (const project of projects) {
      const done = await retainProject(deps, project, started, dryRun);
      audit.projects.push(done);
      // Progress is on record as each project ends: an interrupted run says how far it got.
      await save();
      deps.logger.info("retention: project done", { metric: "retention.project", dryRun, ...counts(done) });
    }
    audit.status = "completed";
  } catch (err) {
    error = err;
    audit.status = "failed";
    audit.error = errorFields(err).detail as string;
    deps.logger.error("retention run failed", { runId: audit.runId, ...errorFields(err) });
  } finally {
    audit.finishedAt = new Date(deps.clock()).toISOString();
    await save();
  }
  return error === undefined ? { audit } : { audit, error };
}

function counts(done: ProjectRetention) {
  const { projectId, filesRemoved, rowsRemoved, filesRewritten, rowsBlanked, indexRemoved, indexBlanked } =
    done;
  return {
    projectId,
    partitionsRemoved: done.partitionsRemoved.length,
    filesRemoved,
    rowsRemoved,
    filesRewritten,
    rowsBlanked,
    indexRemoved,
    indexBlanked,
  };
}

async function retainProject(
  deps: RetentionDeps,
  project: Project,
  now: number,
  dryRun: boolean,
): Promise<ProjectRetention> {
  const { projectId } = project;
  const cutoffs = retentionCutoffs(project, now);
  const done: ProjectRetention = {
    projectId,
    retentionDays: project.retentionDays ?? null,
    bodyRetentionDays: project.bodyRetentionDays ?? null,
    partitionsRemoved: [],
    filesRemoved: 0,
    rowsRemoved: 0,
    bodyPartitions: [],
    filesRewritten: 0,
    rowsBlanked: 0,
    indexRemoved: 0,
    indexBlanked: 0,
  };
  const days = new Map<string, string[]>();
  for await (const object of deps.objects.list(`${INTERACTIONS_PREFIX}project=${projectId}/`)) {
    const match = PARTITION.exec(object.key);
    if (!match || match[1] !== projectId) continue;
    const day = match[2] as string;
    days.set(day, [...(days.get(day) ?? []), object.key]);
  }
  // A day's erased usage (core/erased-usage.ts) goes with its records, even when a deletion left no
  // record of that day.
  const erased = new Map<string, string[]>();
  for await (const object of deps.objects.list(`${ERASED_USAGE_PREFIX}project=${projectId}/`)) {
    const match = ERASED_PARTITION.exec(object.key);
    if (!match || match[1] !== projectId || !recordsExpired(cutoffs, match[2] as string)) continue;
    erased.set(match[2] as string, [...(erased.get(match[2] as string) ?? []), object.key]);
  }
  for (const [day, keys] of erased) {
    if (!days.has(day)) done.partitionsRemoved.push(day);
    for (const key of keys) {
      const file = await deps.files.read(key);
      if (!file) continue;
      done.filesRemoved++;
      if (!dryRun) await deps.files.remove(key, file.version);
    }
  }
  for (const day of [...days.keys()].sort()) {
    const keys = days.get(day) ?? [];
    if (recordsExpired(cutoffs, day)) {
      done.partitionsRemoved.push(day);
      for (const key of keys) {
        const file = await deps.files.read(key);
        if (!file) continue;
        done.rowsRemoved += (await deps.codec.decode(file.bytes)).length;
        done.filesRemoved++;
        if (!dryRun) await deps.files.remove(key, file.version);
      }
    } else if (bodiesExpired(cutoffs, day)) {
      if (await blankBodies(deps, projectId, day, keys, done, dryRun)) done.bodyPartitions.push(day);
    }
  }
  done.partitionsRemoved.sort();
  if (deps.index && !dryRun) {
    const expired = await deps.index.expire(projectId, cutoffs);
    done.indexRemoved = expired.removed;
    done.indexBlanked = expired.blanked;
  }
  return done;
}

/** Rewrites the day's files that still hold bodies; true if any did. */
async function blankBodies(
  deps: RetentionDeps,
  projectId: string,
  day: string,
  keys: string[],
  done: ProjectRetention,
  dryRun: boolean,
): Promise<boolean> {
  const noteKey = `${BODY_NOTES_PREFIX}project=${projectId}/dt=${day}.json`;
  const noted = await deps.objects.get(noteKey);
  const clean = new Set<string>(noted ? (JSON.parse(Buffer.from(noted).toString("utf8")) as string[]) : []);
  const todo = keys.filter((key) => !clean.has(key));
  if (todo.length === 0) return false;
  let changed = false;
  for (const key of todo) {
    const file = await deps.files.read(key);
    if (!file) continue;
    const records = await deps.codec.decode(file.bytes);
    const withBodies = records.filter(hasBodies).length;
    if (withBodies > 0) {
      changed = true;
      done.filesRewritten++;
      done.rowsBlanked += withBodies;
      if (!dryRun) await deps.files.replace(key, deps.codec.encode(records.map(withoutBodies)), file.version);
    }
    clean.add(key);
  }
  if (!dryRun) {
    const still = keys.filter((key) => clean.has(key));
    await deps.objects.put(noteKey, Buffer.from(JSON.stringify(still)), "application/json");
  }
  return changed;
}
