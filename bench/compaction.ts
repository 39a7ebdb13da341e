/**
 * Compaction at the AWS batching settings (issue #21): steady traffic through the real consumer, then
 * the compaction run, then the same export before and after.
 *
 * Traffic: 2 projects, 100 calls a minute each. In AWS the event source has a 60 s batching window and
 * up to 2 pollers (lib/warehouse.ts), so each minute brings 2 batches holding both projects' records,
 * and the consumer writes one file per project and batch: 2,880 files per project-day. Each simulated
 * minute here is exactly that: 2 consumer batches of 50 records per project.
 *
 * Measured: files per project-day before and after, the compaction run (wall and CPU), and an export
 * of every simulated day of one project through DuckDB (the local export engine) before and after.
 * The days are an argument: 30 is the month of the issue; it takes hours on a shared 2-core machine,
 * so the default is 2, and the per-day figures scale with the days (each day is compacted on its own).
 *
 * Not a `*.bench.ts` (npm run bench would spend many minutes on it). Usage:
 *   npx tsx bench/compaction.ts [days=2]
 * Writes bench/results/compaction.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DuckDBWarehouseQuery } from "../lambda/adapters/duckdb/export-query";
import { FileDeliveryLedger } from "../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../lambda/adapters/fs/object-store";
import { parquetCodec } from "../lambda/adapters/parquet/codec";
import { createProject } from "../lambda/core/accounts";
import { silentLogger } from "../lambda/core/logger";
import { partitionPrefix } from "../lambda/core/record";
import { runLocalCompaction } from "../lambda/local/compaction";
import { openLocalStore } from "../lambda/local/store";
import { createWarehouseConsumer } from "../lambda/warehouse/consumer";
import { formatTable } from "./lib/table";
import { syntheticRecord } from "./warehouse-records";

const here = dirname(fileURLToPath(import.meta.url));
const DAYS = Number(process.argv[2] ?? 2);
const PROJECTS = ["cmp-a", "cmp-b"];
const CALLS_PER_MINUTE = 100;
const BATCHES_PER_MINUTE = 2;
const DAY_MS = 86_400_000;
const FIRST_DAY = Date.UTC(2026, 10, 1);
/** The run's "now": the day after the last simulated day, so every simulated day is closed. */
const NOW = FIRST_DAY + DAYS * DAY_MS + 3_600_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

const dir = mkdtempSync(join(tmpdir(), "dmt-compaction-bench-"));
const objects = new FsObjectStore(join(dir, "warehouse"));

async function simulate(): Promise<number> {
  const ledger = await FileDeliveryLedger.open(join(dir, "warehouse-ledger"), () => NOW);
  const consumer = createWarehouseConsumer({
    objects,
    codec: parquetCodec,
    ledger,
    deadLetters: { put: async () => {} },
    logger: silentLogger,
    clock: () => NOW,
  });
  const perBatch = CALLS_PER_MINUTE / BATCHES_PER_MINUTE;
  let n = 0;
  for (let minute = 0; minute < DAYS * 1440; minute++) {
    for (let batch = 0; batch < BATCHES_PER_MINUTE; batch++) {
      const startMs = FIRST_DAY + minute * 60_000 + batch * 30_000;
      const records = PROJECTS.flatMap((projectId) =>
        Array.from({ length: perBatch }, () => syntheticRecord(n++, { projectId, startMs, stepMs: 0 })),
      );
      const result = await consumer({
        Records: records.map((r) => ({
          messageId: r.transaction_id,
          body: JSON.stringify(r),
          attributes: { ApproximateReceiveCount: "1" },
        })),
      });
      if (result.batchItemFailures.length > 0) throw new Error("the consumer failed a batch");
    }
  }
  return n;
}

async function filesPerDay(projectId: string): Promise<number[]> {
  const counts: number[] = [];
  for (let d = 0; d < DAYS; d++) {
    let files = 0;
    for await (const _ of objects.list(partitionPrefix(projectId, dayOf(FIRST_DAY + d * DAY_MS)))) files++;
    counts.push(files);
  }
  return counts;
}

/** Exports every simulated day of the first project as JSON; its rows and seconds. */
async function exportAll(): Promise<{ rows: number; seconds: number }> {
  const query = await DuckDBWarehouseQuery.open(objects.root);
  const started = performance.now();
  let rows = 0;
  for await (const batch of query.rows(
    { projectId: PROJECTS[0] as string, start: dayOf(FIRST_DAY), end: dayOf(NOW - DAY_MS), filters: {} },
    "json",
  )) {
    rows += batch.length;
  }
  const seconds = (performance.now() - started) / 1000;
  query.close();
  return { rows, seconds };
}

async function main() {
  const simulateStarted = performance.now();
  const records = await simulate();
  const simulateSeconds = (performance.now() - simulateStarted) / 1000;
  const local = await openLocalStore(dir);
  for (const projectId of PROJECTS) await createProject(local.store, projectId, "free", FIRST_DAY);

  const before = await filesPerDay(PROJECTS[0] as string);
  const exportBefore = await exportAll();
  const cpu = process.cpuUsage();
  const started = performance.now();
  const report = await runLocalCompaction({ dataDir: dir, ...local }, silentLogger, {}, () => NOW);
  const compactSeconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  const after = await filesPerDay(PROJECTS[0] as string);
  const exportAfter = await exportAll();
  await local.close();

  const expected = (records / PROJECTS.length) | 0;
  const failed = report.partitions.filter((p) => p.outcome !== "compacted");
  if (exportBefore.rows !== expected || exportAfter.rows !== expected || failed.length > 0) {
    throw new Error(
      `checks failed: ${exportBefore.rows} and ${exportAfter.rows} rows exported of ${expected}; ${failed.length} partitions not compacted`,
    );
  }
  const run = {
    days: DAYS,
    projects: PROJECTS.length,
    callsPerMinutePerProject: CALLS_PER_MINUTE,
    records,
    simulateSeconds,
    filesPerProjectDayBefore: before,
    filesPerProjectDayAfter: after,
    partitionsCompacted: report.partitions.length,
    compactSeconds,
    compactCpuSeconds: (used.user + used.system) / 1e6,
    exportRows: exportAfter.rows,
    exportSecondsBefore: exportBefore.seconds,
    exportSecondsAfter: exportAfter.seconds,
    exportSpeedup: exportBefore.seconds / exportAfter.seconds,
  };
  console.log(
    `\nCompaction: ${DAYS} days, ${PROJECTS.length} projects, ${CALLS_PER_MINUTE} calls a minute each\n`,
  );
  console.log(
    formatTable(
      ["", "before", "after", "after/before"],
      [
        ["files per project-day", before[0] ?? 0, after[0] ?? 0, (after[0] ?? 0) / (before[0] ?? 1)],
        [
          `export of ${DAYS} days (s)`,
          exportBefore.seconds,
          exportAfter.seconds,
          exportAfter.seconds / exportBefore.seconds,
        ],
      ],
    ),
  );
  console.log(
    `\ncompaction run: ${report.partitions.length} partitions in ${compactSeconds.toFixed(1)} s (${run.compactCpuSeconds.toFixed(1)} s CPU); ${records.toLocaleString("en-US")} records written in ${simulateSeconds.toFixed(0)} s`,
  );
  const out = join(here, "results", "compaction.json");
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(
    out,
    `${JSON.stringify(
      {
        date: new Date().toISOString(),
        machine: { node: process.version, cpus: cpus().length, loadavg: loadavg().map((l) => +l.toFixed(2)) },
        run,
      },
      null,
      2,
    )}\n`,
  );
  console.log(`\nwrote ${out}`);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }));
