import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type AttributeValue, DeleteItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DuckDBDeletionQuery } from "../../lambda/adapters/duckdb/deletion-query";
import { DuckDBWarehouseQuery } from "../../lambda/adapters/duckdb/export-query";
import { nodeFolder, type SnapshotFolder } from "../../lambda/adapters/duckdb/read-snapshot";
import { DynamoPartitionLeases } from "../../lambda/adapters/dynamodb/partition-leases";
import { DynamoTombstones } from "../../lambda/adapters/dynamodb/tombstones";
import { FsWarehouseFiles } from "../../lambda/adapters/fs/deletion-files";
import { FileDeliveryLedger } from "../../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { parquetCodec } from "../../lambda/adapters/parquet/codec";
import { createProject } from "../../lambda/core/accounts";
import { type CompactionReport, isCompactedFile } from "../../lambda/core/compaction";
import { silentLogger } from "../../lambda/core/logger";
import { type InteractionRecord, partitionPrefix } from "../../lambda/core/record";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import { type CompactionDeps, runCompaction } from "../../lambda/warehouse/compaction";
import { createWarehouseConsumer } from "../../lambda/warehouse/consumer";
import { chatRecord } from "../support/records";

/**
 * A local export (and a FOCUS export, and a deletion's queries) while a compaction swaps the same
 * partition (docs/warehouse.md, "Readers during a swap"). Each race is made exact by gates, not by
 * waiting: compaction stops at a step of its merge until the export's query reaches a given folder
 * call, then runs to its end before the export goes on. The export must succeed with each row once.
 */
const NOW = Date.UTC(2026, 10, 26, 5, 0, 0);
const YESTERDAY = "2026-11-25";
const PROJECT = "proj-race";

let dataDir: string;
let root: string;
let local: LocalStore;
let objects: FsObjectStore;
let sent = 0;

function record(startedAt: number): InteractionRecord {
  sent++;
  return chatRecord({ transactionId: `tx-${sent}-${startedAt}`, projectId: PROJECT, startedAt });
}

/** `batches` consumer files of 3 records each on yesterday, through the real consumer. */
async function fill(batches: number): Promise<string[]> {
  const handle = createWarehouseConsumer({
    objects,
    codec: parquetCodec,
    ledger: await FileDeliveryLedger.open(join(dataDir, "warehouse-ledger"), () => NOW),
    deadLetters: { put: async () => {} },
    logger: silentLogger,
    clock: () => NOW,
  });
  const noon = Date.parse(`${YESTERDAY}T12:00:00Z`);
  const ids: string[] = [];
  for (let b = 0; b < batches; b++) {
    const records = [0, 1, 2].map((i) => record(noon + b * 60_000 + i));
    const result = await handle({
      Records: records.map((r) => ({
        messageId: `m-${r.transaction_id}`,
        body: JSON.stringify(r),
        attributes: { ApproximateReceiveCount: "1" },
      })),
    });
    expect(result.batchItemFailures).toEqual([]);
    ids.push(...records.map((r) => r.transaction_id));
  }
  return ids.sort();
}

async function filesOfYesterday(): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of objects.list(partitionPrefix(PROJECT, YESTERDAY))) keys.push(o.key);
  return keys.sort();
}

/** A one-shot signal. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

type Step = "put" | "remove";

/**
 * A compaction run that stops at its merge's `step` (the merged file's put, or the inputs' removals)
 * until `go` opens; returned once it has stopped there.
 */
async function pausedCompaction(step: Step) {
  const reached = gate();
  const go = gate();
  let paused = false;
  // Every call of the step waits (the swap removes 16 inputs at once), the first one signals.
  const pause = async () => {
    if (!paused) {
      paused = true;
      reached.open();
    }
    await go.opened;
  };
  const files = new FsWarehouseFiles(objects);
  const deps: CompactionDeps = {
    projects: local.store,
    objects: {
      list: (prefix) => objects.list(prefix),
      exists: (key) => objects.exists(key),
      delete: (key) => objects.delete(key),
      async put(key, body) {
        if (step === "put" && isCompactedFile(key)) await pause();
        await objects.put(key, body);
      },
    },
    files: {
      read: (key) => files.read(key),
      replace: (key, bytes, version) => files.replace(key, bytes, version),
      async remove(key, version) {
        if (step === "remove") await pause();
        await files.remove(key, version);
      },
    },
    codec: parquetCodec,
    ledger: await FileDeliveryLedger.open(join(dataDir, "warehouse-ledger"), () => NOW),
    leases: new DynamoPartitionLeases(local.db, local.tables.warehouseLeases, () => NOW),
    tombstones: new DynamoTombstones(local.db, local.tables.deletionTombstones),
    logger: silentLogger,
    clock: () => NOW,
  };
  const run = runCompaction(deps, { projectId: PROJECT });
  await reached.opened;
  return { go, run };
}

/**
 * The folder calls of a query's read snapshot: at the `at`-th listing of yesterday's folder (1: the
 * first, 2: the check after the links) the listing is made, then the paused compaction is let go
 * and runs to its end before the query goes on.
 */
function racingFolder(at: number, compaction: { go: { open(): void }; run: Promise<CompactionReport> }) {
  let listings = 0;
  const folder: SnapshotFolder = {
    link: (existing, newPath) => nodeFolder.link(existing, newPath),
    async readdir(path) {
      const entries = await nodeFolder.readdir(path);
      if (path.endsWith(`dt=${YESTERDAY}`) && ++listings === at) {
        compaction.go.open();
        await compaction.run;
      }
      return entries;
    },
  };
  return { folder, listings: () => listings };
}

async function exportedIds(duck: DuckDBWarehouseQuery): Promise<string[]> {
  const ids: string[] = [];
  const query = { projectId: PROJECT, start: YESTERDAY, end: YESTERDAY, filters: {} };
  for await (const batch of duck.rows(query, "json")) {
    for (const row of batch) ids.push((JSON.parse(row) as { transaction_id: string }).transaction_id);
  }
  return ids.sort();
}

/** The run compacted yesterday into one file: the swap the query raced really happened. */
async function expectSwapped(run: Promise<CompactionReport>) {
  const report = await run;
  expect(report.partitions.find((p) => p.day === YESTERDAY)?.outcome).toBe("compacted");
  const after = await filesOfYesterday();
  expect(after).toHaveLength(1);
  expect(isCompactedFile(after[0] as string)).toBe(true);
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-compaction-race-"));
  root = join(dataDir, "warehouse");
  local = await openLocalStore(dataDir);
  objects = new FsObjectStore(root);
  await createProject(local.store, PROJECT, "free", NOW - 30 * 86_400_000);
});
afterAll(async () => {
  await local?.close();
  rmSync(dataDir, { recursive: true, force: true });
});
beforeEach(async () => {
  rmSync(root, { recursive: true, force: true });
  // No lease left by an earlier test: it would make this one's partition busy.
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

/**
 * Runs `query` on a DuckDB query whose folder races a compaction paused at `step` (the race acts at the
 * `raceAt`-th listing), then lets the compaction finish and checks it swapped; the query's answer and
 * how many times the folder was listed.
 */
async function acrossSwap<T>(
  step: Step,
  raceAt: number,
  query: (duck: DuckDBWarehouseQuery) => Promise<T>,
): Promise<{ answer: T; listings: number }> {
  const compaction = await pausedCompaction(step);
  const race = racingFolder(raceAt, compaction);
  const duck = await DuckDBWarehouseQuery.open(root, { folder: race.folder });
  let answer: T;
  try {
    answer = await query(duck);
  } finally {
    duck.close();
  }
  const listings = race.listings();
  await expectSwapped(compaction.run);
  return { answer, listings };
}

describe("an export while compaction swaps the same partition", () => {
  it("inputs removed after the export listed and linked them: read from its snapshot, each row once", async () => {
    const all = await fill(4);
    // Stopped at the first removal: the merged file and every input are in the folder.
    const { answer, listings } = await acrossSwap("remove", 2, exportedIds);
    expect(answer).toEqual(all);
    expect(listings).toBe(2);
  });

  it("inputs removed between the export's listing and its links: the merged file holds their rows, each row once", async () => {
    const all = await fill(4);
    expect((await acrossSwap("remove", 1, exportedIds)).answer).toEqual(all);
  });

  it("the merged file written and the inputs removed after the export listed the inputs: listed again, each row once", async () => {
    const all = await fill(4);
    // Stopped before the merged file's put: the export lists the inputs alone.
    const { answer, listings } = await acrossSwap("put", 1, exportedIds);
    expect(answer).toEqual(all);
    // The check after the links saw the new merged file, so the folder was listed again.
    expect(listings).toBeGreaterThanOrEqual(3);
  });

  it("a FOCUS export across the swap counts each call once", async () => {
    const all = await fill(4);
    const { answer: groups } = await acrossSwap("remove", 2, (duck) =>
      duck.usageGroups({ projectId: PROJECT, start: YESTERDAY, end: YESTERDAY, filters: {} }),
    );
    expect(groups.reduce((sum, g) => sum + g.calls, 0)).toBe(all.length);
    expect(groups.reduce((sum, g) => sum + g.inputTokens, 0)).toBe(all.length * 10);
  });

  it("a deletion's queries across the swap succeed and name the files by their warehouse keys", async () => {
    const all = await fill(4);
    const compaction = await pausedCompaction("remove");
    const race = racingFolder(2, compaction);
    const deletion = await DuckDBDeletionQuery.open(root, race.folder);
    try {
      const target = { projectId: PROJECT, transactionIds: all.slice(0, 2), upTo: NOW };
      const affected = await deletion.affectedFiles(target);
      // The snapshot held the merged file and the inputs: each file named as the warehouse knows it.
      expect(affected.length).toBeGreaterThan(0);
      for (const file of affected) {
        expect(file.key.startsWith(partitionPrefix(PROJECT, YESTERDAY))).toBe(true);
      }
      // Later queries see the swapped folder: the merged file alone holds the rows.
      expect(await deletion.countMatching(target)).toBe(2);
      const after = await deletion.affectedFiles(target);
      expect(after.map((f) => f.key)).toEqual(await filesOfYesterday());
    } finally {
      deletion.close();
    }
    await expectSwapped(compaction.run);
  });

  it("releases its snapshots: no links are left once the queries end", async () => {
    await fill(2);
    const duck = await DuckDBWarehouseQuery.open(root);
    try {
      await exportedIds(duck);
    } finally {
      duck.close();
    }
    expect(readdirSync(join(root, ".readers"))).toEqual([]);
  });
});
