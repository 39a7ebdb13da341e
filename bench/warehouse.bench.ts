/**
 * Warehouse benchmark: consumer records written per second (SQS-shaped batches of 10k into Parquet on
 * the local folder), then export rows per second and peak RSS streaming a 1M-row export as CSV and as
 * JSON through POST /api/v1/exports, the server in a process of its own.
 * The machine is shared, so each phase also reports its CPU time per record/row (all threads of the
 * consumer's process; of the export server's process) and the 1-minute load average at its end:
 * wall-clock rates move with the load, CPU time much less.
 * Usage: npx tsx bench/warehouse.bench.ts [rows=1000000]
 * Writes bench/results/warehouse.json.
 */

import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { FileDeliveryLedger } from "../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../lambda/adapters/in-process/dead-letters";
import { parquetCodec } from "../lambda/adapters/parquet/codec";
import { silentLogger } from "../lambda/core/logger";
import type { QueueBatch } from "../lambda/core/queue";
import { createWarehouseConsumer } from "../lambda/warehouse/consumer";
import { syntheticRecord } from "./warehouse-records";

const here = dirname(fileURLToPath(import.meta.url));
const ROWS = Number(process.argv[2] ?? 1_000_000);
const BATCH = 10_000;
const DAY_MS = 86_400_000;
const load1m = () => loadavg()[0] ?? 0;
/** USER_HZ, the unit of /proc/<pid>/stat CPU times: 100 on Linux. */
const CLOCK_TICKS_PER_SECOND = 100;

const dir = mkdtempSync(join(tmpdir(), "dmt-warehouse-bench-"));
const objects = new FsObjectStore(join(dir, "warehouse"));

/** One SQS-shaped batch of serialized records, spread over ten days. */
function batch(from: number): QueueBatch {
  const Records = [];
  for (let i = from; i < Math.min(from + BATCH, ROWS); i++) {
    const record = syntheticRecord(i, {
      projectId: "bench",
      startMs: Date.UTC(2026, 0, 1),
      stepMs: (10 * DAY_MS) / ROWS,
    });
    Records.push({
      messageId: `m${i}`,
      body: JSON.stringify(record),
      attributes: { ApproximateReceiveCount: "1" },
    });
  }
  return { Records };
}

async function consumer() {
  const handler = createWarehouseConsumer({
    objects,
    codec: parquetCodec,
    ledger: await FileDeliveryLedger.open(join(dir, "ledger")),
    deadLetters: new FolderDeadLetters(objects),
    logger: silentLogger,
  });
  let busyMs = 0;
  let cpuMicros = 0;
  for (let from = 0; from < ROWS; from += BATCH) {
    const input = batch(from);
    const started = performance.now();
    const cpu = process.cpuUsage();
    const result = await handler(input);
    const used = process.cpuUsage(cpu);
    cpuMicros += used.user + used.system;
    busyMs += performance.now() - started;
    if (result.batchItemFailures.length > 0) throw new Error("consumer reported failures");
  }
  let bytes = 0;
  let files = 0;
  for await (const o of objects.list("interactions/")) {
    bytes += o.size;
    files++;
  }
  return {
    records: ROWS,
    seconds: busyMs / 1000,
    recordsPerSecond: ROWS / (busyMs / 1000),
    cpuMicrosPerRecord: cpuMicros / ROWS,
    files,
    bytesPerRecord: bytes / ROWS,
    loadAverage1m: load1m(),
  };
}

/** CPU time (user + system, all threads) a process has used so far, in µs, from /proc/<pid>/stat. */
function cpuMicrosOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15, in clock ticks.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks / CLOCK_TICKS_PER_SECOND) * 1e6;
}

/** VmHWM (peak RSS) and VmRSS of a process, in MB. */
function memoryOf(pid: number): { peakMb: number; rssMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0);
  return { peakMb: kb("VmHWM") / 1024, rssMb: kb("VmRSS") / 1024 };
}

async function startServer(): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(here, "warehouse-export-server.ts"), objects.root],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const port = await new Promise<number>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`export server exited with ${code}`)));
    child.stdout?.on("data", (data: Buffer) => {
      const match = /listening (\d+)/.exec(data.toString());
      if (match) resolve(Number(match[1]));
    });
  });
  return { child, port };
}

async function exportRun(format: "csv" | "json") {
  const { child, port } = await startServer();
  const idle = memoryOf(child.pid as number);
  const idleCpu = cpuMicrosOf(child.pid as number);
  const started = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/api/v1/exports`, {
    method: "POST",
    body: JSON.stringify({ format, range: { start: "2026-01-01", end: "2026-01-31" } }),
  });
  if (res.status !== 200 || !res.body) throw new Error(`export answered ${res.status}`);
  let bytes = 0;
  let newlines = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    bytes += chunk.byteLength;
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) newlines++;
  }
  const seconds = (performance.now() - started) / 1000;
  const memory = memoryOf(child.pid as number);
  const serverCpuMicros = cpuMicrosOf(child.pid as number) - idleCpu;
  child.kill();
  // CSV: a header line and one per row; JSON: `[`, one line per row, `]`. Bodies hold escaped newlines only.
  const rows = format === "csv" ? newlines - 1 : newlines - 2;
  if (rows < ROWS) throw new Error(`${format} export had ${rows} rows, expected at least ${ROWS}`);
  return {
    format,
    rows,
    seconds,
    rowsPerSecond: rows / seconds,
    serverCpuMicrosPerRow: serverCpuMicros / rows,
    megabytes: bytes / 1e6,
    idleRssMb: idle.rssMb,
    peakRssMb: memory.peakMb,
    loadAverage1m: load1m(),
  };
}

const loadAtStart = load1m();
try {
  const consumed = await consumer();
  const exports = [await exportRun("csv"), await exportRun("json")];
  const results = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, loadAverage1mAtStart: loadAtStart, node: process.version },
    targets: { consumerRecordsPerSecond: 50_000, exportRowsPerSecond: 100_000, exportPeakRssMb: 300 },
    consumer: consumed,
    exports,
  };
  const round = (n: number) => Math.round(n);
  console.log(
    `consumer: ${round(consumed.recordsPerSecond)} records/s, ${consumed.cpuMicrosPerRecord.toFixed(1)} CPU-µs/record, load ${consumed.loadAverage1m.toFixed(1)} (${consumed.records} records, ${consumed.files} files, ${round(consumed.bytesPerRecord)} B/record)`,
  );
  console.log(
    "| export | rows | seconds | rows/s | server CPU-µs/row | MB | idle RSS MB | peak RSS MB | load |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const e of exports) {
    console.log(
      `| ${e.format} | ${e.rows} | ${e.seconds.toFixed(1)} | ${round(e.rowsPerSecond)} | ${e.serverCpuMicrosPerRow.toFixed(2)} | ${round(e.megabytes)} | ${round(e.idleRssMb)} | ${round(e.peakRssMb)} | ${e.loadAverage1m.toFixed(1)} |`,
    );
  }
  console.log(
    `load average at start ${loadAtStart.toFixed(1)}, at end ${load1m().toFixed(1)}, on ${cpus().length} CPUs`,
  );
  const out = join(here, "results");
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "warehouse.json"), `${JSON.stringify(results, null, 2)}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
