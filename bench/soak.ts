/**
 * Soak: streaming calls at a steady rate for minutes against `dmt serve` (metering on, warehouse on) in a
 * child process, over loopback only, the four vendors' streams in turn, answered by the simulator (a few
 * ms between chunks). Per interval: latency percentiles, time to first byte, the server's RSS and CPU.
 * Flat means the last intervals look like the first ones. At the end, every call's record is counted
 * in the warehouse. Run: `npx tsx bench/soak.ts` (SOAK_SECONDS=180, SOAK_RATE=10 streams/s,
 * SOAK_INTERVAL_SECONDS=10, SOAK_CHUNK_DELAY_MS=5). Writes bench/results/soak.json and soak.png.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Pool } from "undici";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { createKey, createProject } from "../lambda/core/accounts";
import { startSimulator } from "../lambda/local/simulator";
import { openLocalStore } from "../lambda/local/store";
import { startDmtServe } from "../test/support/cli";
import { simulatorEnv } from "../test/support/host";
import { warehouseRows } from "../test/support/reliability";
import { formatTable } from "./lib/table";
import { COLORS, lineChart, renderCharts } from "./report-charts";
import { machine } from "./report-machine";

const SECONDS = Number(process.env.SOAK_SECONDS ?? 180);
const RATE = Number(process.env.SOAK_RATE ?? 10);
const INTERVAL_SECONDS = Number(process.env.SOAK_INTERVAL_SECONDS ?? 10);
const CHUNK_DELAY_MS = Number(process.env.SOAK_CHUNK_DELAY_MS ?? 5);
/** Calls in flight beyond which the generator waits: a stalled server must not be buried. */
const MAX_IN_FLIGHT = 1000;
const RESULTS = join(import.meta.dirname, "results");
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

/** The streaming call of each vendor, taken in turn. */
const CALLS: { path: string; body: Record<string, unknown> }[] = [
  {
    path: "/openai/v1/chat/completions",
    body: {
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "soak" }],
      max_tokens: 64,
      stream: true,
    },
  },
  {
    path: "/groq/v1/chat/completions",
    body: {
      model: "llama-3.1-8b-instant",
      messages: [{ role: "user", content: "soak" }],
      max_tokens: 64,
      stream: true,
    },
  },
  {
    path: "/anthropic/v1/messages",
    body: {
      model: "claude-haiku-4-5",
      max_tokens: 64,
      messages: [{ role: "user", content: "soak" }],
      stream: true,
    },
  },
  {
    path: "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    body: {
      contents: [{ role: "user", parts: [{ text: "soak" }] }],
      generationConfig: { maxOutputTokens: 64 },
    },
  },
];

export interface SoakInterval {
  /** Seconds since the start, at the interval's end. */
  at: number;
  requests: number;
  failures: number;
  p50Ms: number;
  p99Ms: number;
  ttfbP50Ms: number;
  ttfbP99Ms: number;
  /** The server process: resident memory at the interval's end, CPU over the interval. */
  rssMb: number;
  cpuPercent: number;
  inFlight: number;
}

function percentile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

function median(values: number[]): number {
  return percentile(values, 0.5);
}

/** VmRSS (MB) and CPU seconds so far of a process, from /proc. */
function processStats(pid: number): { rssMb: number; cpuSeconds: number } {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const rssKb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0);
  // Fields 14 and 15 of /proc/<pid>/stat (after the command name in parentheses): user and system ticks.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const ticks = Number(fields[11]) + Number(fields[12]);
  return { rssMb: rssKb / 1024, cpuSeconds: ticks / 100 };
}

/** Least-squares slope of y over x. */
function slope(x: number[], y: number[]): number {
  const n = x.length;
  if (n < 2) return 0;
  const mx = x.reduce((a, b) => a + b, 0) / n;
  const my = y.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += ((x[i] as number) - mx) * ((y[i] as number) - my);
    den += ((x[i] as number) - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

async function main(): Promise<void> {
  const startedOn = machine();
  const sim = await startSimulator({ record: false, chunkDelayMs: CHUNK_DELAY_MS });
  Object.assign(process.env, simulatorEnv(sim.origins), { DMT_METERING: "on" });
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-soak-"));
  const server = await startDmtServe(dataDir);
  const pid = server.child.pid as number;
  const intervals: SoakInterval[] = [];
  let sent = 0;
  let completed = 0;
  let failed = 0;
  let records = 0;
  const reasons = new Map<string, number>();
  try {
    const local = await openLocalStore(dataDir);
    let key: string;
    try {
      await createProject(local.store, "soak", "enterprise", Date.now());
      ({ key } = await createKey(local.store, { projectId: "soak", name: "soak" }, Date.now()));
      await new DynamoCredits(local.db, local.tables).grant("soak", 1_000_000_000, "soak");
    } finally {
      await local.close();
    }

    const pool = new Pool(server.url, { connections: 256 });
    let latencies: number[] = [];
    let ttfbs: number[] = [];
    let failures = 0;
    let inFlight = 0;
    const call = async (index: number) => {
      const spec = CALLS[index % CALLS.length] as (typeof CALLS)[number];
      const started = performance.now();
      inFlight++;
      try {
        const res = await pool.request({
          method: "POST",
          path: spec.path,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify(spec.body),
        });
        let first: number | undefined;
        for await (const _ of res.body) first ??= performance.now() - started;
        if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
        latencies.push(performance.now() - started);
        ttfbs.push(first ?? Number.NaN);
        completed++;
      } catch (err) {
        failures++;
        failed++;
        const reason = (err as Error).message;
        reasons.set(reason, (reasons.get(reason) ?? 0) + 1);
      } finally {
        inFlight--;
      }
    };

    process.stdout.write(
      `soak: ${RATE} streams/s for ${SECONDS} s against ${server.url} (pid ${pid}), ` +
        `${INTERVAL_SECONDS} s intervals\n`,
    );
    const start = performance.now();
    let cpuBefore = processStats(pid).cpuSeconds;
    let intervalEnd = start + INTERVAL_SECONDS * 1000;
    const running: Promise<void>[] = [];
    for (let i = 0; ; i++) {
      const due = start + (i * 1000) / RATE;
      if (due >= start + SECONDS * 1000) break;
      const now = performance.now();
      if (due > now) await sleep(due - now);
      while (inFlight >= MAX_IN_FLIGHT) await sleep(5);
      if (performance.now() >= intervalEnd) {
        const stats = processStats(pid);
        intervals.push({
          at: Math.round((intervalEnd - start) / 1000),
          requests: latencies.length,
          failures,
          p50Ms: percentile(latencies, 0.5),
          p99Ms: percentile(latencies, 0.99),
          ttfbP50Ms: percentile(ttfbs, 0.5),
          ttfbP99Ms: percentile(ttfbs, 0.99),
          rssMb: stats.rssMb,
          cpuPercent: ((stats.cpuSeconds - cpuBefore) / INTERVAL_SECONDS) * 100,
          inFlight,
        });
        const last = intervals.at(-1) as SoakInterval;
        process.stdout.write(
          `  ${String(last.at).padStart(4)} s: ${last.requests} done, p50 ${last.p50Ms.toFixed(1)} ms, ` +
            `p99 ${last.p99Ms.toFixed(1)} ms, RSS ${last.rssMb.toFixed(0)} MB, CPU ${last.cpuPercent.toFixed(0)}%\n`,
        );
        cpuBefore = stats.cpuSeconds;
        latencies = [];
        ttfbs = [];
        failures = 0;
        intervalEnd += INTERVAL_SECONDS * 1000;
      }
      running.push(call(i));
      sent++;
    }
    await Promise.all(running);
    await pool.close();
  } finally {
    // A clean stop flushes the warehouse: then every call's record can be counted.
    await server.stop("SIGINT");
    records = (await warehouseRows(dataDir)).length;
    rmSync(dataDir, { recursive: true, force: true });
    await sim.close();
  }

  // Flatness: the first full intervals against the last ones (the first interval warms up).
  const steady = intervals.slice(1);
  const third = Math.max(1, Math.floor(steady.length / 3));
  const early = steady.slice(0, third);
  const late = steady.slice(-third);
  const minutes = steady.map((i) => i.at / 60);
  const flatness = {
    p99EarlyMs: median(early.map((i) => i.p99Ms)),
    p99LateMs: median(late.map((i) => i.p99Ms)),
    rssEarlyMb: median(early.map((i) => i.rssMb)),
    rssLateMb: median(late.map((i) => i.rssMb)),
    rssSlopeMbPerMinute: slope(
      minutes,
      steady.map((i) => i.rssMb),
    ),
    p99SlopeMsPerMinute: slope(
      minutes,
      steady.map((i) => i.p99Ms),
    ),
  };
  const verdict = {
    // Latency: the late p99 within twice the early one (a shared machine's noise is that large).
    p99Flat: flatness.p99LateMs <= 2 * flatness.p99EarlyMs,
    // Memory: the late RSS within 15% of the early one.
    rssFlat: flatness.rssLateMb <= 1.15 * flatness.rssEarlyMb,
    everyCallRecorded: records === completed + failed,
  };

  process.stdout.write(
    `\n${formatTable(
      ["at s", "done", "fail", "p50 ms", "p99 ms", "ttfb p50", "ttfb p99", "RSS MB", "CPU %"],
      intervals.map((i) => [
        i.at,
        i.requests,
        i.failures,
        i.p50Ms,
        i.p99Ms,
        i.ttfbP50Ms,
        i.ttfbP99Ms,
        i.rssMb,
        i.cpuPercent,
      ]),
    )}\n\nsent ${sent}, completed ${completed}, failed ${failed} ${JSON.stringify(Object.fromEntries(reasons))}, ` +
      `warehouse records ${records}\n` +
      `p99 early/late ${flatness.p99EarlyMs.toFixed(1)}/${flatness.p99LateMs.toFixed(1)} ms, ` +
      `RSS early/late ${flatness.rssEarlyMb.toFixed(0)}/${flatness.rssLateMb.toFixed(0)} MB ` +
      `(slope ${flatness.rssSlopeMbPerMinute.toFixed(2)} MB/min): ${JSON.stringify(verdict)}\n`,
  );

  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    join(RESULTS, "soak.json"),
    `${JSON.stringify(
      {
        date: new Date().toISOString(),
        machine: startedOn,
        seconds: SECONDS,
        ratePerSecond: RATE,
        intervalSeconds: INTERVAL_SECONDS,
        chunkDelayMs: CHUNK_DELAY_MS,
        sent,
        completed,
        failed,
        failureReasons: Object.fromEntries(reasons),
        records,
        intervals,
        flatness,
        verdict,
      },
      null,
      2,
    )}\n`,
  );
  await renderCharts([
    {
      file: join(RESULTS, "soak.png"),
      config: lineChart({
        title: `Soak: ${RATE} streams/s for ${SECONDS} s (dmt serve, metering and warehouse on)`,
        xLabel: "seconds",
        x: intervals.map((i) => i.at),
        leftLabel: "ms",
        rightLabel: "server RSS (MB)",
        series: [
          { label: "p50 latency", data: intervals.map((i) => i.p50Ms), color: COLORS[0] as string },
          { label: "p99 latency", data: intervals.map((i) => i.p99Ms), color: COLORS[1] as string },
          {
            label: "p99 time to first byte",
            data: intervals.map((i) => i.ttfbP99Ms),
            color: COLORS[3] as string,
          },
          { label: "RSS", data: intervals.map((i) => i.rssMb), axis: "right", color: COLORS[2] as string },
        ],
      }),
    },
  ]);
  process.stdout.write(`Wrote ${join(RESULTS, "soak.json")} and soak.png\n`);
  if (failed > 0 || !verdict.everyCallRecorded) process.exitCode = 1;
}

await main();
