import type { Hono } from "hono";
import { errors } from "../core/errors";
import type { Logger } from "../core/logger";
import type { AppEnv } from "./env";
import { errorResponse } from "./errors";
import { mountRoutes } from "./routing";
import { appShell } from "./shell";

/**
 * What answers outside the APIs: `/` sends a person who opened the service's address to the dashboard,
 * `/healthz` tells a load balancer or a script that the service is up (no key: it reveals nothing),
 * and everything else is the service's 404.
 */
export function createRootApp(logger: Logger, dashboardPath = "/dashboard/"): Hono<AppEnv> {
  const app = appShell(logger);
  mountRoutes(app, {
    "/": { GET: (c) => c.redirect(dashboardPath, 302) },
    "/healthz": {
      GET: (c) => {
        c.header("Cache-Control", "no-store");
        return c.json({ status: "ok" });
      },
    },
  });
  app.all("*", (c) => errorResponse(errors.notFound(), c, logger));
  return app;
}
