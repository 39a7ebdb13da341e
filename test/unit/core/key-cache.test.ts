import { describe, expect, it } from "vitest";
import { CachedKeyLookup } from "../../../lambda/core/key-cache";
import type { ApiKeyRecord, Project } from "../../../lambda/core/model";
import type { Store } from "../../../lambda/core/ports";

/** The two store reads the cache makes, in memory, counting reads and able to fail or stall them. */
class KeyReads implements Pick<Store, "getKey" | "getProject"> {
  readonly keys = new Map<string, ApiKeyRecord>();
  readonly projects = new Map<string, Project>([["p", { projectId: "p", tier: "free", createdAt: 0 }]]);
  keyReads = 0;
  failNext = false;
  stall: Promise<void> | undefined;

  add(keyId: string, changes: Partial<ApiKeyRecord> = {}): void {
    const record = { keyId, projectId: "p", name: "n", secretHash: "00", createdAt: 0, revoked: false };
    this.keys.set(keyId, { ...record, ...changes });
  }

  async getKey(keyId: string) {
    this.keyReads++;
    await this.stall;
    if (this.failNext) {
      this.failNext = false;
      throw new Error("store unavailable");
    }
    const key = this.keys.get(keyId);
    return key && { ...key };
  }

  async getProject(projectId: string) {
    return this.projects.get(projectId);
  }
}

function setUp(ttlMs = 1000, maxEntries?: number) {
  const store = new KeyReads();
  const clock = { now: 0 };
  const cache = new CachedKeyLookup(store, ttlMs, maxEntries, () => clock.now);
  return { store, clock, cache };
}

describe("CachedKeyLookup", () => {
  it("serves a hit from memory within the ttl and reloads once it is over", async () => {
    const { store, clock, cache } = setUp(1000);
    store.add("k1");
    expect((await cache.lookup("k1"))?.key.revoked).toBe(false);
    store.add("k1", { revoked: true });
    clock.now = 999;
    expect((await cache.lookup("k1"))?.key.revoked).toBe(false);
    expect(store.keyReads).toBe(1);
    clock.now = 1000;
    expect((await cache.lookup("k1"))?.key.revoked).toBe(true);
    expect(store.keyReads).toBe(2);
  });

  it("returns the key with its project", async () => {
    const { store, cache } = setUp();
    store.add("k1");
    expect(await cache.lookup("k1")).toEqual({
      key: store.keys.get("k1"),
      project: { projectId: "p", tier: "free", createdAt: 0 },
    });
  });

  it("caches misses too, until the ttl is over", async () => {
    const { store, clock, cache } = setUp(1000);
    expect(await cache.lookup("k1")).toBeUndefined();
    store.add("k1");
    clock.now = 500;
    expect(await cache.lookup("k1")).toBeUndefined();
    expect(store.keyReads).toBe(1);
    clock.now = 1000;
    expect(await cache.lookup("k1")).toBeDefined();
  });

  it("finds nothing for a key whose project is gone", async () => {
    const { store, cache } = setUp();
    store.add("k1", { projectId: "gone" });
    expect(await cache.lookup("k1")).toBeUndefined();
  });

  it("does not cache a failed read: the next lookup asks the store again", async () => {
    const { store, cache } = setUp();
    store.add("k1");
    store.failNext = true;
    await expect(cache.lookup("k1")).rejects.toThrow("store unavailable");
    expect(await cache.lookup("k1")).toBeDefined();
    expect(store.keyReads).toBe(2);
  });

  it("makes one store read for concurrent lookups of one key", async () => {
    const { store, cache } = setUp();
    store.add("k1");
    let release = () => {};
    store.stall = new Promise((resolve) => {
      release = resolve;
    });
    const lookups = [cache.lookup("k1"), cache.lookup("k1"), cache.lookup("k1")];
    release();
    const found = await Promise.all(lookups);
    expect(found.every((f) => f?.key.keyId === "k1")).toBe(true);
    expect(store.keyReads).toBe(1);
  });

  it("forget() drops an entry at once", async () => {
    const { store, cache } = setUp();
    store.add("k1");
    await cache.lookup("k1");
    store.add("k1", { revoked: true });
    cache.forget("k1");
    expect((await cache.lookup("k1"))?.key.revoked).toBe(true);
    expect(store.keyReads).toBe(2);
  });

  it("holds at most maxEntries, dropping the oldest first", async () => {
    const { store, cache } = setUp(1000, 2);
    for (const id of ["a", "b", "c"]) store.add(id);
    await cache.lookup("a");
    await cache.lookup("b");
    await cache.lookup("c");
    expect(store.keyReads).toBe(3);
    await cache.lookup("c");
    await cache.lookup("b");
    expect(store.keyReads).toBe(3);
    await cache.lookup("a");
    expect(store.keyReads).toBe(4);
  });
});
