import { describe, expect, it } from "vitest";
import { CachedVendorKeys } from "../../../lambda/core/metering-vendor-keys";

describe("CachedVendorKeys", () => {
  function counting(answer: () => Promise<string | undefined>) {
    const reads: string[] = [];
    const store = {
      reveal: (projectId: string, vendor: string) => {
        reads.push(`${projectId}/${vendor}`);
        return answer();
      },
    };
    return { store, reads };
  }

  it("caches keys and their absence for the ttl, one read per key in flight", async () => {
    let now = 0;
    const { store, reads } = counting(async () => "sk-stored-key-0123456789");
    const cache = new CachedVendorKeys(store, 1000, 10, () => now);
    const [a, b] = await Promise.all([cache.lookup("p", "openai"), cache.lookup("p", "openai")]);
    expect([a, b]).toEqual(["sk-stored-key-0123456789", "sk-stored-key-0123456789"]);
    await cache.lookup("p", "gemini");
    expect(reads).toEqual(["p/openai", "p/gemini"]);
    now = 999;
    await cache.lookup("p", "openai");
    expect(reads).toHaveLength(2);
    now = 1000;
    await cache.lookup("p", "openai");
    expect(reads).toHaveLength(3);
  });

  it("does not cache a failed read", async () => {
    let fail = true;
    const { store, reads } = counting(async () => {
      if (fail) throw new Error("store down");
      return undefined;
    });
    const cache = new CachedVendorKeys(store, 60_000);
    await expect(cache.lookup("p", "groq")).rejects.toThrow("store down");
    fail = false;
    expect(await cache.lookup("p", "groq")).toBeUndefined();
    expect(reads).toHaveLength(2);
  });
});
