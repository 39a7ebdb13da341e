import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AttributeValue, DeleteItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DuckDBWarehouseQuery } from "../../lambda/adapters/duckdb/export-query";
import { DynamoPartitionLeases } from "../../lambda/adapters/dynamodb/partition-leases";
import { DynamoPrivacySettings } from "../../lambda/adapters/dynamodb/privacy-settings";
import { DynamoTombstones } from "../../lambda/adapters/dynamodb/tombstones";
import { FsWarehouseFiles } from "../../lambda/adapters/fs/deletion-files";
import { FileDeliveryLedger } from "../../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { decodeRecords, parquetCodec } from "../../lambda/adapters/parquet/codec";
import { createProject } from "../../lambda/core/accounts";
import { type CompactionReport, isCompactedFile, PARTITION_LEASE_MS } from "../../lambda/core/compaction";
import { hashUserId } from "../../lambda/core/deletion";
import type { DeliveryLedger } from "../../lambda/core/delivery-ledger";
import { silentLogger } from "../../lambda/core/logger";
import { updatePrivacySettings } from "../../lambda/core/privacy";
import { type InteractionRecord, partitionPrefix } from "../../lambda/core/record";
import { runLocalCompaction } from "../../lambda/local/compaction";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import {
  type CompactionDeps,
  compactPlanned,
  newRunId,
  planCompaction,
  runCompaction,
} from "../../lambda/warehouse/compaction";
import { createWarehouseConsumer } from "../../lambda/warehouse/consumer";
import { chatRecord } from "../support/records";

/**
 * Compaction over a real data dir: the consumer writes one file per batch into day partitions (with
 * the local delivery ledger), compaction merges closed days, and DuckDB (the local export engine)
 * reads the warehouse as an export would. "Now" is fixed; yesterday is the closed day.
 */
const NOW = Date.UTC(2026, 10, 26, 5, 0, 0);
const DAY = 86_400_000;
const YESTERDAY = "2026-11-25";
const TODAY = "2026-11-26";
const PROJECT = "proj-compact";

let dataDir: string;
let local: LocalStore;
let objects: FsObjectStore;
let duck: DuckDBWarehouseQuery;
let sent = 0;

function record(startedAt: number, user = "u-1"): InteractionRecord {
  sent++;
  return chatRecord({
    transactionId: `tx-${sent}-${startedAt}`,
    projectId: PROJECT,
    startedAt,
    userIdHeader: user,
  });
}

/** A consumer over the data dir's ledger, as a (new) process opens it; `ledger` may be wrapped. */
async function consumer(wrap: (ledger: DeliveryLedger) => DeliveryLedger = (l) => l) {
  const ledger = await FileDeliveryLedger.open(join(dataDir, "warehouse-ledger"), () => NOW);
  const handle = createWarehouseConsumer({
    objects,
    codec: parquetCodec,
    ledger: wrap(ledger),
    deadLetters: { put: async () => {} },
    logger: silentLogger,
    clock: () => NOW,
  });
  return async (records: InteractionRecord[]) => {
    const result = await handle({
      Records: records.map((r, i) => ({
        messageId: `m-${r.transaction_id}-${i}`,
        body: JSON.stringify(r),
        attributes: { ApproximateReceiveCount: "1" },
      })),
    });
    expect(result.batchItemFailures).toEqual([]);
  };
}

/** `batches` files of 3 records each on `day`'s noon onwards, one minute apart. */
async function fill(deliver: (records: InteractionRecord[]) => Promise<void>, day: string, batches: number) {
  const noon = Date.parse(`${day}T12:00:00Z`);
  const all: InteractionRecord[] = [];
  for (let b = 0; b < batches; b++) {
    const records = [0, 1, 2].map((i) => record(noon + b * 60_000 + i));
    await deliver(records);
    all.push(...records);
  }
  return all;
}

async function filesOf(day: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of objects.list(partitionPrefix(PROJECT, day))) keys.push(o.key);
  return keys.sort();
}

async function rowsIn(key: string): Promise<InteractionRecord[]> {
  return decodeRecords((await objects.get(key)) as Uint8Array);
}

/** The transaction ids an export of `day` returns, as DuckDB reads the folder (repeats kept). */
async function exported(day: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const batch of duck.rows({ projectId: PROJECT, start: day, end: day, filters: {} }, "json")) {
    for (const row of batch) ids.push((JSON.parse(row) as { transaction_id: string }).transaction_id);
  }
  return ids.sort();
}

const ids = (records: InteractionRecord[]) => records.map((r) => r.transaction_id).sort();

const leases = (clock: () => number) =>
  new DynamoPartitionLeases(local.db, local.tables.warehouseLeases, clock);

/** The run's dependencies over the data dir, each open to a test's wrapping. */
async function deps(overrides: Partial<CompactionDeps> = {}, clock = () => NOW): Promise<CompactionDeps> {
  return {
    projects: local.store,
    objects,
    files: new FsWarehouseFiles(objects),
    codec: parquetCodec,
    ledger: await FileDeliveryLedger.open(join(dataDir, "warehouse-ledger"), clock),
    leases: leases(clock),
    tombstones: new DynamoTombstones(local.db, local.tables.deletionTombstones),
    logger: silentLogger,
    clock,
    ...overrides,
  };
}

/** The warehouse folder with its `put` replaced (which calls the folder's own when it should). */
const onPut = (put: CompactionDeps["objects"]["put"]): CompactionDeps["objects"] => ({
  list: (prefix) => objects.list(prefix),
  exists: (key) => objects.exists(key),
  delete: (key) => objects.delete(key),
  put,
});

const privacy = () => new DynamoPrivacySettings(local.db, local.tables);
const run = () => runLocalCompaction({ dataDir, ...local }, silentLogger, {}, () => NOW);
const outcome = (report: CompactionReport, day: string) => report.partitions.find((p) => p.day === day);

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-compaction-"));
  local = await openLocalStore(dataDir);
  objects = new FsObjectStore(join(dataDir, "warehouse"));
  duck = await DuckDBWarehouseQuery.open(join(dataDir, "warehouse"));
  await createProject(local.store, PROJECT, "free", NOW - 30 * DAY);
});
afterAll(async () => {
  duck?.close();
  await local?.close();
  rmSync(dataDir, { recursive: true, force: true });
});
beforeEach(async () => {
  rmSync(join(dataDir, "warehouse"), { recursive: true, force: true });
  // No lease left by an earlier test: one that failed mid-merge would leave its partition busy until
  // NOW + PARTITION_LEASE_MS, and every later test (all at NOW) would fail on that, not on its own.
  const held = await local.db.send(new ScanCommand({ TableName: local.tables.warehouseLeases }));
  for (const item of held.Items ?? []) {
    await local.db.send(
      new DeleteItemCommand({
        TableName: local.tables.warehouseLeases,
        Key: { partition: item.partition as AttributeValue },
      }),
    );
  }
});
afterEach(async () => {
  await updatePrivacySettings(local.store, privacy(), PROJECT, {
    bodyRetentionDays: null,
    retentionDays: null,
  });
});

describe("compaction", () => {
  it("merges a closed day's consumer files into one compacted file; today's stay; every row once", async () => {
    const deliver = await consumer();
    const closed = await fill(deliver, YESTERDAY, 6);
    const open = await fill(deliver, TODAY, 2);
    expect(await filesOf(YESTERDAY)).toHaveLength(6);

    const report = await run();
    expect(outcome(report, YESTERDAY)).toMatchObject({
      outcome: "compacted",
      filesBefore: 6,
      filesAfter: 1,
      rows: 18,
    });
    const [merged, ...others] = await filesOf(YESTERDAY);
    expect(others).toEqual([]);
    expect(isCompactedFile(merged as string)).toBe(true);
    expect(ids(await rowsIn(merged as string))).toEqual(ids(closed));
    expect(await exported(YESTERDAY)).toEqual(ids(closed));
    // The open day is not touched.
    expect(await filesOf(TODAY)).toHaveLength(2);
    expect(await exported(TODAY)).toEqual(ids(open));
    // A second run finds nothing to do.
    expect(outcome(await run(), YESTERDAY)).toBeUndefined();
  });

  it("fanned out as in AWS: the plan lists the partitions to do, and each is merged once by whichever worker takes it", async () => {
    const deliver = await consumer();
    const twoDaysAgo = new Date(NOW - 2 * DAY).toISOString().slice(0, 10);
    const closed = await fill(deliver, YESTERDAY, 4);
    await fill(deliver, twoDaysAgo, 3);
    await fill(deliver, TODAY, 2);
    const steps = await deps();
    const planned = await planCompaction(steps);
    // Closed days with two files or more, newest first; today is open.
    expect(planned).toEqual([
      { projectId: PROJECT, day: YESTERDAY, dropBodies: false },
      { projectId: PROJECT, day: twoDaysAgo, dropBodies: false },
    ]);
    // Two workers, each its own lease holder; a message delivered twice finds nothing left.
    const [first, second] = planned;
    expect(await compactPlanned(steps, newRunId(), first as (typeof planned)[number])).toMatchObject({
      outcome: "compacted",
      filesBefore: 4,
      filesAfter: 1,
    });
    expect(await compactPlanned(steps, newRunId(), second as (typeof planned)[number])).toMatchObject({
      outcome: "compacted",
      filesBefore: 3,
    });
    expect(await compactPlanned(steps, newRunId(), first as (typeof planned)[number])).toBeUndefined();
    expect(await exported(YESTERDAY)).toEqual(ids(closed));
    expect(await planCompaction(steps)).toEqual([]);
  });

  it("drops bodies past the project's body retention, and leaves expired days to the retention run", async () => {
    const deliver = await consumer();
    const expired = new Date(NOW - 10 * DAY).toISOString().slice(0, 10);
    const bodiless = new Date(NOW - 2 * DAY).toISOString().slice(0, 10);
    await fill(deliver, expired, 2);
    await fill(deliver, bodiless, 2);
    await fill(deliver, YESTERDAY, 2);
    await updatePrivacySettings(local.store, privacy(), PROJECT, { retentionDays: 5, bodyRetentionDays: 1 });
    const report = await run();
    expect(outcome(report, expired)).toBeUndefined();
    expect(await filesOf(expired)).toHaveLength(2);
    const [withoutBodies] = await filesOf(bodiless);
    const rows = await rowsIn(withoutBodies as string);
    expect(rows).toHaveLength(6);
    expect(rows.every((r) => r.request_body === null && r.response_body === null)).toBe(true);
    // Yesterday is within the body retention: its bodies stay.
    const [withBodies] = await filesOf(YESTERDAY);
    expect((await rowsIn(withBodies as string)).every((r) => r.request_body !== null)).toBe(true);
  });

  it("killed halfway: readers see every row once, the next run finishes, and a redelivered record is still written", async () => {
    // The first batch's writer died after its put, before its commit: its ids are only claimed.
    const crashed = await consumer((ledger) => ({
      ...ledger,
      lookup: (i) => ledger.lookup(i),
      claim: (f, r) => ledger.claim(f, r),
      abandon: (f) => ledger.abandon(f),
      commit: async () => {
        throw new Error("killed before the commit");
      },
    }));
    const first = await fill(crashed, YESTERDAY, 1);
    const rest = await fill(await consumer(), YESTERDAY, 4);
    const all = [...first, ...rest];

    // The run is killed at its second removal of an input; the removals begun beside it are slow (a
    // busy disk), and the run reports only once they are done: readers then see a settled folder.
    const files = new FsWarehouseFiles(objects);
    let removed = 0;
    let removing = 0;
    const killed = await deps({
      files: {
        read: (key) => files.read(key),
        replace: (key, bytes, version) => files.replace(key, bytes, version),
        async remove(key, version) {
          if (removed++ === 1) throw new Error("killed");
          removing++;
          try {
            await new Promise((resolve) => setTimeout(resolve, 50));
            await files.remove(key, version);
          } finally {
            removing--;
          }
        },
      },
    });
    const report = await runCompaction(killed);
    expect(outcome(report, YESTERDAY)?.outcome).toBe("failed");
    expect(removing).toBe(0);
    const between = await filesOf(YESTERDAY);
    expect(between.filter(isCompactedFile)).toHaveLength(1);
    expect(between.length).toBeGreaterThan(1); // the output and the inputs not yet removed
    expect(await exported(YESTERDAY)).toEqual(ids(all));

    // The lease of the killed run still holds the partition; once it ends, the next run finishes.
    expect(outcome(await run(), YESTERDAY)?.outcome).toBe("busy");
    const later = () => NOW + PARTITION_LEASE_MS + 1;
    await runCompaction(await deps({}, later));
    const after = await filesOf(YESTERDAY);
    expect(after).toHaveLength(1);
    expect(await exported(YESTERDAY)).toEqual(ids(all));

    // The crashed writer's records come again, to a new process: known as written, not written twice.
    await (await consumer())(first);
    expect(await filesOf(YESTERDAY)).toEqual(after);
    expect(await exported(YESTERDAY)).toEqual(ids(all));
  });

  it("a deletion's rows are never merged away: their files stay for the deletion to rewrite", async () => {
    const deliver = await consumer();
    const noon = Date.parse(`${YESTERDAY}T12:00:00Z`);
    const all: InteractionRecord[] = [];
    // Two files hold a user a deletion covers; two hold none.
    for (let b = 0; b < 4; b++) {
      const batch = [record(noon + b * 1000), ...(b < 2 ? [record(noon + b * 1000 + 1, "u-early")] : [])];
      await deliver(batch);
      all.push(...batch);
    }
    const tombstones = new DynamoTombstones(local.db, local.tables.deletionTombstones);
    await tombstones.put({
      projectId: PROJECT,
      requestId: "del-early",
      upTo: NOW,
      userIdHash: hashUserId(PROJECT, "u-early"),
    });
    const before = await filesOf(YESTERDAY);
    const report = await runCompaction(await deps());
    expect(outcome(report, YESTERDAY)).toMatchObject({ outcome: "compacted", filesAfter: 3, rows: 2 });
    const after = await filesOf(YESTERDAY);
    // The deletion's files are untouched (it rewrites them, keeping the removed calls' money); the
    // merged file holds none of its rows.
    const merged = after.filter(isCompactedFile);
    expect(merged).toHaveLength(1);
    expect((await rowsIn(merged[0] as string)).some((r) => r.user_id === "u-early")).toBe(false);
    expect(after.filter((f) => !isCompactedFile(f)).every((f) => before.includes(f))).toBe(true);
    expect(await exported(YESTERDAY)).toEqual(ids(all));
  });

  it("a deletion arriving during a compaction: the merge is given up, every row stays where it was", async () => {
    const deliver = await consumer();
    const noon = Date.parse(`${YESTERDAY}T12:00:00Z`);
    const all: InteractionRecord[] = [];
    for (let b = 0; b < 3; b++) {
      const batch = [record(noon + b * 1000), record(noon + b * 1000 + 2, "u-late")];
      await deliver(batch);
      all.push(...batch);
    }
    const tombstones = new DynamoTombstones(local.db, local.tables.deletionTombstones);
    const before = await filesOf(YESTERDAY);
    const base = await deps();
    let first = true;
    await runCompaction({
      ...base,
      objects: onPut(async (key, body) => {
        await objects.put(key, body);
        if (first) {
          first = false;
          // The deletion begins while the merged file is being written.
          await tombstones.put({
            projectId: PROJECT,
            requestId: "del-late",
            upTo: NOW,
            userIdHash: hashUserId(PROJECT, "u-late"),
          });
        }
      }),
    });
    // The merged file is gone and the inputs stay, for the deletion to rewrite.
    expect(await filesOf(YESTERDAY)).toEqual(before);
    expect(await exported(YESTERDAY)).toEqual(ids(all));
  });

  it("a late record for a compacted day is read once beside it, and merged with later ones", async () => {
    const deliver = await consumer();
    const closed = await fill(deliver, YESTERDAY, 3);
    await run();
    const [merged] = await filesOf(YESTERDAY);

    // A record already compacted comes again: nothing new is written.
    await deliver(closed.slice(0, 2));
    expect(await filesOf(YESTERDAY)).toEqual([merged]);

    const noon = Date.parse(`${YESTERDAY}T12:00:00Z`);
    const lateOne = [record(noon + 5)];
    await deliver(lateOne);
    expect(await filesOf(YESTERDAY)).toHaveLength(2);
    expect(await exported(YESTERDAY)).toEqual(ids([...closed, ...lateOne]));
    // One late file is not worth a merge; two are, into a second compacted file.
    expect(outcome(await run(), YESTERDAY)).toBeUndefined();
    const lateTwo = [record(noon + 6), record(noon + 7)];
    await deliver(lateTwo);
    await run();
    const after = await filesOf(YESTERDAY);
    expect(after).toHaveLength(2);
    expect(after.every(isCompactedFile)).toBe(true);
    expect(await exported(YESTERDAY)).toEqual(ids([...closed, ...lateOne, ...lateTwo]));
  });

  it("two compactions of the same partition at once: one merges, the other finds it busy", async () => {
    const closed = await fill(await consumer(), YESTERDAY, 4);
    let second: Promise<CompactionReport> | undefined;
    const base = await deps();
    const firstReport = await runCompaction({
      ...base,
      objects: onPut(async (key, body) => {
        // The second run starts, and ends, while the first holds the partition mid-merge.
        second ??= runCompaction(await deps());
        await second;
        await objects.put(key, body);
      }),
    });
    const secondReport = await (second as Promise<CompactionReport>);
    expect(outcome(secondReport, YESTERDAY)?.outcome).toBe("busy");
    expect(outcome(firstReport, YESTERDAY)?.outcome).toBe("compacted");
    expect(await filesOf(YESTERDAY)).toHaveLength(1);
    expect(await exported(YESTERDAY)).toEqual(ids(closed));
  });
});
