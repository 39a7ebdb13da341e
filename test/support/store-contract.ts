import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateKey } from "../../lambda/core/keys";
import type { ApiKeyRecord, Project } from "../../lambda/core/model";
import { ConflictError, type Store } from "../../lambda/core/ports";

export interface StoreUnderTest {
  store: Store;
  close(): Promise<void>;
}

let serial = 0;
/** Ids unique to one case, so the cases can share one store. */
const unique = (prefix: string) => `${prefix}-${process.pid}-${++serial}`;

function project(changes: Partial<Project> = {}): Project {
  return { projectId: unique("proj"), tier: "free", createdAt: 1_700_000_000_000, ...changes };
}

function key(projectId: string, changes: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  const { keyId, secretHash } = generateKey();
  return {
    keyId,
    projectId,
    name: "k",
    secretHash,
    createdAt: 1_700_000_000_000,
    revoked: false,
    ...changes,
  };
}

/** The cases every adapter of the store port must pass. */
export function storeContract(name: string, makeStore: () => Promise<StoreUnderTest>): void {
  describe(`store contract: ${name}`, () => {
    let subject: StoreUnderTest;
    let store: Store;
    beforeAll(async () => {
      subject = await makeStore();
      store = subject.store;
    });
    afterAll(() => subject.close());

    it("creates a project and reads it back, optional fields included", async () => {
      const p = project({ tier: "enterprise", rateLimit: { rpm: 5000, burst: 7000 } });
      await store.createProject(p);
      expect(await store.getProject(p.projectId)).toEqual(p);
    });

    it("finds no unknown project", async () => {
      expect(await store.getProject(unique("absent"))).toBeUndefined();
    });

    it("refuses a duplicate project with ConflictError and keeps the first", async () => {
      const p = project();
      await store.createProject(p);
      await expect(store.createProject({ ...p, tier: "pro" })).rejects.toBeInstanceOf(ConflictError);
      expect(await store.getProject(p.projectId)).toEqual(p);
    });

    it("lists projects by id", async () => {
      const a = project({ projectId: unique("list-b") });
      const b = project({ projectId: unique("list-a") });
      await store.createProject(a);
      await store.createProject(b);
      const ids = (await store.listProjects()).map((p) => p.projectId);
      expect(ids).toEqual(expect.arrayContaining([a.projectId, b.projectId]));
      expect(ids).toEqual([...ids].sort());
    });

    it("creates a key and reads it back, optional fields included", async () => {
      const k = key("p", {
        allow: ["api:/api/v1/status", "openai:*"],
        rateLimit: { rpm: 10, burst: 20 },
        expiresAt: 1_900_000_000_000,
      });
      await store.createKey(k);
      expect(await store.getKey(k.keyId)).toEqual(k);
      expect(await store.getKey(generateKey().keyId)).toBeUndefined();
    });

    it("refuses a key id that is taken with ConflictError", async () => {
      const k = key("p");
      await store.createKey(k);
      await expect(store.createKey({ ...k, name: "other" })).rejects.toBeInstanceOf(ConflictError);
      expect((await store.getKey(k.keyId))?.name).toBe("k");
    });

    it("lists the keys of one project only, oldest first", async () => {
      const mine = unique("proj");
      const second = key(mine, { createdAt: 2000 });
      const first = key(mine, { createdAt: 1000 });
      await store.createKey(second);
      await store.createKey(first);
      await store.createKey(key(unique("proj")));
      expect(await store.listKeys(mine)).toEqual([first, second]);
      expect(await store.listKeys(unique("empty"))).toEqual([]);
    });

    it("revokes a key, returning the record; revoking again keeps the first time", async () => {
      const k = key("p");
      await store.createKey(k);
      const revoked = await store.revokeKey(k.keyId, 5000);
      expect(revoked).toEqual({ ...k, revoked: true, revokedAt: 5000 });
      expect(await store.revokeKey(k.keyId, 9000)).toEqual({ ...k, revoked: true, revokedAt: 5000 });
      expect(await store.getKey(k.keyId)).toEqual({ ...k, revoked: true, revokedAt: 5000 });
    });

    it("revokes no unknown key and creates nothing doing so", async () => {
      const keyId = generateKey().keyId;
      expect(await store.revokeKey(keyId, 5000)).toBeUndefined();
      expect(await store.getKey(keyId)).toBeUndefined();
    });

    it("moves last-used forward only, and creates nothing for an unknown key", async () => {
      const k = key("p");
      await store.createKey(k);
      await store.touchKey(k.keyId, 3000);
      expect((await store.getKey(k.keyId))?.lastUsedAt).toBe(3000);
      await store.touchKey(k.keyId, 2000);
      expect((await store.getKey(k.keyId))?.lastUsedAt).toBe(3000);
      await store.touchKey(k.keyId, 4000);
      expect(await store.getKey(k.keyId)).toEqual({ ...k, lastUsedAt: 4000 });
      const unknown = generateKey().keyId;
      await store.touchKey(unknown, 4000);
      expect(await store.getKey(unknown)).toBeUndefined();
    });
  });
}
