/**
 * Privacy deletion: the request a project sends to `POST /api/v1/data`, what it deletes, the tombstones
 * that keep records still in flight out of the warehouse, and the ports the workflow's steps use
 * (docs/deletion.md). The steps themselves are declared in deletion-steps.ts.
 */
import { createHash, randomBytes } from "node:crypto";
import * as z from "zod/mini";
import { errors } from "./errors";
import type { InteractionRecord } from "./record";
import { decide } from "./request-schema";

/** Most transaction ids one request may name. */
export const DELETION_MAX_TRANSACTION_IDS = 1000;
/** Longest user id, in characters (a 10 KB one is refused, not truncated). */
export const DELETION_MAX_USER_ID_LENGTH = 256;
export const DELETION_MAX_REASON_LENGTH = 1000;

/** Our transaction ids, as the record schema admits them (record.ts); nothing else can be stored. */
const TRANSACTION_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
const REQUEST_ID = /^del_[0-9a-f]{24}$/;
const FIELDS = ["user_id", "transaction_ids", "reason"];

export const DELETION_STATUSES = ["queued", "running", "completed", "failed"] as const;
export type DeletionStatus = (typeof DELETION_STATUSES)[number];

/** A validated `POST /api/v1/data` body. */
export interface DeletionRequestInput {
  reason: string;
  userId?: string;
  /** Without duplicates, in the order given. */
  transactionIds?: string[];
}

/**
 * Validates the request body. Unknown fields are refused (400), as the exports endpoint does: a
 * misspelt `userid` must not turn into a request that deletes nothing. Values are never echoed.
 */
/** The body of `POST /api/v1/data`: what it accepts, and what the API description shows. */
export const deletionRequestSchema = z
  .strictObject({
    reason: z.string().check(
      z.maxLength(DELETION_MAX_REASON_LENGTH),
      z.refine((v) => typeof v === "string" && v.trim() !== "", "must not be empty."),
    ),
    user_id: z.optional(z.string().check(z.minLength(1), z.maxLength(DELETION_MAX_USER_ID_LENGTH))),
    transaction_ids: z.optional(
      z
        .array(z.string().check(z.regex(TRANSACTION_ID)))
        .check(z.minLength(1), z.maxLength(DELETION_MAX_TRANSACTION_IDS)),
    ),
  })
  .check(
    z.refine(
      (b) => b.user_id !== undefined || b.transaction_ids !== undefined,
      "needs user_id or transaction_ids.",
    ),
  );

export function parseDeletionRequest(body: Record<string, unknown>): DeletionRequestInput {
  return decide(deletionRequestSchema, body, () => explainDeletionRequest(body));
}

/** The hand-written checks that word a refusal (exported for the test that holds them to the schema). */
export function explainDeletionRequest(body: Record<string, unknown>): DeletionRequestInput {
  const unknown = Object.keys(body).filter((k) => !FIELDS.includes(k));
  if (unknown.length > 0) {
    const names = unknown.map((k) => `'${k.slice(0, 64)}'`).join(", ");
    throw errors.invalidField(
      "body",
      `unknown ${unknown.length === 1 ? "field" : "fields"} ${names}; allowed: ${FIELDS.join(", ")}.`,
    );
  }

  if (body.reason === undefined) throw errors.missingField("reason");
  if (typeof body.reason !== "string") throw errors.invalidField("reason", "must be a string.");
  if (body.reason.trim() === "") throw errors.invalidField("reason", "must not be empty.");
  if (body.reason.length > DELETION_MAX_REASON_LENGTH) {
    throw errors.invalidField("reason", `must be at most ${DELETION_MAX_REASON_LENGTH} characters.`);
  }
  const input: DeletionRequestInput = { reason: body.reason };

  if (body.user_id !== undefined) {
    if (typeof body.user_id !== "string") throw errors.invalidField("user_id", "must be a string.");
    if (body.user_id === "") throw errors.invalidField("user_id", "must not be empty.");
    if (body.user_id.length > DELETION_MAX_USER_ID_LENGTH) {
      throw errors.invalidField("user_id", `must be at most ${DELETION_MAX_USER_ID_LENGTH} characters.`);
    }
    input.userId = body.user_id;
  }

  if (body.transaction_ids !== undefined) {
    const ids = body.transaction_ids;
    if (!Array.isArray(ids)) throw errors.invalidField("transaction_ids", "must be an array of strings.");
    if (ids.length === 0) throw errors.invalidField("transaction_ids", "must hold at least one id.");
    if (ids.length > DELETION_MAX_TRANSACTION_IDS) {
      throw errors.invalidField(
        "transaction_ids",
        `holds ${ids.length} ids; a request names at most ${DELETION_MAX_TRANSACTION_IDS}.`,
      );
    }
    ids.forEach((id, i) => {
      if (typeof id !== "string") throw errors.invalidField(`transaction_ids[${i}]`, "must be a string.");
      if (!TRANSACTION_ID.test(id)) {
        throw errors.invalidField(
          `transaction_ids[${i}]`,
          "is not a transaction id (1 to 128 letters, digits, '_', '.', ':' or '-').",
        );
      }
    });
    input.transactionIds = [...new Set(ids as string[])];
  }

  if (input.userId === undefined && input.transactionIds === undefined) {
    throw errors.badRequest("missing_field", "Provide 'user_id' or 'transaction_ids' (or both).");
  }
  return input;
}

export function newDeletionRequestId(): string {
  return `del_${randomBytes(12).toString("hex")}`;
}

export function isDeletionRequestId(value: string): boolean {
  return REQUEST_ID.test(value);
}

/**
 * The stand-in for a user id in the audit trail, the tombstones and the queries: SHA-256 (hex) of
 * `<project id>:<user id>` (project ids hold no ':'), so the same user in two projects does not
 * correlate. Anyone holding the id can recompute it, to answer "was this user's data deleted?". The
 * query engines compute the same (lambda/deletion/query.ts), so the user id never reaches a query's
 * text or parameters, which Athena keeps in its history.
 */
export function hashUserId(projectId: string, userId: string): string {
  return createHash("sha256").update(`${projectId}:${userId}`, "utf8").digest("hex");
}

/**
 * What one request deletes: the project's rows of the user, and its rows with those transaction ids,
 * among calls that started up to `upTo` (when the request was accepted). Later calls are new data.
 */
export interface DeletionTarget {
  projectId: string;
  /** hashUserId of the user. */
  userIdHash?: string;
  /** hashUserId of the user's keyed stand-in (`hmac:...`), which records of level `none` hold. */
  keyedUserIdHash?: string;
  transactionIds: readonly string[];
  /** Epoch ms, included. */
  upTo: number;
}

/** The predicate of a target, the same as the SQL the query engines run (lambda/deletion/query.ts). */
export function deletionMatcher(target: DeletionTarget): (record: InteractionRecord) => boolean {
  const ids = new Set(target.transactionIds);
  const { projectId, userIdHash, keyedUserIdHash, upTo } = target;
  // A file holds a few users many times over: each one is hashed once.
  const users = new Map<string, boolean>();
  const isUser = (userId: string) => {
    let matches = users.get(userId);
    if (matches === undefined) {
      const hash = hashUserId(projectId, userId);
      matches = hash === userIdHash || (keyedUserIdHash !== undefined && hash === keyedUserIdHash);
      users.set(userId, matches);
    }
    return matches;
  };
  return (record) =>
    record.project_id === projectId &&
    record.started_at <= upTo &&
    (ids.has(record.transaction_id) ||
      (userIdHash !== undefined && record.user_id !== null && isUser(record.user_id)));
}

/** A deletion request as stored: its state, and the audit trail it leaves. */
export interface DeletionRequestRecord {
  projectId: string;
  requestId: string;
  status: DeletionStatus;
  reason: string;
  /** hashUserId of the user, when the request names one; kept for good. */
  userIdHash?: string;
  /** The user id itself, only until the request completes (the steps need it). */
  userId?: string;
  /** The ids themselves, only until the request completes. */
  transactionIds?: string[];
  transactionIdCount: number;
  /** Epoch ms. */
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  updatedAt: number;
  /** Set when the request completes. */
  counts?: DeletionFileCounts;
  copiesPurged: number;
  /** Why it failed (an error name and message of ours, never row data). */
  error?: string;
}

/** What the rewrite step did to the warehouse files. */
export interface DeletionFileCounts {
  rowsDeleted: number;
  /** Files rewritten without the matching rows. */
  filesRewritten: number;
  /** Files that held only matching rows, removed. */
  filesDeleted: number;
}

export function newDeletionRequest(
  projectId: string,
  input: DeletionRequestInput,
  now: number,
): DeletionRequestRecord {
  return {
    projectId,
    requestId: newDeletionRequestId(),
    status: "queued",
    reason: input.reason,
    ...(input.userId !== undefined && {
      userIdHash: hashUserId(projectId, input.userId),
      userId: input.userId,
    }),
    ...(input.transactionIds && { transactionIds: input.transactionIds }),
    transactionIdCount: input.transactionIds?.length ?? 0,
    createdAt: now,
    updatedAt: now,
    copiesPurged: 0,
  };
}

/** The target of a request that has not completed yet (a completed one no longer holds its ids). */
export function targetOf(request: DeletionRequestRecord, keyedUserIdHash?: string): DeletionTarget {
  return {
    projectId: request.projectId,
    ...(request.userIdHash !== undefined && { userIdHash: request.userIdHash }),
    ...(keyedUserIdHash !== undefined && { keyedUserIdHash }),
    transactionIds: request.transactionIds ?? [],
    upTo: request.createdAt,
  };
}

/**
 * What the warehouse consumer checks: records of the project that started up to `upTo` and belong to
 * the user (by hash: a tombstone never holds the user id) or carry one of the ids are dropped.
 */
export interface Tombstone {
  projectId: string;
  requestId: string;
  upTo: number;
  userIdHash?: string;
  keyedUserIdHash?: string;
  transactionIds?: string[];
}

export function tombstoneOf(request: DeletionRequestRecord, keyedUserIdHash?: string): Tombstone {
  return {
    projectId: request.projectId,
    requestId: request.requestId,
    ...(keyedUserIdHash !== undefined && { keyedUserIdHash }),
    upTo: request.createdAt,
    ...(request.userIdHash !== undefined && { userIdHash: request.userIdHash }),
    ...(request.transactionIds && { transactionIds: request.transactionIds }),
  };
}

/** The predicate "a tombstone covers this record" over a set of tombstones. */
export function tombstoneMatcher(tombstones: readonly Tombstone[]): (record: InteractionRecord) => boolean {
  const byProject = new Map<string, ((record: InteractionRecord) => boolean)[]>();
  for (const t of tombstones) {
    const list = byProject.get(t.projectId) ?? [];
    list.push(
      deletionMatcher({
        projectId: t.projectId,
        ...(t.userIdHash !== undefined && { userIdHash: t.userIdHash }),
        ...(t.keyedUserIdHash !== undefined && { keyedUserIdHash: t.keyedUserIdHash }),
        transactionIds: t.transactionIds ?? [],
        upTo: t.upTo,
      }),
    );
    byProject.set(t.projectId, list);
  }
  return (record) => byProject.get(record.project_id)?.some((matches) => matches(record)) ?? false;
}

// --- Ports

/** One page of a project's requests, newest first. */
export interface DeletionRequestPage {
  requests: DeletionRequestRecord[];
  /** Pass back to get the next (older) page; absent on the last page. */
  cursor?: string;
}

/** The requests and their progress: DynamoDB in AWS and locally (lambda/adapters/dynamodb/deletion-requests.ts). */
export interface DeletionRequestStore {
  create(request: DeletionRequestRecord): Promise<void>;
  /** The project's request, or undefined (another project's id reads as absent). */
  get(projectId: string, requestId: string): Promise<DeletionRequestRecord | undefined>;
  /**
   * The project's requests, newest first (the dashboard's list). A malformed cursor is refused with a
   * 400 ApiError; a cursor only ever positions within the project's own requests.
   */
  list(projectId: string, options: { limit: number; cursor?: string }): Promise<DeletionRequestPage>;
  /** queued (or failed, on a re-run) -> running; a completed request stays completed. */
  markRunning(projectId: string, requestId: string, at: number): Promise<void>;
  /**
   * Notes what the rewrite of one file removes, before the file is replaced; idempotent per file, so
   * a re-run after a crash neither loses nor double-counts a file.
   */
  recordFile(
    projectId: string,
    requestId: string,
    file: { key: string; rows: number; removed: boolean },
  ): Promise<void>;
  /** The sums of what recordFile noted. */
  fileCounts(projectId: string, requestId: string): Promise<DeletionFileCounts>;
  addCopiesPurged(projectId: string, requestId: string, count: number, at: number): Promise<void>;
  /** Completed with its counts; the user id and transaction ids are dropped from the record. */
  complete(projectId: string, requestId: string, counts: DeletionFileCounts, at: number): Promise<void>;
  /** Failed with a reason; a completed request is left as it is. */
  fail(projectId: string, requestId: string, error: string, at: number): Promise<void>;
  /** Requests queued or running (the local runner resumes them after a restart). */
  unfinished(): Promise<{ projectId: string; requestId: string }[]>;
}

/** What the warehouse consumer reads (lambda/warehouse/consumer.ts). */
export interface TombstoneReader {
  /** Every tombstone of these projects, read consistently. */
  forProjects(projectIds: readonly string[]): Promise<Tombstone[]>;
}

export interface TombstoneStore extends TombstoneReader {
  put(tombstone: Tombstone): Promise<void>;
}

/**
 * A copy of interaction data outside the warehouse files that a deletion must purge: the dashboard's
 * interaction index and rollups, bucket exports, query results. Each call is idempotent and returns
 * how many items (rows, files) it removed; purging what is already gone returns 0.
 */
export interface CopyPurger {
  /** What it purges, for the request's logs and failure reason (`bucket exports`). */
  readonly name: string;
  purgeUser(projectId: string, userId: string): Promise<number>;
  purgeTransactions(projectId: string, transactionIds: readonly string[]): Promise<number>;
}

/** Starts the workflow of a recorded request (the local runner); in AWS the table's stream does it. */
export interface DeletionStarter {
  start(projectId: string, requestId: string): Promise<void>;
}

/** Files holding matching rows: Athena's `"$path"`, DuckDB's `filename`. */
export interface AffectedFile {
  /** The object key under the warehouse root: `interactions/project=<id>/dt=<day>/<name>.parquet`. */
  key: string;
  rows: number;
}

/** The queries of the workflow: Athena in AWS, DuckDB locally (lambda/deletion/query*.ts). */
export interface DeletionQuery {
  affectedFiles(target: DeletionTarget): Promise<AffectedFile[]>;
  countMatching(target: DeletionTarget): Promise<number>;
}

/** A warehouse file as read, with the version a replacement must still find (optimistic concurrency). */
export interface WarehouseFile {
  bytes: Uint8Array;
  version: string;
}

/** The warehouse files as the rewrite step sees them (lambda/adapters/{fs,s3}/deletion-files.ts). */
export interface WarehouseFiles {
  read(key: string): Promise<WarehouseFile | undefined>;
  /**
   * Atomically replaces the file if it is still at `version` (else FileChangedError, retried), then
   * removes its older versions where the store keeps versions.
   */
  replace(key: string, bytes: Uint8Array, version: string): Promise<void>;
  /** Removes the file, and every older version of it, if it is still at `version`. */
  remove(key: string, version: string): Promise<void>;
}

/** The file changed since it was read: the step is retried and reads it again. */
export class FileChangedError extends Error {
  override name = "FileChangedError";
}
