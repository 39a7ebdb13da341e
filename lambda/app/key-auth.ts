import type { MiddlewareHandler } from "hono";
import { type AuthContext, authenticate } from "../core/auth";
import { presentedCredentials } from "../core/credentials";
import { endpointOf } from "../core/endpoints";
import { errors } from "../core/errors";
import type { KeyLookup } from "../core/ports";
import type { AppEnv } from "./env";

export interface KeyAuthDeps {
  keys: KeyLookup;
  clock: () => number;
  /** Called after a successful authentication, off the request path (last-used tracking). */
  onAuthenticated?: (auth: AuthContext) => void;
}

/** Authenticates the service key against the store (locally, and in the Lambda authorizer). */
export function requireKey(deps: KeyAuthDeps): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const endpoint = endpointOf(c.req.path);
    if (!endpoint) throw errors.notFound();
    const credentials = presentedCredentials({
      header: (name) => c.req.header(name),
      query: (name) => c.req.query(name),
      geminiFamily: endpoint.startsWith("gemini:"),
    });
    const auth = await authenticate(credentials, endpoint, deps.keys, deps.clock());
    c.set("auth", auth);
    deps.onAuthenticated?.(auth);
    await next();
  };
}
