import type { Context } from "hono";
import {
  type DeletionFileCounts,
  type DeletionRequestRecord,
  type DeletionRequestStore,
  type DeletionStarter,
  hashUserId,
  parseDeletionRequest,
} from "../../core/deletion";
import { errors } from "../../core/errors";
import type { Logger } from "../../core/logger";
import type { RequestLog } from "../../core/members";
import { DATA_API_BODY_LIMIT, readJsonObject } from "../body";
import { requestDeletion } from "../data-api/deletion";
import type { RouteTable } from "../routing";
import { once, projectOf } from "./requests";

export interface DeletionRoutesDeps {
  requests: DeletionRequestStore;
  /** Starts the workflow (the local runner). Absent in AWS: the requests table's stream starts it. */
  starter?: DeletionStarter;
  /** Idempotency records of dashboard writes. */
  log: RequestLog;
  logger: Logger;
  clock: () => number;
}

const PAGE = 20;

/**
 * A request as the Settings page lists it. What it deletes is shown as the data API shows it: the
 * user as the hash of its id (the audit trail keeps nothing else once the request completes) and the
 * number of transaction ids.
 */
export interface DeletionRequestView {
  requestId: string;
  status: DeletionRequestRecord["status"];
  reason: string;
  userIdHash?: string;
  transactionIdCount: number;
  counts: DeletionFileCounts & { copiesPurged: number };
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  error?: string;
}

async function view(
  requests: DeletionRequestStore,
  request: DeletionRequestRecord,
): Promise<DeletionRequestView> {
  // Until it completes, what is done so far (as `GET /api/v1/data/{request_id}` reports it).
  const counts = request.counts ?? (await requests.fileCounts(request.projectId, request.requestId));
  return {
    requestId: request.requestId,
    status: request.status,
    reason: request.reason,
    ...(request.userIdHash !== undefined && { userIdHash: request.userIdHash }),
    transactionIdCount: request.transactionIdCount,
    counts: { ...counts, copiesPurged: request.copiesPurged },
    createdAt: request.createdAt,
    ...(request.startedAt !== undefined && { startedAt: request.startedAt }),
    ...(request.finishedAt !== undefined && { finishedAt: request.finishedAt }),
    ...(request.error !== undefined && { error: request.error }),
  };
}

async function create(c: Context, deps: DeletionRoutesDeps): Promise<Response> {
  // The data API's validation (`POST /api/v1/data`), the same body and the same refusals.
  const input = parseDeletionRequest(await readJsonObject(c, DATA_API_BODY_LIMIT));
  const projectId = projectOf(c);
  const now = deps.clock();
  const userIdHash = input.userId === undefined ? null : hashUserId(projectId, input.userId);
  return once(c, {
    requests: deps.log,
    scope: ["deletion-request", projectId],
    // The user id only as its hash: the idempotency record holds no user id.
    input: [input.reason, userIdHash, input.transactionIds ?? null],
    now,
    run: async () => {
      const requestedBy = c.get("dashboardUser").userId;
      const request = await requestDeletion(deps, { projectId, input, now, requestedBy });
      return {
        resultId: request.requestId,
        response: c.json({ request: await view(deps.requests, request) }, 202),
      };
    },
    replay: async (requestId) => {
      const earlier = await deps.requests.get(projectId, requestId);
      if (!earlier) throw errors.notFound(`Deletion request '${requestId}' was not found.`);
      return c.json({ request: await view(deps.requests, earlier), replayed: true }, 200);
    },
  });
}

/** Settings, deletion requests: the project's requests with their status, and new ones. */
export function deletionRoutes(base: string, deps: DeletionRoutesDeps): RouteTable {
  return {
    [`${base}/deletion-requests`]: {
      GET: async (c) => {
        const cursor = c.req.query("cursor");
        const page = await deps.requests.list(projectOf(c), {
          limit: PAGE,
          ...(cursor !== undefined ? { cursor } : {}),
        });
        const requests = await Promise.all(page.requests.map((request) => view(deps.requests, request)));
        return c.json({ requests, ...(page.cursor !== undefined && { cursor: page.cursor }) });
      },
      POST: (c) => create(c, deps),
    },
  };
}
