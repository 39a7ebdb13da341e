import type { Logger } from "./logger";
import { errorFields } from "./logger";
import type { Store } from "./ports";

/**
 * Records "last used" times without a store write per request: at most one write per key per
 * `intervalMs` per process, fired off the request path. Listings are therefore up to a minute stale.
 */
export class KeyUsageTracker {
  private readonly written = new Map<string, number>();
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly store: Pick<Store, "touchKey">,
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
    private readonly intervalMs = 60_000,
  ) {}

  touch(keyId: string): void {
    const now = this.clock();
    const last = this.written.get(keyId);
    if (last !== undefined && now - last < this.intervalMs) return;
    this.written.set(keyId, now);
    const write = this.store
      .touchKey(keyId, now)
      .catch((err) => this.logger.warn("last-used update failed", { keyId, ...errorFields(err) }))
      .finally(() => this.pending.delete(write));
    this.pending.add(write);
  }

  /** Waits for writes in flight (clean shutdown). */
  async flush(): Promise<void> {
    await Promise.all([...this.pending]);
  }
}
