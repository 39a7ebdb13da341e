import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoDeletionRequests } from "../../lambda/adapters/dynamodb/deletion-requests";
import { type DeletionRequestRecord, newDeletionRequest } from "../../lambda/core/deletion";
import { ApiError } from "../../lambda/core/errors";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";

/**
 * `DeletionRequestStore.list` on the DynamoDB adapter, over the embedded DynamoDB (dynalite, the real
 * wire protocol): the dashboard's newest-first pages of a project's requests.
 */

let dir: string;
let local: LocalStore;
let store: DynamoDeletionRequests;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-deletion-list-"));
  local = await openLocalStore(dir);
  store = new DynamoDeletionRequests(local.db, local.tables.deletionRequests);
});
afterAll(async () => {
  await local.close();
  rmSync(dir, { recursive: true, force: true });
});

let projects = 0;
const newProject = () => `list-${process.pid}-${++projects}`;

async function make(projectId: string, createdAt: number, userId = "u-1"): Promise<DeletionRequestRecord> {
  const request = newDeletionRequest(projectId, { reason: `at ${createdAt}`, userId }, createdAt);
  await store.create(request);
  return request;
}

/** Every page, following the cursors. */
async function all(projectId: string, limit: number): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await store.list(projectId, { limit, ...(cursor !== undefined ? { cursor } : {}) });
    pages++;
    ids.push(...page.requests.map((r) => r.requestId));
    cursor = page.cursor;
  } while (cursor !== undefined && pages < 50);
  return { ids, pages };
}

describe("deletion requests: list", () => {
  it("lists nothing for a project without requests", async () => {
    expect(await store.list(newProject(), { limit: 10 })).toEqual({ requests: [] });
  });

  it("lists the project's requests newest first, as stored, and only its own", async () => {
    const project = newProject();
    const older = await make(project, 1_700_000_000_000);
    const newer = await make(project, 1_700_000_050_000, "u-2");
    await make(newProject(), 1_700_000_100_000);
    const page = await store.list(project, { limit: 10 });
    expect(page.requests).toEqual([newer, older]);
  });

  it("walks every request once through its pages, ties on the same millisecond included", async () => {
    const project = newProject();
    const made: DeletionRequestRecord[] = [];
    for (let i = 0; i < 7; i++) made.push(await make(project, 1_700_000_000_000 + Math.floor(i / 2) * 1000));
    const { ids, pages } = await all(project, 3);
    expect(pages).toBeGreaterThanOrEqual(3);
    expect(new Set(ids).size).toBe(7);
    expect(new Set(ids)).toEqual(new Set(made.map((r) => r.requestId)));
    // Newest first: the creation times never go up along the walk.
    const times = ids.map((id) => made.find((r) => r.requestId === id)?.createdAt ?? 0);
    expect([...times].sort((a, b) => b - a)).toEqual(times);
  });

  it("lists a request once, not its per-file progress items, and shows its latest state", async () => {
    const project = newProject();
    const request = await make(project, 1_700_000_000_000);
    await store.markRunning(project, request.requestId, 1_700_000_000_100);
    for (const key of ["interactions/a.parquet", "interactions/b.parquet"]) {
      await store.recordFile(project, request.requestId, { key, rows: 2, removed: false });
    }
    const counts = await store.fileCounts(project, request.requestId);
    await store.complete(project, request.requestId, counts, 1_700_000_000_200);
    const page = await store.list(project, { limit: 10 });
    expect(page.requests).toHaveLength(1);
    expect(page.requests[0]).toMatchObject({
      requestId: request.requestId,
      status: "completed",
      counts: { rowsDeleted: 4, filesRewritten: 2, filesDeleted: 0 },
      finishedAt: 1_700_000_000_200,
    });
    // Completed: the user id is gone from the record, the hash stays.
    expect(page.requests[0]?.userId).toBeUndefined();
    expect(page.requests[0]?.userIdHash).toBe(request.userIdHash);
  });

  it("positions another project's cursor within the caller's own requests only", async () => {
    const a = newProject();
    const b = newProject();
    for (let i = 0; i < 3; i++) await make(a, 1_700_000_000_000 + i);
    const own = await make(b, 1_600_000_000_000);
    const cursor = (await store.list(a, { limit: 1 })).cursor;
    expect(cursor).toBeDefined();
    const page = await store.list(b, { limit: 10, cursor: cursor ?? "" });
    expect(page.requests.map((r) => r.requestId)).toEqual([own.requestId]);
  });

  it("refuses a cursor no page handed out, and a page size out of range, with a 400", async () => {
    const project = newProject();
    const forged = [
      "not-base64!",
      Buffer.from("[1,2]").toString("base64url"),
      Buffer.from('[1.5,"del_000000000000000000000000"]').toString("base64url"),
      Buffer.from('{"createdAt":1}').toString("base64url"),
      Buffer.from('[1,"del_zz"]').toString("base64url"),
    ];
    for (const cursor of forged) {
      const refused = await store.list(project, { limit: 5, cursor }).catch((err: unknown) => err);
      expect(refused, cursor).toBeInstanceOf(ApiError);
      expect((refused as ApiError).status).toBe(400);
      expect((refused as ApiError).message).toContain("'cursor'");
    }
    for (const limit of [0, 101, 1.5]) {
      await expect(store.list(project, { limit })).rejects.toBeInstanceOf(ApiError);
    }
  });
});
