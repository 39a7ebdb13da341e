import { createHmac } from "node:crypto";
import { errors } from "./errors";

/**
 * What a project's records keep (docs/privacy.md):
 * - `full`: every column, bodies included (each capped at 64 KiB);
 * - `metadata`: no request or response body; everything billing and usage need;
 * - `none`: as `metadata`, and the user id only as a keyed hash (`hmac:<hex>`).
 * Ordered from the most private: a key, or a request's `X-DMT-Store` header, may only move left.
 */
export const STORE_LEVELS = ["none", "metadata", "full"] as const;
export type StoreLevel = (typeof STORE_LEVELS)[number];

/** The levels a key may be held to: a key can only keep less than its project. */
export const KEY_STORE_LEVELS = ["none", "metadata"] as const;
export type KeyStoreLevel = (typeof KEY_STORE_LEVELS)[number];

/** The request header that asks for less than the key's level for one call. */
export const STORE_HEADER = "x-dmt-store";

export const DEFAULT_STORE_LEVEL: StoreLevel = "full";

/** Ten years: the longest retention a project may set. */
export const MAX_RETENTION_DAYS = 3650;

export function isStoreLevel(value: unknown): value is StoreLevel {
  return typeof value === "string" && (STORE_LEVELS as readonly string[]).includes(value);
}

export function isKeyStoreLevel(value: unknown): value is KeyStoreLevel {
  return typeof value === "string" && (KEY_STORE_LEVELS as readonly string[]).includes(value);
}

/** The most private of some levels. */
export function lowestLevel(...levels: (StoreLevel | undefined)[]): StoreLevel {
  let lowest: StoreLevel = "full";
  for (const level of levels) {
    if (level !== undefined && STORE_LEVELS.indexOf(level) < STORE_LEVELS.indexOf(lowest)) lowest = level;
  }
  return lowest;
}

/** What a key stores: its project's level, lowered by the key's own. */
export function keyStoreLevel(project: { store?: StoreLevel }, key: { store?: KeyStoreLevel }): StoreLevel {
  return lowestLevel(project.store ?? DEFAULT_STORE_LEVEL, key.store);
}

/**
 * The level of one call: the key's, or less when the `X-DMT-Store` header asks for less. A header
 * that names no level, or one above the key's, is refused (400): a client that believes its bodies
 * are kept, or not, must not be silently wrong.
 */
export function requestStoreLevel(allowed: StoreLevel, header: string | undefined): StoreLevel {
  if (header === undefined) return allowed;
  const asked = header.trim().toLowerCase();
  if (!isStoreLevel(asked)) {
    throw errors.invalidHeader("X-DMT-Store", `must be one of ${STORE_LEVELS.join(", ")}.`);
  }
  if (STORE_LEVELS.indexOf(asked) > STORE_LEVELS.indexOf(allowed)) {
    throw errors.invalidHeader(
      "X-DMT-Store",
      `asks for '${asked}', but this key stores at most '${allowed}'; a request may only ask for less.`,
    );
  }
  return asked;
}

/**
 * What a call's record keeps: the key's level, or less if `X-DMT-Store` asked. A call refused for
 * its header is recorded without bodies whatever it asked: it may have meant to ask for less.
 */
export function recordLevel(call: {
  auth: { store: StoreLevel };
  storeHeader?: string | undefined;
}): StoreLevel {
  try {
    return requestStoreLevel(call.auth.store, call.storeHeader);
  } catch {
    return lowestLevel(call.auth.store, "metadata");
  }
}

/** A project's privacy settings, as the store keeps them on the project. */
export interface PrivacySettings {
  store?: StoreLevel;
  /** Records older than this many days are removed, by whole day partitions; absent: kept. */
  retentionDays?: number;
  /** Bodies older than this many days are blanked; at most `retentionDays`. */
  bodyRetentionDays?: number;
}

/**
 * Checks a change to a project's settings against what it has, and returns the result. Retention is
 * 1 to 3650 days; body retention cannot outlast the records (it would mean nothing). `null` clears.
 */
export function mergePrivacySettings(
  current: PrivacySettings,
  change: { store?: unknown; retentionDays?: unknown; bodyRetentionDays?: unknown },
): PrivacySettings {
  const next: PrivacySettings = { ...current };
  if (change.store !== undefined) {
    if (!isStoreLevel(change.store)) {
      throw errors.invalidField("store", `must be one of ${STORE_LEVELS.join(", ")}.`);
    }
    next.store = change.store;
  }
  for (const name of ["retentionDays", "bodyRetentionDays"] as const) {
    const value = change[name];
    if (value === undefined) continue;
    if (value === null) {
      delete next[name];
      continue;
    }
    if (!Number.isInteger(value) || (value as number) < 1 || (value as number) > MAX_RETENTION_DAYS) {
      throw errors.invalidField(name, `must be a whole number of days from 1 to ${MAX_RETENTION_DAYS}.`);
    }
    next[name] = value as number;
  }
  const { retentionDays, bodyRetentionDays } = next;
  if (bodyRetentionDays !== undefined && retentionDays !== undefined && bodyRetentionDays > retentionDays) {
    throw errors.invalidField(
      "bodyRetentionDays",
      `(${bodyRetentionDays}) cannot be longer than the record retention (${retentionDays} days).`,
    );
  }
  return next;
}

/**
 * The keyed stand-in of a user id at level `none`: HMAC-SHA256 under the deployment's secret of
 * `<project>:<user id>`. The same user keeps the same stand-in, so per-user usage and deletion
 * requests still find it; without the secret it cannot be reversed by trying likely ids.
 */
export interface UserIdHasher {
  keyed(projectId: string, userId: string): Promise<string>;
}

export const KEYED_USER_PREFIX = "hmac:";

/** What a local deployment derives its user-id hashing key from its master key file with. */
export const USER_ID_KEY_PURPOSE = "dmt user-id hashing key v1";

export function hmacUserIdHasher(secret: () => Promise<Uint8Array> | Uint8Array): UserIdHasher {
  return {
    async keyed(projectId, userId) {
      const mac = createHmac("sha256", await secret())
        .update(`${projectId}:${userId}`, "utf8")
        .digest("hex");
      return `${KEYED_USER_PREFIX}${mac}`;
    },
  };
}

/** Where the settings live (adapters/dynamodb/privacy-settings.ts): the project and key items. */
export interface PrivacySettingsStore {
  /** Writes `next` if the project still holds `current`; undefined on a lost race or no project. */
  setProject(projectId: string, current: PrivacySettings, next: PrivacySettings): Promise<unknown>;
}

/** The settings a project has (defaults filled in), as the CLI and the dashboard show them. */
export function privacyView(project: PrivacySettings): {
  store: StoreLevel;
  retentionDays: number | null;
  bodyRetentionDays: number | null;
} {
  return {
    store: project.store ?? DEFAULT_STORE_LEVEL,
    retentionDays: project.retentionDays ?? null,
    bodyRetentionDays: project.bodyRetentionDays ?? null,
  };
}

/**
 * Changes a project's privacy settings: read, check the result as a whole, write on the condition
 * that nothing changed meanwhile (a few tries). A missing project is a 404.
 */
export async function updatePrivacySettings(
  projects: { getProject(projectId: string): Promise<PrivacySettings | undefined> },
  settings: PrivacySettingsStore,
  projectId: string,
  change: Parameters<typeof mergePrivacySettings>[1],
): Promise<PrivacySettings> {
  for (let attempt = 0; attempt < 5; attempt++) {
    const project = await projects.getProject(projectId);
    if (!project) throw errors.notFound(`Project '${projectId}' does not exist.`);
    const current = {
      ...(project.store !== undefined && { store: project.store }),
      ...(project.retentionDays !== undefined && { retentionDays: project.retentionDays }),
      ...(project.bodyRetentionDays !== undefined && { bodyRetentionDays: project.bodyRetentionDays }),
    };
    const next = mergePrivacySettings(current, change);
    if (await settings.setProject(projectId, current, next)) return next;
  }
  throw new Error("the project's settings kept changing while being updated");
}
