/**
 * Types for the undici modules the upstream client imports one by one instead of the package root,
 * which would bundle all of undici (fetch, WebSocket, cache: ~240 KB more in every proxy bundle).
 */
declare module "undici/lib/dispatcher/pool.js" {
  import type { Dispatcher, Pool } from "undici";

  /** The pool alone: the request API is installed on it by the package root, which is not loaded. */
  const PoolClass: new (
    url: string | URL,
    options?: Pool.Options,
  ) => Omit<Pool, keyof Dispatcher> & Pick<Dispatcher, "dispatch" | "destroy" | "close">;
  export default PoolClass;
}

declare module "undici/lib/core/util.js" {
  /** Raw header names and values, in pairs, as one object of lower-case names. */
  export function parseHeaders(rawHeaders: Buffer[]): Record<string, string | string[]>;
}

declare module "undici/lib/core/errors.js" {
  /** What an aborted request fails with (`code` UND_ERR_ABORTED). */
  export const RequestAbortedError: new (message?: string) => Error;
}

declare module "undici/lib/global.js";
