import { unmatchedModelPatterns, validateTpm } from "./budgets";
import { validatePattern } from "./endpoints";
import { errors } from "./errors";
import { displayPrefix, generateKey } from "./keys";
import {
  type ApiKeyRecord,
  isTier,
  PROJECT_ID_PATTERN,
  type Project,
  type RateLimit,
  type Tier,
} from "./model";
import { ConflictError, type Store } from "./ports";
import { isKeyStoreLevel, KEY_STORE_LEVELS, type KeyStoreLevel } from "./privacy";

/** A key's store level: it may only keep less than its project (`full` is the project's to give). */
export function keyStoreOf(value: string): KeyStoreLevel {
  if (!isKeyStoreLevel(value)) {
    throw errors.invalidField(
      "store",
      `a key's level must be one of ${KEY_STORE_LEVELS.join(", ")} (a key can keep less than its project, never more)`,
    );
  }
  return value;
}

/**
 * Project and key operations with their validation, shared by the CLI and the dashboard API.
 * Invalid input throws an ApiError (400 / 404 / 409-like) with a message fit for a person.
 */

export async function createProject(
  store: Store,
  projectId: string,
  tier: string,
  now: number,
): Promise<Project> {
  if (!PROJECT_ID_PATTERN.test(projectId)) {
    throw errors.invalidField(
      "project",
      "use 2-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
    );
  }
  if (!isTier(tier)) throw errors.invalidField("tier", "must be one of free, pro, enterprise");
  const project: Project = { projectId, tier: tier as Tier, createdAt: now };
  try {
    await store.createProject(project);
  } catch (err) {
    if (err instanceof ConflictError)
      throw errors.badRequest("already_exists", `Project '${projectId}' already exists.`);
    throw err;
  }
  return project;
}

export interface NewKeyInput {
  projectId: string;
  name: string;
  allow?: string[];
  rateLimit?: RateLimit;
  expiresAt?: number;
  /** Keep less than the project for this key's calls: `metadata` or `none`. */
  store?: string;
  /** Model names or globs the key may call (core/budgets.ts parseModels). */
  models?: string[];
  tpm?: number;
}

/** The public view of a key: everything but the hash. */
export type KeyView = Omit<ApiKeyRecord, "secretHash"> & {
  prefix: string;
  status: "active" | "revoked" | "expired";
};

export function keyView(record: ApiKeyRecord, now: number): KeyView {
  const { secretHash: _hash, ...rest } = record;
  const status = record.revoked
    ? "revoked"
    : record.expiresAt !== undefined && record.expiresAt <= now
      ? "expired"
      : "active";
  return { ...rest, prefix: displayPrefix(record.keyId), status };
}

const MAX_NAME = 100;
const MAX_PATTERNS = 50;

export async function createKey(
  store: Store,
  input: NewKeyInput,
  now: number,
): Promise<{ key: string; record: ApiKeyRecord }> {
  const name = input.name;
  if (name.length === 0) throw errors.invalidField("name", "must not be empty");
  if (name.length > MAX_NAME) throw errors.invalidField("name", `must be at most ${MAX_NAME} characters`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(name))
    throw errors.invalidField("name", "must not contain control characters");
  if (input.allow) {
    if (input.allow.length === 0 || input.allow.length > MAX_PATTERNS) {
      throw errors.invalidField("allow", `give 1 to ${MAX_PATTERNS} endpoint patterns`);
    }
    for (const pattern of input.allow) {
      const problem = validatePattern(pattern);
      if (problem) throw errors.invalidField("allow", problem);
    }
  }
  if (input.rateLimit) validateRateLimit(input.rateLimit);
  const level = input.store === undefined ? undefined : keyStoreOf(input.store);
  if (input.tpm !== undefined) validateTpm(input.tpm);
  if (input.expiresAt !== undefined && !(input.expiresAt > now)) {
    throw errors.invalidField("expires", "must be in the future");
  }
  const project = await store.getProject(input.projectId);
  if (!project) throw errors.notFound(`Project '${input.projectId}' does not exist.`);

  const generated = generateKey();
  const record: ApiKeyRecord = {
    keyId: generated.keyId,
    projectId: project.projectId,
    name,
    secretHash: generated.secretHash,
    createdAt: now,
    revoked: false,
    ...(input.allow ? { allow: [...new Set(input.allow)] } : {}),
    ...(input.rateLimit ? { rateLimit: input.rateLimit } : {}),
    ...(input.expiresAt !== undefined ? { expiresAt: input.expiresAt } : {}),
    ...(level !== undefined ? { store: level } : {}),
    ...(input.models ? { models: input.models } : {}),
    ...(input.tpm !== undefined ? { tpm: input.tpm } : {}),
  };
  await store.createKey(record);
  return { key: generated.key, record };
}

export function validateRateLimit(limit: RateLimit): void {
  for (const field of ["rpm", "burst"] as const) {
    const value = limit[field];
    if (!Number.isSafeInteger(value) || value < 1 || value > 1_000_000) {
      throw errors.invalidField(field, "must be a whole number from 1 to 1000000");
    }
  }
}

export async function revokeKey(store: Store, keyId: string, now: number): Promise<ApiKeyRecord> {
  const revoked = await store.revokeKey(keyId, now);
  if (!revoked) throw errors.notFound(`Key '${keyId}' does not exist.`);
  return revoked;
}

/** A key's policies to change: `models` undefined keeps them, `*` alone allows every model; `tpm` 0 removes the limit. */
export interface KeyPolicyInput {
  models?: string[];
  tpm?: number;
}

/**
 * Changes a key's model allowlist and tokens-per-minute limit; takes effect within the key cache time.
 * Returns the key and a warning per glob that matches no model of the catalogue (a newer model may).
 */
export async function updateKey(
  store: Store,
  keyId: string,
  input: KeyPolicyInput,
  catalogueModels: readonly string[],
): Promise<{ record: ApiKeyRecord; warnings: string[] }> {
  if (input.tpm !== undefined && input.tpm !== 0) validateTpm(input.tpm);
  const everyModel = input.models?.length === 1 && input.models[0] === "*";
  const record = await store.updateKeyPolicy(keyId, {
    ...(input.models !== undefined ? { models: everyModel ? null : input.models } : {}),
    ...(input.tpm !== undefined ? { tpm: input.tpm === 0 ? null : input.tpm } : {}),
  });
  if (!record) throw errors.notFound(`Key '${keyId}' does not exist.`);
  return { record, warnings: modelWarnings(input.models, catalogueModels) };
}

/** One line per `--models` glob that matches no model of the price catalogue. */
export function modelWarnings(
  models: readonly string[] | undefined,
  catalogueModels: readonly string[],
): string[] {
  if (!models || catalogueModels.length === 0) return [];
  return unmatchedModelPatterns(models, catalogueModels).map(
    (pattern) => `'${pattern}' matches no model of the price catalogue`,
  );
}
