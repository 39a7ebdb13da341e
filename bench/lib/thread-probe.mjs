// Loaded into `dmt serve` by bench/overhead.bench.ts through NODE_OPTIONS (`--import`), in the main
// thread and in every worker thread. It changes nothing in the server; it only lets the bench see:
// - which OS thread is which (each thread writes `thread-<tid>.json` into DMT_PROBE_DIR once), so the
//   bench reads every thread's CPU time from /proc/<pid>/task/<tid>/stat;
// - the main thread's event-loop delay histogram, its utilisation and its GC pauses, written to
//   `loop.json` and reset on each SIGUSR2 (the bench signals before and after each phase).
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { monitorEventLoopDelay, PerformanceObserver, performance } from "node:perf_hooks";
import { isMainThread, threadId, workerData } from "node:worker_threads";

const dir = process.env.DMT_PROBE_DIR;
if (dir) {
  const tid = Number(readFileSync("/proc/thread-self/stat", "utf8").split(" ")[0]);
  // The workers are told apart by what they are started with (lambda/local/*-worker.mjs).
  const kind = isMainThread
    ? "main"
    : workerData?.flushIntervalMs !== undefined
      ? "warehouse worker"
      : workerData?.path !== undefined
        ? "dynalite worker"
        : `worker ${threadId}`;
  writeFileSync(join(dir, `thread-${tid}.json`), JSON.stringify({ tid, threadId, kind }));
  if (isMainThread) {
    const delay = monitorEventLoopDelay({ resolution: 1 });
    delay.enable();
    let gc = { count: 0, ms: 0, maxMs: 0 };
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        gc.count++;
        gc.ms += entry.duration;
        gc.maxMs = Math.max(gc.maxMs, entry.duration);
      }
    }).observe({ entryTypes: ["gc"] });
    let elu = performance.eventLoopUtilization();
    process.on("SIGUSR2", () => {
      const used = performance.eventLoopUtilization(elu);
      const ms = (ns) => ns / 1e6;
      writeFileSync(
        join(dir, "loop.json"),
        JSON.stringify({
          delayP50Ms: ms(delay.percentile(50)),
          delayP99Ms: ms(delay.percentile(99)),
          delayMaxMs: ms(delay.max),
          utilisation: used.utilization,
          gc,
          heapUsedMb: process.memoryUsage().heapUsed / 2 ** 20,
        }),
      );
      delay.reset();
      gc = { count: 0, ms: 0, maxMs: 0 };
      elu = performance.eventLoopUtilization();
    });
  }
}
