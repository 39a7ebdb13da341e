import type { MiddlewareHandler } from "hono";
import { createDataApp } from "../app/data-api/app";
import type { DeletionRouteDeps } from "../app/data-api/deletion";
import type { ExportTimeLimit } from "../app/data-api/exports";
import type { AppEnv } from "../app/env";
import type { Payments } from "../billing/payments";
import type { DeletionStarter } from "../core/deletion";
import { ApiError } from "../core/errors";
import { keyNames } from "../core/key-names";
import { rateLimitMiddleware } from "../metering/rate-limit";
import type { Infrastructure } from "./infrastructure";

export interface DataApiSettings {
  /** Who the caller is: the authorizer's decision in AWS, the key middleware locally. */
  auth: MiddlewareHandler<AppEnv>;
  /** The per-key rate limit, shared with the proxy; off when metering is off locally. */
  rateLimited: boolean;
  /** Locally deletions run in process; in AWS the requests table's stream starts them. */
  deletionStarter?: DeletionStarter;
  /** Credits bought through Stripe (compose/payments.ts); absent: not configured. */
  payments?: Payments;
  /** How long a streamed export may run: the streaming integration's limit in AWS; none locally. */
  exportTimeLimit?: ExportTimeLimit;
}

/**
 * The data API (`/api/v1/...`): exports query the warehouse and, for a project with a bucket
 * destination, write there; deletion requests go to the store; budgets are read from it.
 */
export function composeDataApi(
  infra: Pick<
    Infrastructure,
    "store" | "warehouseQuery" | "exportSettings" | "openDestination" | "clock" | "logger" | "metrics"
  >,
  settings: DataApiSettings,
) {
  const { logger, clock } = infra;
  return createDataApp({
    auth: settings.auth,
    ...(settings.rateLimited && { rateLimit: countedRateLimit(infra) }),
    logger,
    budgets: infra.store.budgets,
    exports: {
      query: infra.warehouseQuery,
      keyNames: async (projectId) => keyNames(await infra.store.keys.listKeys(projectId)),
      settings: infra.exportSettings,
      openDestination: (destination) => infra.openDestination(destination),
      logger,
      clock,
      ...(settings.exportTimeLimit && {
        timeLimit: settings.exportTimeLimit,
        rollups: infra.store.interactions.rollups,
      }),
    },
    deletion: deletionRoutes(infra, settings.deletionStarter),
    transactions: { interactions: infra.store.interactions },
    ...(settings.payments && {
      stripeWebhook: (payload: string, signature: string | undefined) =>
        (settings.payments as Payments).handleWebhook(payload, signature),
    }),
  });
}

/** The deletion routes' store (and, locally, the runner that starts each request). */
export function deletionRoutes(
  infra: Pick<Infrastructure, "store" | "clock" | "logger">,
  starter?: DeletionStarter,
): DeletionRouteDeps {
  return {
    requests: infra.store.deletionRequests,
    ...(starter && { starter }),
    logger: infra.logger,
    clock: infra.clock,
  };
}

/** The per-key rate limit, the bucket the proxy takes from too; refusals are counted. */
function countedRateLimit(infra: Pick<Infrastructure, "store" | "metrics">): MiddlewareHandler<AppEnv> {
  const limited = rateLimitMiddleware(infra.store.rateLimiter);
  return async (c, next) => {
    try {
      await limited(c, next);
    } catch (err) {
      if (err instanceof ApiError && err.status === 429) infra.metrics.add("RateLimited", "Count", 1);
      throw err;
    }
  };
}
