import type { ApiKeyRecord, Project } from "./model";
import type { KeyLookup, Store } from "./ports";

type Found = { key: ApiKeyRecord; project: Project } | undefined;

/**
 * Caches key lookups (key and its project) in memory for `ttlMs`: the revocation delay.
 * Misses are cached too, so a flood of unknown ids cannot hammer the store; concurrent lookups of
 * one id share a single store read. Bounded: the oldest entries go first.
 */
export class CachedKeyLookup implements KeyLookup {
  private readonly entries = new Map<string, { value: Promise<Found>; expires: number }>();

  constructor(
    private readonly store: Pick<Store, "getKey" | "getProject">,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly clock: () => number = Date.now,
  ) {}

  lookup(keyId: string): Promise<Found> {
    const now = this.clock();
    const hit = this.entries.get(keyId);
    if (hit && hit.expires > now) return hit.value;
    const value = this.load(keyId);
    this.entries.delete(keyId);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(keyId, { value, expires: now + this.ttlMs });
    // A failed read is not cached: the next request tries the store again.
    value.catch(() => {
      if (this.entries.get(keyId)?.value === value) this.entries.delete(keyId);
    });
    return value;
  }

  /** Drops a key at once, for writes made through this process (revocation from the same process). */
  forget(keyId: string): void {
    this.entries.delete(keyId);
  }

  private async load(keyId: string): Promise<Found> {
    const key = await this.store.getKey(keyId);
    if (!key) return undefined;
    const project = await this.store.getProject(key.projectId);
    return project ? { key, project } : undefined;
  }
}
