import type { MiddlewareHandler } from "hono";
import type { AppEnv } from "../app/env";
import type { AuthContext } from "../core/auth";
import {
  type RateLimitDecision,
  type RateLimiter,
  rateLimitError,
  rateLimitHeaders,
} from "../core/rate-limit";

/** One bucket per key, shared by every endpoint the key calls and every process that serves it. */
export function checkRateLimit(limiter: RateLimiter, auth: AuthContext): Promise<RateLimitDecision> {
  return limiter.check(`key:${auth.keyId}`, auth.rateLimit);
}

/**
 * The rate limit of the data API: decided before the route runs (a refused export or deletion must
 * not start), 429 with `Retry-After` when over, and the `X-RateLimit-*` headers on every response after
 * authentication, errors included. Mount it after the auth middleware. (The proxy decides the same
 * limit through its hooks, side by side with its other store work: see metering/hooks.ts.)
 */
export function rateLimitMiddleware(limiter: RateLimiter): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const decision = await checkRateLimit(limiter, c.get("auth"));
    if (!decision.allowed) throw rateLimitError(decision);
    await next();
    for (const [name, value] of Object.entries(rateLimitHeaders(decision))) c.res.headers.set(name, value);
  };
}
