import type { Context, MiddlewareHandler } from "hono";
import { errors } from "../core/errors";
import type { AppEnv } from "./env";

/**
 * The request target exactly as the client sent it. Hosts normalise `..` away before Hono sees the
 * URL, which would silently route `/openai/../api/...` elsewhere; we refuse such paths instead.
 */
function rawTarget(c: Context<AppEnv>): string {
  const env = c.env as AppEnv["Bindings"] | undefined;
  const target = env?.incoming?.url ?? env?.event?.rawPath ?? env?.event?.path ?? new URL(c.req.url).pathname;
  // An absolute-form target (`GET http://host/path`, RFC 9112 §3.2.2) carries the path after its authority.
  const raw = target.replace(/^https?:\/\/[^/?]*/i, "");
  const q = raw.indexOf("?");
  return q === -1 ? raw : raw.slice(0, q);
}

const DOT_SEGMENT = /(^|\/)(\.|%2e){1,2}(\/|$)/i;
const ENCODED_SEPARATOR = /%2f|%5c|%00/i;

/** Refuses dot segments (plain or percent-encoded), empty segments, backslashes and encoded separators. */
export const safePath: MiddlewareHandler<AppEnv> = async (c, next) => {
  const path = rawTarget(c);
  if (DOT_SEGMENT.test(path)) throw errors.invalidPath("dot segments ('.' or '..') are not allowed.");
  if (path.includes("//")) throw errors.invalidPath("empty path segments ('//') are not allowed.");
  if (path.includes("\\") || ENCODED_SEPARATOR.test(path)) {
    throw errors.invalidPath("encoded slashes, backslashes and NUL are not allowed.");
  }
  await next();
};
