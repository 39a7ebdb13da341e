import { Hono } from "hono";
import { errors } from "../core/errors";
import type { Logger } from "../core/logger";
import type { AppEnv } from "./env";
import { errorResponse } from "./errors";
import { safePath } from "./safe-path";
import { securityHeaders } from "./security-headers";

/**
 * What every app shares: security headers on every response, refusal of unsafe paths, one error
 * renderer, and a 404 in the service's error shape.
 */
export function appShell(logger: Logger): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  app.use("*", securityHeaders);
  app.use("*", safePath);
  app.onError((err, c) => errorResponse(err, c, logger));
  app.notFound((c) => errorResponse(errors.notFound(), c, logger));
  return app;
}
