/**
 * Deletion benchmark: rows deleted per second rewriting the files of a 1M-row warehouse where 1% of the
 * rows match, through the local workflow (the step handlers the Lambda runs, DuckDB finding the files,
 * hyparquet reading and hyparquet-writer rewriting them, the requests in dynalite).
 *
 * The warehouse is written by the consumer in batches of 10k (100 files over ten days). Two requests run
 * on it: "spread", a user on every 100th call (every file holds 100 of its rows, so every file is
 * rewritten: the worst case), then "clustered", a user whose ~1% of calls all sit in one batch's file.
 *
 * Usage: npx tsx bench/deletion.bench.ts [rows=1000000]
 * Writes bench/results/deletion.json.
 */

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DynamoTombstones } from "../lambda/adapters/dynamodb/tombstones";
import { FileDeliveryLedger } from "../lambda/adapters/fs/ledger";
import { localUserIdHasher } from "../lambda/adapters/fs/master-key";
import { FsObjectStore } from "../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../lambda/adapters/in-process/dead-letters";
import { parquetCodec } from "../lambda/adapters/parquet/codec";
import { newDeletionRequest } from "../lambda/core/deletion";
import { silentLogger } from "../lambda/core/logger";
import type { QueueBatch } from "../lambda/core/queue";
import { startLocalDeletion } from "../lambda/local/deletion";
import { openLocalStore } from "../lambda/local/store";
import { localExportSettings } from "../lambda/local/warehouse";
import { createWarehouseConsumer } from "../lambda/warehouse/consumer";
import { formatTable } from "./lib/table";
import { syntheticRecord } from "./warehouse-records";

const here = dirname(fileURLToPath(import.meta.url));
const ROWS = Number(process.argv[2] ?? 1_000_000);
const BATCH = 10_000;
const DAY_MS = 86_400_000;
const SPREAD_USER = "spread-user@example.com";
const CLUSTERED_USER = "clustered-user@example.com";
/** The clustered user's calls: the second batch, but for the spread user's every 100th. */
const clustered = (i: number) => i >= BATCH && i < 2 * BATCH && i % 100 !== 0;

const dir = mkdtempSync(join(tmpdir(), "dmt-deletion-bench-"));
const objects = new FsObjectStore(join(dir, "warehouse"));

function batch(from: number): QueueBatch {
  const Records = [];
  for (let i = from; i < Math.min(from + BATCH, ROWS); i++) {
    const user = i % 100 === 0 ? SPREAD_USER : clustered(i) ? CLUSTERED_USER : undefined;
    const record = syntheticRecord(i, {
      projectId: "bench",
      startMs: Date.UTC(2026, 0, 1),
      stepMs: (10 * DAY_MS) / ROWS,
      ...(user && { overrides: { userIdHeader: user } }),
    });
    Records.push({
      messageId: `m${i}`,
      body: JSON.stringify(record),
      attributes: { ApproximateReceiveCount: "1" },
    });
  }
  return { Records };
}

async function writeWarehouse(): Promise<number> {
  const handler = createWarehouseConsumer({
    objects,
    codec: parquetCodec,
    ledger: await FileDeliveryLedger.open(join(dir, "ledger")),
    deadLetters: new FolderDeadLetters(objects),
    logger: silentLogger,
  });
  for (let from = 0; from < ROWS; from += BATCH) {
    if ((await handler(batch(from))).batchItemFailures.length > 0) throw new Error("consumer failed");
  }
  let files = 0;
  for await (const _ of objects.list("interactions/")) files++;
  return files;
}

let peakRss = 0;
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage.rss());
}, 50);

async function main() {
  const files = await writeWarehouse();
  const local = await openLocalStore(dir);
  let entered: { name: string; at: number }[] = [];
  const deletion = await startLocalDeletion({
    db: local.db,
    requestsTable: local.tables.deletionRequests,
    tombstones: new DynamoTombstones(local.db, local.tables.deletionTombstones),
    userIds: localUserIdHasher(dir),
    objects,
    exports: {
      settings: localExportSettings(dir),
      openDestination: (d) => new FsObjectStore(d.kind === "file" ? d.path : join(dir, "buckets", d.bucket)),
    },
    waitForInFlight: async () => {},
    logger: silentLogger,
    runner: { onState: (name) => entered.push({ name, at: performance.now() }) },
  });

  const runs = [];
  for (const [scenario, userId] of [
    ["spread", SPREAD_USER],
    ["clustered", CLUSTERED_USER],
  ] as const) {
    global.gc?.();
    peakRss = process.memoryUsage.rss();
    entered = [];
    const request = newDeletionRequest("bench", { userId, reason: "benchmark" }, Date.now());
    await deletion.routes.requests.create(request);
    const cpu = process.cpuUsage();
    const started = performance.now();
    const outcome = await deletion.runner.run(request);
    const totalMs = performance.now() - started;
    const used = process.cpuUsage(cpu);
    if (outcome !== "succeeded") throw new Error(`the ${scenario} deletion ${outcome}`);
    const done = await deletion.routes.requests.get("bench", request.requestId);
    const counts = done?.counts;
    if (done?.status !== "completed" || !counts) throw new Error(`the ${scenario} deletion did not complete`);
    /** Time spent in a state, from entering it to entering the next one. */
    const phase = (name: string) =>
      entered.reduce(
        (sum, e, i) => sum + (e.name === name ? (entered[i + 1]?.at ?? started + totalMs) - e.at : 0),
        0,
      ) / 1000;
    const rewriteSeconds = phase("RewriteFiles");
    runs.push({
      scenario,
      rowsDeleted: counts.rowsDeleted,
      filesRewritten: counts.filesRewritten,
      filesDeleted: counts.filesDeleted,
      findSeconds: phase("FindFiles"),
      rewriteSeconds,
      verifySeconds: phase("Verify"),
      totalSeconds: totalMs / 1000,
      rowsDeletedPerSecondRewriting: counts.rowsDeleted / rewriteSeconds,
      rowsDeletedPerSecondTotal: counts.rowsDeleted / (totalMs / 1000),
      cpuSeconds: (used.user + used.system) / 1e6,
      peakRssMb: peakRss / 2 ** 20,
    });
  }
  clearInterval(sampler);
  await deletion.close();
  await local.close();

  console.log(`\nDeleting 1% of a ${ROWS.toLocaleString("en-US")}-row warehouse (${files} files)\n`);
  console.log(
    formatTable(
      [
        "scenario",
        "rows deleted",
        "files rewritten",
        "deleted",
        "find s",
        "rewrite s",
        "verify s",
        "total s",
        "rows/s rewriting",
        "rows/s total",
        "peak RSS MB",
      ],
      runs.map((r) => [
        r.scenario,
        r.rowsDeleted,
        r.filesRewritten,
        r.filesDeleted,
        r.findSeconds,
        r.rewriteSeconds,
        r.verifySeconds,
        r.totalSeconds,
        r.rowsDeletedPerSecondRewriting,
        r.rowsDeletedPerSecondTotal,
        r.peakRssMb,
      ]),
    ),
  );
  const out = join(here, "results");
  mkdirSync(out, { recursive: true });
  const results = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, loadAverage1m: Number(loadavg()[0]?.toFixed(2)), node: process.version },
    warehouse: { rows: ROWS, files, matchingShare: 0.01 },
    runs,
  };
  writeFileSync(join(out, "deletion.json"), `${JSON.stringify(results, null, 2)}\n`);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => {
    clearInterval(sampler);
    rmSync(dir, { recursive: true, force: true });
  });
