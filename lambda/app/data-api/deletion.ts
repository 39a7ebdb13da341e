import type { Context } from "hono";
import type * as z from "zod/mini";
import {
  type DeletionFileCounts,
  type DeletionRequestInput,
  type DeletionRequestRecord,
  type DeletionRequestStore,
  type DeletionStarter,
  newDeletionRequest,
  parseDeletionRequest,
} from "../../core/deletion";
import { errors } from "../../core/errors";
import type { Logger } from "../../core/logger";
import { DATA_API_BODY_LIMIT, readJsonObject } from "../body";
import type { AppEnv } from "../env";
import type { RouteTable } from "../routing";
import type { deletionQueuedSchema, deletionViewSchema } from "./openapi";

export interface DeletionRouteDeps {
  requests: DeletionRequestStore;
  /** Starts the workflow (the local runner). Absent in AWS: the requests table's stream starts it. */
  starter?: DeletionStarter;
  logger: Logger;
  clock?: () => number;
}

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

/** The answer of `GET /api/v1/data/{request_id}`: state, counts, times; the user only as its hash. */
function requestView(
  request: DeletionRequestRecord,
  counts: DeletionFileCounts,
): z.infer<typeof deletionViewSchema> {
  return {
    request_id: request.requestId,
    status: request.status,
    reason: request.reason,
    user_id_hash: request.userIdHash ?? null,
    transaction_ids: request.transactionIdCount,
    counts: {
      rows_deleted: counts.rowsDeleted,
      files_rewritten: counts.filesRewritten,
      files_deleted: counts.filesDeleted,
      copies_purged: request.copiesPurged,
    },
    created_at: iso(request.createdAt),
    started_at: iso(request.startedAt),
    finished_at: iso(request.finishedAt),
    error: request.error ?? null,
  };
}

/** What taking a deletion request needs: both the data API's and the dashboard's routes have it. */
export type DeletionIntakeDeps = Pick<DeletionRouteDeps, "requests" | "starter" | "logger">;

export interface DeletionIntake {
  projectId: string;
  /** Validated by parseDeletionRequest. */
  input: DeletionRequestInput;
  now: number;
  /** Who asked, when it is someone other than the project's key (a dashboard user). */
  requestedBy?: string;
}

/**
 * Takes a validated deletion request: stores it (in AWS the table's stream starts the workflow), starts
 * the local runner, and logs it with the user only as its hash. Returns the stored request.
 */
export async function requestDeletion(
  deps: DeletionIntakeDeps,
  { projectId, input, now, requestedBy }: DeletionIntake,
): Promise<DeletionRequestRecord> {
  const request = newDeletionRequest(projectId, input, now);
  await deps.requests.create(request);
  await deps.starter?.start(projectId, request.requestId);
  deps.logger.info("deletion requested", {
    metric: "deletion.requested",
    projectId,
    requestId: request.requestId,
    userIdHash: request.userIdHash ?? null,
    transactionIdCount: request.transactionIdCount,
    ...(requestedBy !== undefined && { requestedBy }),
  });
  return request;
}

async function handleCreate(c: Context<AppEnv>, deps: DeletionRouteDeps): Promise<Response> {
  const input = parseDeletionRequest(await readJsonObject(c, DATA_API_BODY_LIMIT));
  const projectId = c.get("auth").projectId;
  const request = await requestDeletion(deps, { projectId, input, now: (deps.clock ?? Date.now)() });
  // 202: accepted, processed afterwards; the body is the specification's, plus the id to follow it by.
  const queued = { status: "ok", message: "Deletion request queued", request_id: request.requestId } as const;
  return c.json(queued satisfies z.infer<typeof deletionQueuedSchema>, 202);
}

async function handleGet(c: Context<AppEnv>, deps: DeletionRouteDeps): Promise<Response> {
  const projectId = c.get("auth").projectId;
  const request = await deps.requests.get(projectId, c.req.param("request_id") ?? "");
  // Another project's request reads exactly like one that never existed.
  if (!request) throw errors.notFound("No deletion request with this id.");
  const counts = request.counts ?? (await deps.requests.fileCounts(projectId, request.requestId));
  return c.json(requestView(request, counts), 200, { "Cache-Control": "no-store" });
}

/** `POST /api/v1/data` and `GET /api/v1/data/{request_id}`, for the data API's route table. */
export function deletionRoutes(deps: DeletionRouteDeps): RouteTable {
  return {
    "/api/v1/data": { POST: (c) => handleCreate(c, deps) },
    "/api/v1/data/:request_id": { GET: (c) => handleGet(c, deps) },
  };
}
