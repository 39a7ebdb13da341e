import { CachedKeyLookup } from "../core/key-cache";
import { KeyUsageTracker } from "../core/key-usage";
import type { Infrastructure } from "./infrastructure";

/**
 * Who a service key is: the key lookup, cached for `keyCacheMs` (the revocation delay), and each
 * key's last use, written at most once a minute. The API Gateway authorizer asks it in AWS; the key
 * middleware in front of every local app does.
 */
export function composeKeyAuth(infra: Pick<Infrastructure, "store" | "logger">, keyCacheMs: number) {
  return {
    keys: new CachedKeyLookup(infra.store.keys, keyCacheMs),
    usage: new KeyUsageTracker(infra.store.keys, infra.logger),
  };
}
