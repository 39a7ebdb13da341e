import type { EventPublisher } from "../core/cloudevent";
import {
  type CopyPurger,
  type DeletionQuery,
  type DeletionRequestRecord,
  type DeletionRequestStore,
  deletionMatcher,
  FileChangedError,
  hashUserId,
  type TombstoneStore,
  targetOf,
  tombstoneOf,
  type WarehouseFiles,
} from "../core/deletion";
import { deletionManifestKey, encodeDeletionManifest } from "../core/deletion-manifest";
import {
  DeletionAlreadyCompletedError,
  DeletionFatalError,
  type DeletionState,
  type DeletionStepHandlers,
  MAX_VERIFY_ROUNDS,
  type RewriteItem,
  type RewriteOutcome,
} from "../core/deletion-steps";
import { type ErasedUsageCodec, erasedUsageKey, erasedUsageOf } from "../core/erased-usage";
import { errorFields, type Logger } from "../core/logger";
import type { ObjectStore } from "../core/object-store";
import type { UserIdHasher } from "../core/privacy";
import { INTERACTIONS_PREFIX, recordDay } from "../core/record";
import type { RecordCodec } from "../core/record-codec";
import { publishAfter } from "../events/account-events";

export interface DeletionStepDeps {
  requests: DeletionRequestStore;
  tombstones: TombstoneStore;
  query: DeletionQuery;
  files: WarehouseFiles;
  /** Where FindFiles writes its manifest: the warehouse bucket (or folder), under `deletion-manifests/`. */
  manifests: Pick<ObjectStore, "put">;
  /** The warehouse files' format, to rewrite them (Parquet: `adapters/parquet/codec.ts`). */
  codec: RecordCodec;
  /**
   * Where the removed calls' money and counts go, summed without anything personal (core/erased-usage.ts):
   * the warehouse bucket (or folder), under `erased-usage/`.
   */
  erasedUsage: { objects: Pick<ObjectStore, "put" | "delete">; codec: ErasedUsageCodec };
  /** Every other copy: the dashboard's index and rollups, bucket exports, query results. */
  purgers: readonly CopyPurger[];
  /** Where `deletion.completed` goes; absent: no event. */
  events?: EventPublisher;
  /** The keyed stand-in of a user id that records of level `none` hold instead of it. */
  userIds: UserIdHasher;
  logger: Logger;
  clock?: () => number;
}

const PARQUET = "application/vnd.apache.parquet";

/** Longest failure reason kept on a request. */
const MAX_ERROR_LENGTH = 500;

/** Step Functions hands a Lambda error over as `Cause`: JSON with `errorMessage`; locally, the message. */
function causeMessage(cause: string): string {
  try {
    const parsed = JSON.parse(cause) as { errorMessage?: unknown };
    if (typeof parsed.errorMessage === "string") return parsed.errorMessage;
  } catch {
    // Not JSON: the message itself.
  }
  return cause;
}

/**
 * The handlers of the deletion workflow's steps (core/deletion-steps.ts), the same in the step Lambda
 * and the local runner. Each is idempotent: run again after a crash, it finds its work done or does it
 * again with the same result.
 */
export function createDeletionSteps(deps: DeletionStepDeps): DeletionStepHandlers {
  const clock = deps.clock ?? Date.now;

  /** The request, not yet completed: a completed one ends a (duplicate) run as succeeded. */
  async function pending(state: { projectId: string; requestId: string }): Promise<DeletionRequestRecord> {
    const request = await deps.requests.get(state.projectId, state.requestId);
    if (!request) throw new DeletionFatalError("the deletion request does not exist");
    if (request.status === "completed") throw new DeletionAlreadyCompletedError("the request is completed");
    return request;
  }

  /** The user's keyed stand-in, hashed as the user id is: rows of level `none` match by it. */
  async function keyedHash(request: DeletionRequestRecord): Promise<string | undefined> {
    if (request.userId === undefined) return undefined;
    return hashUserId(request.projectId, await deps.userIds.keyed(request.projectId, request.userId));
  }
  const target = async (request: DeletionRequestRecord) => targetOf(request, await keyedHash(request));

  const base = (state: DeletionState): DeletionState => ({
    projectId: state.projectId,
    requestId: state.requestId,
    ...(state.round !== undefined && { round: state.round }),
  });

  return {
    async record(state) {
      const request = await pending(state);
      // The tombstone first: from here on the consumer drops what the request covers.
      await deps.tombstones.put(tombstoneOf(request, await keyedHash(request)));
      await deps.requests.markRunning(state.projectId, state.requestId, clock());
      return base(state);
    },

    async find(state) {
      const request = await pending(state);
      // One query per round, however many files: the list goes to the object store, only its key and
      // count travel in the state (the map reads the list from there).
      const files = await deps.query.affectedFiles(await target(request));
      const manifest = deletionManifestKey(state.projectId, state.requestId, state.round ?? 0);
      await deps.manifests.put(manifest, encodeDeletionManifest(files), "application/jsonl");
      deps.logger.info("deletion files found", { ...base(state), files: files.length, manifest });
      return { ...base(state), manifest, files: files.length };
    },

    async rewrite(item: RewriteItem): Promise<RewriteOutcome> {
      const request = await pending(item);
      // The query names the files; a key outside the project's folder is a bug, not something to rewrite.
      if (!item.key.startsWith(`${INTERACTIONS_PREFIX}project=${item.projectId}/`)) {
        throw new DeletionFatalError("a file outside the project's folder");
      }
      const file = await deps.files.read(item.key);
      if (!file) {
        // Gone since the query named it (removed by another request, or by retention): nothing of it
        // is left to delete. Reported, not a failure; Verify still checks the whole project.
        deps.logger.warn("deletion: a file of the manifest is gone; skipped", {
          metric: "deletion.file_missing",
          projectId: item.projectId,
          requestId: item.requestId,
          key: item.key,
        });
        return "missing";
      }
      const records = await deps.codec.decode(file.bytes);
      const matches = deletionMatcher(await target(request));
      const kept = records.filter((r) => !matches(r));
      const rows = records.length - kept.length;
      if (rows === 0) return "unchanged";
      // What the removed calls cost and used stays, summed per key, model and mode with nothing personal,
      // before the file changes. Its key follows the file's version: a re-run over the same version
      // overwrites it (never counted twice); once the file is replaced it no longer matches, so nothing
      // is written for it again.
      const erasedKeys: string[] = [];
      for (const [day, erased] of erasedUsageOf(records.filter(matches), recordDay)) {
        const key = erasedUsageKey(item.projectId, day, item.requestId, `${item.key}@${file.version}`);
        await deps.erasedUsage.objects.put(key, deps.erasedUsage.codec.encode(erased), PARQUET);
        erasedKeys.push(key);
      }
      // Counted before the file changes: if we crash after the change, a re-run finds nothing to
      // rewrite here, and the count stays right.
      await deps.requests.recordFile(item.projectId, item.requestId, {
        key: item.key,
        rows,
        removed: kept.length === 0,
      });
      try {
        if (kept.length === 0) {
          await deps.files.remove(item.key, file.version);
          return "removed";
        }
        await deps.files.replace(item.key, deps.codec.encode(kept), file.version);
        return "rewritten";
      } catch (err) {
        // Another writer changed the file first (another deletion of the same rows, compaction): the
        // sums of this version were not removed by us, so they go; the retry reads the file again.
        if (err instanceof FileChangedError) {
          for (const key of erasedKeys) await deps.erasedUsage.objects.delete(key);
        }
        throw err;
      }
    },

    async purge(state) {
      const request = await pending(state);
      // Each purger runs whatever another one did: a bucket we may not read must not keep the
      // dashboard's copies. Each outcome is logged; any failure fails the step (retried, then the
      // request fails naming it), and purging again what is gone is harmless.
      const outcomes = await Promise.all(
        deps.purgers.map(async (purger) => {
          try {
            let removed = 0;
            if (request.userId !== undefined) {
              removed += await purger.purgeUser(state.projectId, request.userId);
              // Rows of level `none` hold the user's keyed stand-in.
              const keyed = await deps.userIds.keyed(state.projectId, request.userId);
              removed += await purger.purgeUser(state.projectId, keyed);
            }
            if (request.transactionIds) {
              removed += await purger.purgeTransactions(state.projectId, request.transactionIds);
            }
            deps.logger.info("deletion copies purged", { ...base(state), purger: purger.name, removed });
            return { purger: purger.name, removed };
          } catch (err) {
            deps.logger.error("deletion copies not purged", {
              ...base(state),
              purger: purger.name,
              ...errorFields(err),
            });
            return { purger: purger.name, error: String(err) };
          }
        }),
      );
      const purged = outcomes.reduce((sum, o) => sum + (o.removed ?? 0), 0);
      if (purged > 0) await deps.requests.addCopiesPurged(state.projectId, state.requestId, purged, clock());
      const failed = outcomes.filter((o) => o.error !== undefined);
      if (failed.length > 0) {
        const report = outcomes.map((o) =>
          o.error === undefined ? `${o.purger}: ${o.removed} purged` : `${o.purger}: ${o.error}`,
        );
        throw new Error(`copies not purged (${report.join("; ")})`);
      }
      return base(state);
    },

    async verify(state) {
      const request = await pending(state);
      const remaining = await deps.query.countMatching(await target(request));
      if (remaining > 0) {
        // A file that landed late, or a rewrite another writer undid: round again, a few times.
        const round = (state.round ?? 0) + 1;
        if (round >= MAX_VERIFY_ROUNDS) {
          throw new DeletionFatalError(`${remaining} matching rows remain after ${round} rounds`);
        }
        deps.logger.warn("deletion: matching rows remain, going round again", {
          requestId: state.requestId,
          remaining,
          round,
        });
        return { projectId: state.projectId, requestId: state.requestId, round, rowsRemain: true };
      }
      const counts = await deps.requests.fileCounts(state.projectId, state.requestId);
      await deps.requests.complete(state.projectId, state.requestId, counts, clock());
      // The audit line: the reason, the counts and the user's hash, never what was deleted.
      deps.logger.info("deletion completed", {
        metric: "deletion.completed",
        projectId: state.projectId,
        requestId: state.requestId,
        reason: request.reason,
        userIdHash: request.userIdHash ?? null,
        transactionIdCount: request.transactionIdCount,
        ...counts,
        copiesPurged: request.copiesPurged,
      });
      // The event carries the counts and ids of the request, never what was deleted.
      await publishAfter(
        deps.events,
        {
          type: "deletion.completed",
          projectId: state.projectId,
          subject: state.requestId,
          data: {
            request_id: state.requestId,
            rows_deleted: counts.rowsDeleted,
            files_rewritten: counts.filesRewritten,
            files_deleted: counts.filesDeleted,
            copies_purged: request.copiesPurged,
          },
        },
        deps.logger,
      );
      return { ...base(state), rowsRemain: false };
    },

    async fail(state) {
      const error = state.error
        ? `${state.error.Error}: ${causeMessage(state.error.Cause)}`.slice(0, MAX_ERROR_LENGTH)
        : "the deletion failed";
      await deps.requests.fail(state.projectId, state.requestId, error, clock());
      deps.logger.error("deletion failed", {
        metric: "deletion.failed",
        projectId: state.projectId,
        requestId: state.requestId,
        error,
      });
      return base(state);
    },
  };
}
