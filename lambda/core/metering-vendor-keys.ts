import type { VendorKeyStore } from "./vendor-keys";
import type { VendorName } from "./vendor-names";

/**
 * Caches which vendor key a project has (its plaintext, or none) for `ttlMs`, like the service-key
 * cache: so deciding BYOK costs no store round trip on the critical path once warm. A key set or
 * deleted elsewhere takes effect within `ttlMs`. Concurrent lookups share one read; a failed read is
 * not cached; bounded, the oldest entries go first. The plaintext stays in memory only as long as the
 * entry lives, and never leaves this object except to the forwarder.
 */
export class CachedVendorKeys {
  private readonly entries = new Map<string, { value: Promise<string | undefined>; expires: number }>();

  constructor(
    private readonly store: Pick<VendorKeyStore, "reveal">,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly clock: () => number = Date.now,
  ) {}

  lookup(projectId: string, vendor: VendorName): Promise<string | undefined> {
    const id = `${projectId}\n${vendor}`;
    const now = this.clock();
    const hit = this.entries.get(id);
    if (hit && hit.expires > now) return hit.value;
    const value = this.store.reveal(projectId, vendor);
    this.entries.delete(id);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(id, { value, expires: now + this.ttlMs });
    value.catch(() => {
      if (this.entries.get(id)?.value === value) this.entries.delete(id);
    });
    return value;
  }
}
