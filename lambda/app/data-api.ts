import type { Hono, MiddlewareHandler } from "hono";
import type { Logger } from "../core/logger";
import type { AppEnv } from "./env";
import { mountRoutes, type RouteTable } from "./routing";
import { appShell } from "./shell";

export interface DataApiDeps {
  /** The caller's identity: key verification locally, the authorizer's context in AWS. */
  auth: MiddlewareHandler<AppEnv>;
  /** The per-key rate limit, after authentication (app/metering-rate-limit.ts); absent: unlimited. */
  rateLimit?: MiddlewareHandler<AppEnv>;
  logger: Logger;
}

/** The data API (`/api/v1/...`): status now; exports and deletion requests grow here. */
export function createDataApp(deps: DataApiDeps): Hono<AppEnv> {
  const app = appShell(deps.logger);
  app.use("/api/*", deps.auth);
  if (deps.rateLimit) app.use("/api/*", deps.rateLimit);
  const routes: RouteTable = {
    "/api/v1/status": {
      GET: (c) => c.json({ status: "ok", project: c.get("auth").projectId }),
    },
  };
  mountRoutes(app, routes);
  return app;
}
