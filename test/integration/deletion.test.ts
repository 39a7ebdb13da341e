/**
 * The deletion workflow end to end, locally: records go through the in-process queue and the real
 * consumer into Parquet; requests go over HTTP to the data API app (real key authentication against the
 * embedded DynamoDB, which also holds the requests and tombstones); the local runner executes the steps;
 * exports read the result. The local stack does not mount the deletion routes yet, so the data API is
 * built here with the same parts the stack uses.
 */
import { appendFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serve } from "@hono/node-server";
import { afterEach, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { DynamoDeletionRequests } from "../../lambda/adapters/dynamodb/deletion-requests";
import { DynamoTombstones } from "../../lambda/adapters/dynamodb/tombstones";
import { localUserIdHasher } from "../../lambda/adapters/fs/master-key";
import { encodeRecords } from "../../lambda/adapters/parquet/codec";
import { erasedUsageCodec } from "../../lambda/adapters/parquet/erased-usage";
import { createDataApp } from "../../lambda/app/data-api/app";
import { createKey, createProject } from "../../lambda/core/accounts";
import type { CopyPurger } from "../../lambda/core/deletion";
import { hashUserId } from "../../lambda/core/deletion";
import { deletionManifestKey, parseDeletionManifest } from "../../lambda/core/deletion-manifest";
import { ERASED_USAGE_PREFIX } from "../../lambda/core/erased-usage";
import { CachedKeyLookup } from "../../lambda/core/key-cache";
import { jsonLogger } from "../../lambda/core/logger";
import { INTERACTIONS_PREFIX, type InteractionRecord, partitionPrefix } from "../../lambda/core/record";
import { startLocalDeletion } from "../../lambda/local/deletion";
import { requireKey } from "../../lambda/local/host";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import { type LocalWarehouse, startLocalWarehouse } from "../../lambda/local/warehouse";

const U1 = "u1-alice@example.com";
const U2 = "u2-bob@example.com";

interface Env {
  dir: string;
  local: LocalStore;
  warehouse: LocalWarehouse;
  base: string;
  keys: { a: string; b: string };
  states: string[];
  logs: string[];
  close(): Promise<void>;
}

let env: Env | undefined;
afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** `onState`: told each state the runner enters, before it runs (a test's way to act in between). */
async function start(purgers: CopyPurger[] = [], onState?: (name: string) => void): Promise<Env> {
  const dir = mkdtempSync(join(tmpdir(), "dmt-deletion-"));
  const logs: string[] = [];
  const states: string[] = [];
  const logger = jsonLogger("debug", (line) => logs.push(line));
  const local = await openLocalStore(dir);
  const warehouse = await startLocalWarehouse({
    dataDir: dir,
    logger,
    // Deliveries happen when a test says so (queue.deliver) or when a deletion waits out the queue.
    flushIntervalMs: 3_600_000,
    deletion: {
      db: local.db,
      tables: local.tables,
      purgers,
      runner: {
        sleep: async () => {},
        onState: (name) => {
          states.push(name);
          onState?.(name);
        },
      },
    },
  });
  const keys = { a: "", b: "" };
  for (const project of ["proj-a", "proj-b"] as const) {
    await createProject(local.store, project, "free", Date.now());
    const { key } = await createKey(local.store, { projectId: project, name: "test" }, Date.now());
    keys[project === "proj-a" ? "a" : "b"] = key;
  }
  const app = createDataApp({
    auth: requireKey({ keys: new CachedKeyLookup(local.store, 0), clock: Date.now }),
    logger,
    exports: warehouse.exports,
    deletion: warehouse.deletion?.routes,
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as Server;
  await new Promise((resolve) => server.once("listening", resolve));
  env = {
    dir,
    local,
    warehouse,
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    keys,
    states,
    logs,
    async close() {
      await new Promise((resolve) => server.close(resolve));
      await warehouse.close();
      await local.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return env;
}

let counter = 0;
/** One call's record: the project, the user (null: none), the UTC day of January 2026. */
function call(projectId: string, user: string | null, day: number): InteractionRecord {
  const i = counter++;
  return syntheticRecord(i, {
    projectId,
    startMs: Date.UTC(2026, 0, day, 10),
    stepMs: 0,
    overrides: user === null ? { requestJson: {} } : { userIdHeader: user },
  });
}

/** Hands records to the queue and delivers them: one batch, so one file per project and day. */
async function land(e: Env, records: InteractionRecord[]): Promise<void> {
  for (const r of records) await e.warehouse.queue.send(r);
  await e.warehouse.queue.deliver();
}

async function files(e: Env, project = "proj-a"): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of e.warehouse.objects.list(`${INTERACTIONS_PREFIX}project=${project}/`))
    keys.push(o.key);
  return keys.sort();
}

/** The calls and cost a project's erased usage holds: what deletions kept of the calls they removed. */
async function erased(e: Env, project = "proj-a"): Promise<{ calls: number; costMicros: number }> {
  const total = { calls: 0, costMicros: 0 };
  for await (const o of e.warehouse.objects.list(`${ERASED_USAGE_PREFIX}project=${project}/`)) {
    for (const row of await erasedUsageCodec.decode((await e.warehouse.objects.get(o.key)) as Uint8Array)) {
      total.calls += row.calls;
      total.costMicros += row.cost_micros;
    }
  }
  return total;
}
const costOf = (records: InteractionRecord[]) => records.reduce((a, r) => a + (r.cost_micros ?? 0), 0);

function api(e: Env, path: string, key: string, body?: unknown): Promise<Response> {
  return fetch(`${e.base}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${key}` },
    ...(body !== undefined && { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
}

/** Every row of the project, by transaction id, as the export serves it (JSON text of each row). */
async function exported(e: Env, key: string): Promise<Map<string, string>> {
  const res = await api(e, "/api/v1/exports", key, {
    format: "json",
    range: { start: "2026-01-01", end: new Date(Date.now() + 86_400_000).toISOString().slice(0, 10) },
  });
  expect(res.status).toBe(200);
  const rows = (await res.json()) as Record<string, unknown>[];
  const byId = new Map(rows.map((r) => [r.transaction_id as string, JSON.stringify(r)]));
  expect(byId.size).toBe(rows.length); // no row twice
  return byId;
}

async function requestDeletion(e: Env, key: string, body: unknown): Promise<string> {
  const res = await api(e, "/api/v1/data", key, body);
  expect(res.status).toBe(202);
  const answer = (await res.json()) as { status: string; message: string; request_id: string };
  expect(answer).toEqual({
    status: "ok",
    message: "Deletion request queued",
    request_id: expect.any(String),
  });
  return answer.request_id;
}

async function state(e: Env, key: string, requestId: string) {
  const res = await api(e, `/api/v1/data/${requestId}`, key);
  expect(res.status).toBe(200);
  return (await res.json()) as {
    status: string;
    counts: { rows_deleted: number; files_rewritten: number; files_deleted: number; copies_purged: number };
    [field: string]: unknown;
  };
}

const ids = (records: InteractionRecord[]) => records.map((r) => r.transaction_id);

describe("deleting a user", () => {
  it("removes every u1 row, keeps every u2 row byte for byte, and removes files that held only u1", async () => {
    const e = await start();
    const mixed = [
      call("proj-a", U1, 14),
      call("proj-a", U2, 14),
      call("proj-a", U1, 14),
      call("proj-a", null, 14),
    ];
    const onlyU1 = [call("proj-a", U1, 15), call("proj-a", U1, 15)];
    const onlyU2 = [call("proj-a", U2, 16), call("proj-a", U2, 16)];
    const otherProject = [call("proj-b", U1, 14), call("proj-b", U2, 14)];
    await land(e, [...mixed, ...otherProject]);
    await land(e, onlyU1);
    await land(e, onlyU2);
    const u1 = [...mixed, ...onlyU1].filter((r) => r.user_id === U1);
    const filesBefore = await files(e);
    expect(filesBefore).toHaveLength(3);
    const onlyU2File = filesBefore.find((k) => k.startsWith(partitionPrefix("proj-a", "2026-01-16")));
    const onlyU2Bytes = await e.warehouse.objects.get(onlyU2File as string);
    const before = await exported(e, e.keys.a);
    const beforeB = await exported(e, e.keys.b);

    // A call of u1 after the request is new data: kept.
    const later = { ...call("proj-a", U1, 14), started_at: Date.now() + 5000 };
    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "GDPR erasure request #42" });
    await land(e, [later]);
    await e.warehouse.deletion?.runner.idle();

    const done = await state(e, e.keys.a, requestId);
    expect(done).toMatchObject({
      request_id: requestId,
      status: "completed",
      reason: "GDPR erasure request #42",
      user_id_hash: hashUserId("proj-a", U1),
      transaction_ids: 0,
      counts: { rows_deleted: u1.length, files_rewritten: 1, files_deleted: 1, copies_purged: 0 },
      error: null,
    });
    expect(Date.parse(done.created_at as string)).toBeLessThanOrEqual(Date.parse(done.started_at as string));
    expect(Date.parse(done.started_at as string)).toBeLessThanOrEqual(Date.parse(done.finished_at as string));

    const after = await exported(e, e.keys.a);
    for (const id of ids(u1)) expect(after.has(id)).toBe(false);
    const kept = [...before.keys()].filter((id) => !ids(u1).includes(id));
    expect(kept.length).toBeGreaterThan(0);
    for (const id of kept) expect(after.get(id)).toBe(before.get(id)); // bodies and all, unchanged
    expect([...after.keys()].sort()).toEqual([...kept, later.transaction_id].sort());
    // Project B's u1 is another person: untouched.
    expect(await exported(e, e.keys.b)).toEqual(beforeB);

    const filesAfter = await files(e);
    expect(filesAfter).not.toContain(
      filesBefore.find((k) => k.startsWith(partitionPrefix("proj-a", "2026-01-15"))),
    );
    expect(await e.warehouse.objects.get(onlyU2File as string)).toEqual(onlyU2Bytes);

    // The audit keeps the reason, counts and the hash; the user id itself is gone from the request,
    // and no log line ever held it.
    const stored = await new DynamoDeletionRequests(e.local.db, e.local.tables.deletionRequests).get(
      "proj-a",
      requestId,
    );
    expect(stored).not.toHaveProperty("userId");
    expect(
      e.logs.some((l) => l.includes('"deletion.completed"') && l.includes("GDPR erasure request #42")),
    ).toBe(true);
    expect(e.logs.filter((l) => l.includes(U1))).toEqual([]);
  });

  it("deletes exactly the transactions named, and no other row", async () => {
    const e = await start();
    const records = Array.from({ length: 12 }, (_, i) => call("proj-a", i % 2 ? U1 : U2, 14 + (i % 3)));
    await land(e, records.slice(0, 6));
    await land(e, records.slice(6));
    const before = await exported(e, e.keys.a);
    const named = [records[0], records[5], records[7]].map((r) => (r as InteractionRecord).transaction_id);

    const requestId = await requestDeletion(e, e.keys.a, {
      transaction_ids: [...named, "txn_never_written", named[0]],
      reason: "user asked to remove three conversations",
    });
    await e.warehouse.deletion?.runner.idle();

    expect((await state(e, e.keys.a, requestId)).counts).toEqual({
      rows_deleted: 3,
      files_rewritten: 3,
      files_deleted: 0,
      copies_purged: 0,
    });
    const after = await exported(e, e.keys.a);
    expect([...after.keys()].sort()).toEqual([...before.keys()].filter((id) => !named.includes(id)).sort());
    for (const [id, row] of after) expect(row).toBe(before.get(id));
  });
});

describe("a user spread over many files", () => {
  // More files than one round of the old inline map (500): the 20,000 of the issue are in
  // bench/deletion-scale.bench.ts, too slow for a test on a shared machine.
  const FILES = 600;

  it("finds them with one query, lists them once in a manifest, and rewrites or removes every one", async () => {
    const e = await start();
    const u1: InteractionRecord[] = [];
    const u2: InteractionRecord[] = [];
    // Small files as the consumer leaves them: every other one also holds a row of u2.
    for (let i = 0; i < FILES; i++) {
      const rows = [call("proj-a", U1, 1 + (i % 28))];
      if (i % 2 === 0) rows.push(call("proj-a", U2, 1 + (i % 28)));
      u1.push(rows[0] as InteractionRecord);
      if (rows[1]) u2.push(rows[1]);
      await e.warehouse.objects.put(
        `${partitionPrefix("proj-a", `2026-01-${String(1 + (i % 28)).padStart(2, "0")}`)}f${i}.parquet`,
        encodeRecords(rows),
      );
    }
    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();

    const done = await state(e, e.keys.a, requestId);
    expect(done.status).toBe("completed");
    expect(done.counts).toMatchObject({
      rows_deleted: FILES,
      files_rewritten: FILES / 2,
      files_deleted: FILES / 2,
    });
    // One find, one map, whatever the number of files.
    expect(e.states.filter((s) => s === "FindFiles")).toHaveLength(1);
    expect(e.states.filter((s) => s === "RewriteFiles")).toHaveLength(1);
    const manifest = await e.warehouse.objects.get(deletionManifestKey("proj-a", requestId, 0));
    const listed = parseDeletionManifest(manifest as Uint8Array);
    expect(listed).toHaveLength(FILES);
    expect(listed.every((f) => f.rows === 1)).toBe(true);
    // Every u1 row gone, every u2 row kept, once.
    const after = await exported(e, e.keys.a);
    expect(ids(u1).filter((id) => after.has(id))).toEqual([]);
    expect([...after.keys()].sort()).toEqual(ids(u2).sort());
    expect(await files(e)).toHaveLength(FILES / 2);
    // Only bounds a hang: ~30 s here on a busy 2-core machine.
  }, 600_000);
});

describe("a manifest listing a file already removed", () => {
  it("skips the file, reports it, and completes the request", async () => {
    let gone: string | undefined;
    const e = await start([], (name) => {
      // Between the find and the rewrite, one listed file goes (retention, or another request).
      if (name === "RewriteFiles" && gone === undefined && env) {
        gone = `${partitionPrefix("proj-a", "2026-01-15")}f15.parquet`;
        rmSync(join(env.warehouse.objects.root, ...gone.split("/")));
      }
    });
    for (const day of [14, 15, 16]) {
      await e.warehouse.objects.put(
        `${partitionPrefix("proj-a", `2026-01-${day}`)}f${day}.parquet`,
        encodeRecords([call("proj-a", U1, day), call("proj-a", U2, day)]),
      );
    }
    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();

    expect(gone).toBeDefined();
    const done = await state(e, e.keys.a, requestId);
    expect(done.status).toBe("completed");
    expect(done.counts).toMatchObject({ rows_deleted: 2, files_rewritten: 2, files_deleted: 0 });
    expect(e.states).not.toContain("MarkFailed");
    const reported = e.logs.map((l) => JSON.parse(l)).filter((l) => l.metric === "deletion.file_missing");
    expect(reported).toEqual([expect.objectContaining({ level: "warn", requestId, key: gone })]);
  });
});

describe("files whose rewrite keeps failing", () => {
  /** Lands `n` files of u1 and u2; while the map starts, adds to the manifest a file it must refuse. */
  async function withRefusedFile(n: number) {
    const e = await start([], (name) => {
      if (name !== "RewriteFiles" || !env) return;
      const dir = join(env.warehouse.objects.root, "deletion-manifests", "project=proj-a");
      const [request] = readdirSync(dir);
      const path = join(dir, request as string, "round-0.jsonl");
      // A key outside the project's folder: refused (DeletionFatalError), not retried, counted as failed.
      appendFileSync(
        path,
        `${JSON.stringify({ key: `${partitionPrefix("proj-b", "2026-01-14")}x.parquet`, rows: 1 })}\n`,
      );
    });
    for (let i = 0; i < n; i++) {
      await e.warehouse.objects.put(
        `${partitionPrefix("proj-a", "2026-01-14")}f${i}.parquet`,
        encodeRecords([call("proj-a", U1, 14), call("proj-a", U2, 14)]),
      );
    }
    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();
    return { e, done: await state(e, e.keys.a, requestId) };
  }

  it("tolerates a few (5 %): the others are rewritten and the request completes", async () => {
    const { e, done } = await withRefusedFile(40);
    expect(done.status).toBe("completed");
    expect(done.counts).toMatchObject({ rows_deleted: 40, files_rewritten: 40 });
    expect(e.logs.some((l) => l.includes("a file's rewrite failed"))).toBe(true);
  });

  it("fails the request when more fail than the map tolerates", async () => {
    const { e, done } = await withRefusedFile(1);
    expect(done.status).toBe("failed");
    expect(done.error).toMatch(/^States\.ExceedToleratedFailureThreshold: 1 of 2 files failed/);
    expect(e.states.slice(-2)).toEqual(["RewriteFiles", "MarkFailed"]);
  });
});

describe("deleting a user of a project at level none", () => {
  it("finds rows that hold the user only as its keyed hash, in files, in flight and in the index", async () => {
    const purged: string[] = [];
    const index: CopyPurger = {
      name: "test index",
      async purgeUser(_, userId) {
        purged.push(userId);
        return 0;
      },
      purgeTransactions: async () => 0,
    };
    const e = await start([index]);
    // What the proxy writes at level `none`: the user id replaced by its keyed stand-in.
    const keyed = await localUserIdHasher(e.dir).keyed("proj-a", U1);
    const asNone = (r: InteractionRecord) => ({ ...r, user_id: keyed, store_level: "none" });
    const written = [asNone(call("proj-a", U1, 14)), call("proj-a", U1, 14), call("proj-a", U2, 14)];
    await land(e, written);
    const inQueue = asNone(call("proj-a", U1, 15));
    await e.warehouse.queue.send(inQueue);

    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();

    const done = await state(e, e.keys.a, requestId);
    expect(done.status).toBe("completed");
    expect(done.counts.rows_deleted).toBe(2);
    const after = await exported(e, e.keys.a);
    expect([...after.keys()]).toEqual([written[2]?.transaction_id]);
    // The index is purged by both forms of the user.
    expect(purged).toEqual([U1, keyed]);
    // Another project's stand-in of the same user is another hash: the key binds the project.
    expect(await localUserIdHasher(e.dir).keyed("proj-b", U1)).not.toBe(keyed);
  });
});

describe("records in flight", () => {
  it("drops a u1 record that is still in the queue when the request arrives", async () => {
    const e = await start();
    const written = [call("proj-a", U1, 14), call("proj-a", U2, 14)];
    await land(e, written);
    const inQueue = call("proj-a", U1, 14);
    const u2InQueue = call("proj-a", U2, 14);
    await e.warehouse.queue.send(inQueue);
    await e.warehouse.queue.send(u2InQueue);
    expect(e.warehouse.queue.depth).toBe(2);

    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();

    // The consumer dropped it on delivery (the wait step delivered the queue after the tombstone was
    // written): it was never in a file, so the rewrite counted only the row that was.
    expect(e.warehouse.queue.depth).toBe(0);
    expect(
      e.logs.filter((l) => l.includes('"warehouse.tombstoned"')).map((l) => JSON.parse(l).count),
    ).toEqual([1]);
    expect((await state(e, e.keys.a, requestId)).counts.rows_deleted).toBe(1);
    const after = await exported(e, e.keys.a);
    expect([...after.keys()].sort()).toEqual([written[1], u2InQueue].map((r) => r?.transaction_id).sort());

    // Both erased calls keep their money: the rewritten one and the one dropped in flight.
    const erasedCalls = [written[0], inQueue] as InteractionRecord[];
    expect(await erased(e)).toEqual({ calls: 2, costMicros: costOf(erasedCalls) });

    // A redelivery of the same record, later on, is dropped as well, and not counted again.
    await land(e, [inQueue]);
    expect((await exported(e, e.keys.a)).has(inQueue.transaction_id)).toBe(false);
    expect(await erased(e)).toEqual({ calls: 2, costMicros: costOf(erasedCalls) });
  });
});

describe("crash safety", () => {
  it("completes a request whose worker died between rewrite and verify, without losing or doubling rows", async () => {
    let reached!: () => void;
    const atPurge = new Promise<void>((resolve) => {
      reached = resolve;
    });
    let release!: () => void;
    const hold = new Promise<void>((resolve) => {
      release = resolve;
    });
    // The first worker stops for good inside PurgeCopies: after its rewrites, before Verify.
    const stuck: CopyPurger = {
      name: "stuck",
      async purgeUser() {
        reached();
        await hold;
        return 0;
      },
      async purgeTransactions() {
        return 0;
      },
    };
    const e = await start([stuck]);
    const records = [
      call("proj-a", U1, 14),
      call("proj-a", U2, 14),
      call("proj-a", U1, 15),
      call("proj-a", U2, 15),
    ];
    await land(e, records);
    const before = await exported(e, e.keys.a);
    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await atPurge;
    expect((await state(e, e.keys.a, requestId)).status).toBe("running");

    // A new worker on the same store and files takes over the unfinished request from the start.
    const warehouse = e.warehouse;
    const logger = jsonLogger("silent");
    const second = await startLocalDeletion({
      db: e.local.db,
      requestsTable: e.local.tables.deletionRequests,
      tombstones: new DynamoTombstones(e.local.db, e.local.tables.deletionTombstones),
      userIds: localUserIdHasher(e.dir),
      objects: warehouse.objects,
      exports: warehouse.exports,
      waitForInFlight: () => warehouse.queue.deliver(),
      logger,
    });
    await second.runner.idle();
    await second.close();

    const done = await state(e, e.keys.a, requestId);
    expect(done.status).toBe("completed");
    expect(done.counts).toEqual({ rows_deleted: 2, files_rewritten: 2, files_deleted: 0, copies_purged: 0 });
    const after = await exported(e, e.keys.a);
    expect([...after.keys()].sort()).toEqual(ids([records[1], records[3]] as InteractionRecord[]).sort());
    for (const [id, row] of after) expect(row).toBe(before.get(id));
    // The rewrites ran twice over; their erased usage counts each call once.
    const u1 = [records[0], records[2]] as InteractionRecord[];
    expect(await erased(e)).toEqual({ calls: 2, costMicros: costOf(u1) });

    // The first worker wakes up to a completed request and changes nothing.
    release();
    await e.warehouse.deletion?.runner.idle();
    expect(await state(e, e.keys.a, requestId)).toEqual(done);
    expect(await exported(e, e.keys.a)).toEqual(after);
  });

  it("goes round again when rows turn up after the rewrite, and counts them", async () => {
    const late = call("proj-a", U1, 20);
    let e!: Env;
    let landed = false;
    // Stands in for a file that lands late (a consumer that read the tombstones just before them).
    const lateFile: CopyPurger = {
      name: "late file",
      async purgeUser() {
        if (!landed) {
          landed = true;
          await e.warehouse.objects.put(
            `${partitionPrefix("proj-a", "2026-01-20")}late.parquet`,
            encodeRecords([late]),
          );
        }
        return 0;
      },
      async purgeTransactions() {
        return 0;
      },
    };
    e = await start([lateFile]);
    const first = call("proj-a", U1, 14);
    await land(e, [first, call("proj-a", U2, 14)]);
    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();

    const done = await state(e, e.keys.a, requestId);
    expect(done.status).toBe("completed");
    expect(done.counts).toMatchObject({ rows_deleted: 2, files_rewritten: 1, files_deleted: 1 });
    // Each round kept the money of what it removed.
    expect(await erased(e)).toEqual({ calls: 2, costMicros: costOf([first, late]) });
    expect(e.states).toEqual([
      "RecordRequest",
      "WaitForInFlight",
      "FindFiles",
      "AnyFiles",
      "RewriteFiles",
      "PurgeCopies",
      "Verify",
      "RowsRemain",
      "FindFiles",
      "AnyFiles",
      "RewriteFiles",
      "PurgeCopies",
      "Verify",
      "RowsRemain",
    ]);
  });

  it("marks a request failed, with each purger's outcome, when a purger keeps failing; the others still run", async () => {
    const broken: CopyPurger = {
      name: "operator bucket",
      async purgeUser() {
        throw new Error("AccessDenied");
      },
      async purgeTransactions() {
        return 0;
      },
    };
    let healthyRuns = 0;
    const healthy: CopyPurger = {
      name: "dashboard copies",
      async purgeUser() {
        healthyRuns++;
        return healthyRuns === 1 ? 2 : 0; // purged on the first run, nothing left after
      },
      async purgeTransactions() {
        return 0;
      },
    };
    const e = await start([broken, healthy]);
    await land(e, [call("proj-a", U1, 14)]);
    const requestId = await requestDeletion(e, e.keys.a, { user_id: U1, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();

    const failed = await state(e, e.keys.a, requestId);
    expect(failed).toMatchObject({
      status: "failed",
      error:
        "Error: copies not purged (bucket exports: 0 purged; dead letters: 0 purged; " +
        "operator bucket: Error: AccessDenied; dashboard copies: 0 purged)",
    });
    // The purger after the failing one ran on every try (for the user id and for its keyed stand-in
    // that level `none` stores), and what it purged is counted.
    expect(healthyRuns).toBe(12);
    expect(failed.counts.copies_purged).toBe(2);
    expect(failed.finished_at).toEqual(expect.any(String));
    expect(e.states.slice(-2)).toEqual(["PurgeCopies", "MarkFailed"]);
    // Retried as the policy says before giving up: five retries after the first try.
    expect(e.logs.filter((l) => l.includes("deletion step failed; retrying"))).toHaveLength(5);
  });
});

describe("project isolation", () => {
  it("lets a project neither delete nor read another project's data or requests", async () => {
    const e = await start();
    const a = [call("proj-a", U1, 14), call("proj-a", U2, 14)];
    await land(e, [...a, call("proj-b", U2, 14)]);
    const beforeA = await exported(e, e.keys.a);

    // B names A's user and A's transactions: nothing of A goes.
    const fromB = await requestDeletion(e, e.keys.b, {
      user_id: U1,
      transaction_ids: ids(a),
      reason: "not theirs to delete",
    });
    await e.warehouse.deletion?.runner.idle();
    expect((await state(e, e.keys.b, fromB)).counts.rows_deleted).toBe(0);
    expect(await exported(e, e.keys.a)).toEqual(beforeA);

    // Neither reads the other's request: the same 404 as an id that never existed.
    const fromA = await requestDeletion(e, e.keys.a, { user_id: U2, reason: "erasure" });
    await e.warehouse.deletion?.runner.idle();
    for (const [key, id] of [
      [e.keys.a, fromB],
      [e.keys.b, fromA],
      [e.keys.a, "del_000000000000000000000000"],
      [e.keys.a, "not-an-id"],
    ] as const) {
      const res = await api(e, `/api/v1/data/${id}`, key);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({
        error: { message: "No deletion request with this id.", type: "not_found_error", code: "not_found" },
      });
    }
    expect((await state(e, e.keys.a, fromA)).status).toBe("completed");
  });
});

describe("bad requests over HTTP", () => {
  it("answers each bad input with a 400 that says what is wrong, and records nothing", async () => {
    const e = await start();
    const cases: [unknown, string, string][] = [
      [{ user_id: "u1" }, "missing_field", "Missing required field 'reason'."],
      [{ reason: "r" }, "missing_field", "Provide 'user_id' or 'transaction_ids' (or both)."],
      [{ user_id: "", reason: "r" }, "invalid_field", "Invalid field 'user_id': must not be empty."],
      [{ user_id: "u1", reason: "" }, "invalid_field", "Invalid field 'reason': must not be empty."],
      [{ transaction_ids: [""], reason: "r" }, "invalid_field", "Invalid field 'transaction_ids[0]'"],
      [{ transaction_ids: "txn_1", reason: "r" }, "invalid_field", "must be an array of strings."],
      [
        { transaction_ids: Array.from({ length: 1001 }, (_, i) => `t${i}`), reason: "r" },
        "invalid_field",
        "a request names at most 1000.",
      ],
      [
        { transaction_ids: ["t1", 5, null], reason: "r" },
        "invalid_field",
        "'transaction_ids[1]': must be a string.",
      ],
      [{ user_id: "x".repeat(10_240), reason: "r" }, "invalid_field", "must be at most 256 characters."],
      [{ user_id: "u1", reason: "r", force: true }, "invalid_field", "unknown field 'force'"],
      ["{not json", "invalid_json", "Request body is not valid JSON."],
      [["u1"], "invalid_json", "The request body must be a JSON object."],
    ];
    for (const [body, code, message] of cases) {
      const res = await api(e, "/api/v1/data", e.keys.a, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      const answer = (await res.json()) as { error: { type: string; code: string; message: string } };
      expect(answer.error.type).toBe("invalid_request_error");
      expect(answer.error.code).toBe(code);
      expect(answer.error.message).toContain(message);
    }
    expect(
      await new DynamoDeletionRequests(e.local.db, e.local.tables.deletionRequests).unfinished(),
    ).toEqual([]);
    expect(e.states).toEqual([]);

    // Without a key, or with another method, the usual answers.
    expect((await fetch(`${e.base}/api/v1/data`, { method: "POST", body: "{}" })).status).toBe(401);
    const put = await fetch(`${e.base}/api/v1/data`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${e.keys.a}` },
    });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("POST");
  });
});
