/**
 * `npm run bench`: every benchmark under bench/ in one go, one after another (each in a process of its
 * own, so none shares an event loop or a heap with the next), then bench/REPORT.md with tables and
 * charts (bench/report.ts). A benchmark that fails is noted in the report and the run goes on.
 *
 * The benchmarks: every `*.bench.ts`, plus `bundles.ts`, `reconcile.ts` (at RECONCILE_CALLS=1000 unless
 * set) and `soak.ts`. `npm run bench -- proxy soak` runs only those whose file name starts with one of
 * the words given (the report still covers every result in bench/results/).
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type RunLog, writeReport } from "./report";
import { machine } from "./report-machine";

const BENCH = import.meta.dirname;
const EXTRA = ["bundles.ts", "reconcile.ts", "soak.ts"];
/** The usual order: quick ones first, the long soak last. Others run after these, by name. */
const ORDER = [
  "status.bench.ts",
  "proxy.bench.ts",
  "metering.bench.ts",
  "overhead.bench.ts",
  "budgets.bench.ts",
  "warehouse.bench.ts",
  "bundles.ts",
  "deletion.bench.ts",
  "dashboard.bench.ts",
  "reconcile.ts",
  "soak.ts",
];

function benchmarks(only: string[]): string[] {
  const files = readdirSync(BENCH).filter((f) => f.endsWith(".bench.ts") || EXTRA.includes(f));
  const rank = (f: string) => (ORDER.includes(f) ? ORDER.indexOf(f) : ORDER.length);
  return files
    .filter((f) => only.length === 0 || only.some((word) => f.startsWith(word)))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

function runOne(file: string): Promise<number | null> {
  const child = spawn(process.execPath, ["--import", "tsx", join(BENCH, file)], {
    stdio: "inherit",
    env: { ...process.env, RECONCILE_CALLS: process.env.RECONCILE_CALLS ?? "1000" },
  });
  return new Promise((resolve) => child.once("exit", (code) => resolve(code)));
}

const RUN_LOG = join(BENCH, "results", "run.json");

async function main(): Promise<void> {
  const only = process.argv.slice(2);
  const files = benchmarks(only);
  // A partial run updates the log of the last full one: the report still covers every result.
  const previous =
    only.length > 0 && existsSync(RUN_LOG)
      ? (JSON.parse(readFileSync(RUN_LOG, "utf8")) as RunLog)
      : undefined;
  const log: RunLog = {
    started: previous?.started ?? new Date().toISOString(),
    finished: "",
    machineAtStart: previous?.machineAtStart ?? machine(),
    machineAtEnd: machine(),
    benchmarks: previous?.benchmarks.filter((b) => !files.includes(b.file)) ?? [],
  };
  for (const file of files) {
    const name = file.replace(/(\.bench)?\.ts$/, "");
    process.stdout.write(`\n=== ${name} (bench/${file}) ===\n`);
    const started = performance.now();
    const exitCode = await runOne(file);
    const seconds = (performance.now() - started) / 1000;
    log.benchmarks.push({ name, file, exitCode, seconds, finished: new Date().toISOString() });
    process.stdout.write(`=== ${name}: exit ${exitCode} after ${seconds.toFixed(0)} s ===\n`);
  }
  log.finished = new Date().toISOString();
  log.machineAtEnd = machine();
  writeFileSync(RUN_LOG, `${JSON.stringify(log, null, 2)}\n`);
  await writeReport();
  process.stdout.write(`\nWrote bench/REPORT.md (${log.benchmarks.length} benchmarks)\n`);
  if (log.benchmarks.some((b) => b.exitCode !== 0)) process.exitCode = 1;
}

await main();
