/**
 * Types for the two undici modules the upstream client imports one by one instead of the package root,
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

declare module "undici/lib/api/api-request.js" {
  import type { Dispatcher } from "undici";

  /** `Dispatcher.prototype.request` as the package root installs it: call it with the pool as `this`. */
  export default function requestOn(
    this: Pick<Dispatcher, "dispatch">,
    options: Dispatcher.RequestOptions,
  ): Promise<Dispatcher.ResponseData>;
}

declare module "undici/lib/global.js";
