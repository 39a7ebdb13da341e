import type { Hono, MiddlewareHandler } from "hono";
import type * as z from "zod/mini";
import type { BudgetStore } from "../../core/budgets";
import type { Logger } from "../../core/logger";
import type { AppEnv } from "../env";
import { mountRoutes, type RouteTable } from "../routing";
import { appShell } from "../shell";
import { budgetRoutes } from "./budgets";
import { type DeletionRouteDeps, deletionRoutes } from "./deletion";
import { type ExportRouteDeps, exportRoutes } from "./exports";
import { dataApiDescription, type statusSchema } from "./openapi";
import { type StripeWebhookHandler, stripeWebhookRoutes } from "./stripe-webhook";
import { type TransactionRouteDeps, transactionRoutes } from "./transactions";

export interface DataApiDeps {
  /** The caller's identity: key verification locally, the authorizer's context in AWS. */
  auth: MiddlewareHandler<AppEnv>;
  /** The per-key rate limit, after authentication (metering/rate-limit.ts); absent: unlimited. */
  rateLimit?: MiddlewareHandler<AppEnv>;
  logger: Logger;
  /** `POST /api/v1/exports` over the warehouse; absent: not served. */
  exports?: ExportRouteDeps;
  /** `POST /api/v1/data` and `GET /api/v1/data/{request_id}` (deletion requests); absent: not served. */
  deletion?: DeletionRouteDeps;
  /** `GET /api/v1/transactions/{id}`, a call's summary; absent: not served. */
  transactions?: TransactionRouteDeps;
  /** `GET /api/v1/budgets`; absent: not served. */
  budgets?: BudgetStore;
  /** `POST /stripe/webhook`, verified by signature only; absent: answers that payments are not configured. */
  stripeWebhook?: StripeWebhookHandler;
}

/** The data API (`/api/v1/...`): status, exports, and what else the deployment wires in. */
export function createDataApp(deps: DataApiDeps): Hono<AppEnv> {
  const app = appShell(deps.logger);
  // Before the key check: the description is public, as API descriptions are (it holds no project's data).
  const description = JSON.stringify(dataApiDescription());
  mountRoutes(app, {
    "/api/v1/openapi.json": {
      GET: (c) =>
        c.body(description, 200, {
          "Content-Type": "application/json; charset=utf-8",
          "Cache-Control": "public, max-age=300",
        }),
    },
  });
  app.use("/api/*", deps.auth);
  if (deps.rateLimit) app.use("/api/*", deps.rateLimit);
  const routes: RouteTable = {
    "/api/v1/status": {
      GET: (c) =>
        c.json({ status: "ok", project: c.get("auth").projectId } satisfies z.infer<typeof statusSchema>),
    },
    ...(deps.exports ? exportRoutes(deps.exports) : {}),
    ...(deps.deletion ? deletionRoutes(deps.deletion) : {}),
    ...(deps.transactions ? transactionRoutes(deps.transactions) : {}),
    ...(deps.budgets ? budgetRoutes(deps.budgets) : {}),
    ...stripeWebhookRoutes(deps.stripeWebhook),
  };
  mountRoutes(app, routes);
  return app;
}
