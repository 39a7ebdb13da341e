import { describe, expect, it } from "vitest";
import type { ObjectStore } from "../../../lambda/core/object-store";

const text = (bytes: Uint8Array | undefined) => (bytes ? Buffer.from(bytes).toString() : undefined);

async function* pieces(count: number, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < count; i++) yield new Uint8Array(size).fill(65 + (i % 26));
}

/** The cases every adapter of the object-store port (`core/object-store.ts`) must pass; `open` gives an empty store. */
export function objectStoreContract(name: string, open: () => ObjectStore): void {
  describe(`object store contract: ${name}`, () => {
    it("puts, gets, lists by prefix and deletes", async () => {
      const store = open();
      await store.put("a/dt=1/x.parquet", new TextEncoder().encode("one"));
      await store.put("a/dt=2/y.parquet", new TextEncoder().encode("two"));
      await store.put("a/dt=2/z.parquet", new TextEncoder().encode("three"));
      await store.put("b/w.parquet", new TextEncoder().encode("four"));
      expect(text(await store.get("a/dt=2/y.parquet"))).toBe("two");
      expect(await store.get("a/missing")).toBeUndefined();
      const list = async (prefix: string) => {
        const out: string[] = [];
        for await (const o of store.list(prefix)) out.push(`${o.key}:${o.size}`);
        return out.sort();
      };
      expect(await list("a/")).toEqual(["a/dt=1/x.parquet:3", "a/dt=2/y.parquet:3", "a/dt=2/z.parquet:5"]);
      expect(await list("a/dt=2")).toEqual(["a/dt=2/y.parquet:3", "a/dt=2/z.parquet:5"]);
      expect(await list("nothing/")).toEqual([]);
      await store.delete("a/dt=2/y.parquet");
      await store.delete("a/dt=2/y.parquet");
      expect(await list("a/dt=2/")).toEqual(["a/dt=2/z.parquet:5"]);
    });

    it("writes a streamed body whole, in parts when it is large", async () => {
      const store = open();
      await store.put("big/file.csv", pieces(17, 1024 * 1024), "text/csv");
      const bytes = (await store.get("big/file.csv")) as Uint8Array;
      expect(bytes.byteLength).toBe(17 * 1024 * 1024);
      expect(bytes[16 * 1024 * 1024]).toBe(65 + 16);
      await store.put("small/file.csv", pieces(2, 10));
      expect(text(await store.get("small/file.csv"))).toBe("A".repeat(10) + "B".repeat(10));
    });

    it("keeps the old object when a streamed write fails, and leaves nothing half-written", async () => {
      const store = open();
      await store.put("keep/me.json", new TextEncoder().encode("old"));
      async function* failing(): AsyncGenerator<Uint8Array> {
        yield* pieces(9, 1024 * 1024);
        throw new Error("producer failed");
      }
      await expect(store.put("keep/me.json", failing())).rejects.toThrow("producer failed");
      expect(text(await store.get("keep/me.json"))).toBe("old");
      const keys: string[] = [];
      for await (const o of store.list("keep/")) keys.push(o.key);
      expect(keys).toEqual(["keep/me.json"]);
    });

    it("refuses keys that could leave the store", async () => {
      const store = open();
      for (const key of ["../x", "a/../../x", "/abs", "a//b", "a\\b", ""]) {
        await expect(store.put(key, new Uint8Array())).rejects.toThrow("invalid object key");
      }
    });
  });
}
