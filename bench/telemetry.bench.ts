/**
 * What OpenTelemetry costs a call: two `dmt serve` side by side in one run, metered as a user runs it,
 * the access log off in both, one without an OTLP endpoint (the SDK not loaded) and one exporting
 * each call's span and metrics over OTLP/HTTP (protobuf, the default) to a local sink that keeps up.
 * Run: `npx tsx bench/telemetry.bench.ts` (BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_ROUNDS tune it;
 * BENCH_OTLP_PROTOCOL=http/json for the other encoding). Never part of the tests.
 *
 * Children: the vendor simulator, the sink (bench/otlp-sink.mjs), the two servers. The two take turns,
 * BENCH_ROUNDS times at 1 and 50 connections, each round starting with the other, each phase once
 * both servers are quiet (the spans a phase leaves to be sent are not billed to the next one); figures
 * are medians over rounds. CPU per call is the server process's (all threads, /proc) during the phase
 * plus what it used after the load until quiet (the batched exports), divided by the calls. Prints a
 * table and writes bench/results/telemetry.json.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { createKey, createProject } from "../lambda/core/accounts";
import { openLocalStore } from "../lambda/local/store";
import { otlpSettings } from "../lambda/telemetry/config";
import { openTelemetry } from "../lambda/telemetry/hooks";
import { type ServeProcess, startDmtServe } from "../test/support/cli";
import { chatCall, outcomeOf } from "../test/support/proxy-calls";
import { CHAT, type ChatTarget, chatLoad, type LoadFigures } from "./lib/chat-load";
import { median } from "./lib/stats";
import { formatTable } from "./lib/table";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PROTOCOL = process.env.BENCH_OTLP_PROTOCOL ?? "http/protobuf";
const CONCURRENCY = [1, 50];
const VENDOR_KEY = "sk-bench-vendor-key";
const ROOT = new URL("..", import.meta.url).pathname;
const RESULTS = join(ROOT, "bench/results");
const OFF = "OpenTelemetry off";
const ON = "OpenTelemetry on";
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

/** A child that prints `{"url": ...}` once listening. */
function startChild(args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let output = "";
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code}`)));
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const line = output.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve({ url: (JSON.parse(line) as { url: string }).url, child });
    });
  });
}

/** CPU seconds a process used so far, all its threads (utime + stime, USER_HZ 100). */
function cpuSeconds(pid: number): number {
  let ticks = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // the thread ended meanwhile
    }
  }
  return ticks / 100;
}

/** Until the processes together use under 4% of a core for 0.5 s (at most 30 s). */
async function untilQuiet(pids: number[]): Promise<void> {
  const used = () => pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  const started = performance.now();
  for (let before = used(); performance.now() - started < 30_000; ) {
    await sleep(500);
    const now = used();
    if (now - before < 0.02) return;
    before = now;
  }
  process.stdout.write("the servers were still busy after 30 s; measuring anyway\n");
}

interface Server extends ChatTarget {
  serve: ServeProcess;
  dataDir: string;
}

async function startServer(name: string, env: Record<string, string>): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-bench-telemetry-"));
  const saved = { ...process.env };
  Object.assign(process.env, env);
  const serve = await startDmtServe(dataDir).finally(() => {
    for (const name of Object.keys(env)) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
  });
  const local = await openLocalStore(dataDir);
  try {
    await createProject(local.store, "bench", "enterprise", Date.now());
    const { key } = await createKey(
      local.store,
      { projectId: "bench", name: "bench", rateLimit: { rpm: 1_000_000, burst: 1_000_000 } },
      Date.now(),
    );
    await new DynamoCredits(local.db, local.tables).grant("bench", 1_000_000 * 1_000_000, "bench");
    return {
      name,
      url: `${serve.url}/openai/v1/chat/completions`,
      headers: { authorization: `Bearer ${key}` },
      requestIds: false,
      serve,
      dataDir,
    };
  } finally {
    await local.close();
  }
}

const HOOK_CALLS = Number(process.env.BENCH_HOOK_CALLS ?? 20_000);

/**
 * The hook alone, in this process: CPU per call of building the span and the metric points, batching,
 * encoding and sending them to the sink (process.cpuUsage, every thread of this process), from the
 * first call until the last export is answered. What the server above pays per call, without the
 * noise of the HTTP path around it. Medians of the rounds.
 */
async function hookCpu(sinkUrl: string): Promise<{ cpuUsPerCall: number; wallMs: number }[]> {
  const rounds: { cpuUsPerCall: number; wallMs: number }[] = [];
  const otlp = otlpSettings({
    OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
    OTEL_EXPORTER_OTLP_PROTOCOL: PROTOCOL as "http/protobuf",
    OTEL_EXPORTER_OTLP_TIMEOUT: 10_000,
    OTEL_SERVICE_NAME: "bench",
    OTEL_SDK_DISABLED: "false",
    OTEL_METRIC_EXPORT_INTERVAL: 60_000,
    OTEL_BSP_SCHEDULE_DELAY: 5000,
    DMT_OTEL_QUEUE_SIZE: 2048,
    DMT_OTEL_FLUSH_TIMEOUT_MS: 30_000,
  });
  if (!otlp) throw new Error("no OTLP settings");
  const quiet = { debug() {}, info() {}, warn() {}, error() {} };
  const outcome = outcomeOf({ inputTokens: 1200, cachedInputTokens: 1000, outputTokens: 30 });
  for (let round = 0; round < ROUNDS; round++) {
    const telemetry = openTelemetry(
      { otlp, flushEachCall: false },
      { logger: quiet, metrics: { add() {} }, clock: Date.now },
    );
    await telemetry.flush();
    const calls = Array.from({ length: HOOK_CALLS }, () => {
      const call = chatCall();
      call.billing = { mode: "managed", costMicros: 1234, priceVersion: "bench" };
      return call;
    });
    const cpu = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < calls.length; i++) {
      await telemetry.hooks.after?.(calls[i] as (typeof calls)[number], outcome);
      // Let the batches go as they would between calls (a full batch is exported at once).
      if (i % 256 === 255) await sleep(0);
    }
    await telemetry.shutdown();
    const used = process.cpuUsage(cpu);
    rounds.push({
      cpuUsPerCall: (used.user + used.system) / HOOK_CALLS,
      wallMs: performance.now() - started,
    });
  }
  return rounds;
}

interface Phase extends LoadFigures {
  /** Server CPU ms per call: during the load, and after it until quiet. */
  cpuMsPerCall: number;
  leftBehindCpuMsPerCall: number;
}

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const children: ChildProcess[] = [];
  const servers: Server[] = [];
  const phases: Phase[] = [];
  let sinkUrl = "";
  let hook: { cpuUsPerCall: number; wallMs: number }[] = [];
  try {
    const sim = await startChild(["--import", "tsx", "bench/proxy-simulator.ts"]);
    children.push(sim.child);
    const sink = await startChild(["bench/otlp-sink.mjs"]);
    children.push(sink.child);
    sinkUrl = sink.url;
    process.stdout.write(`the hook alone: ${ROUNDS} rounds of ${HOOK_CALLS} calls...\n`);
    hook = await hookCpu(sink.url);
    Object.assign(process.env, {
      DMT_METERING: "on",
      DMT_ACCESS_LOG: "off",
      DMT_UPSTREAM_OPENAI: `${sim.url}/openai`,
      OPENAI_API_KEY: VENDOR_KEY,
    });
    servers.push(await startServer(OFF, {}));
    servers.push(
      await startServer(ON, { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_EXPORTER_OTLP_PROTOCOL: PROTOCOL }),
    );
    const pids = servers.map((s) => s.serve.child.pid as number);
    for (const server of servers) {
      const check = await fetch(server.url, {
        method: "POST",
        headers: { "content-type": "application/json", ...server.headers },
        body: CHAT,
      });
      if (check.status !== 200)
        throw new Error(`${server.name} answered ${check.status}: ${await check.text()}`);
      process.stdout.write(`${server.name}: warm-up...\n`);
      await chatLoad(server, 10, WARMUP_SECONDS, 0);
    }
    for (let round = 1; round <= ROUNDS; round++) {
      for (const connections of CONCURRENCY) {
        const order = round % 2 === 1 ? servers : [...servers].reverse();
        for (const server of order) {
          await untilQuiet(pids);
          process.stdout.write(`round ${round}/${ROUNDS}: ${server.name}, ${connections} connections...\n`);
          const pid = server.serve.child.pid as number;
          const before = cpuSeconds(pid);
          const load = await chatLoad(server, connections, SECONDS, round);
          const during = cpuSeconds(pid) - before;
          await untilQuiet(pids);
          const after = cpuSeconds(pid) - before - during;
          phases.push({
            ...load,
            cpuMsPerCall: (during * 1000) / load.requests,
            leftBehindCpuMsPerCall: (after * 1000) / load.requests,
          });
        }
      }
    }
  } finally {
    for (const server of servers) await server.serve.stop("SIGINT");
    const received = sinkUrl ? await fetch(`${sinkUrl}/count`).then((r) => r.json()) : undefined;
    process.stdout.write(`the sink received: ${JSON.stringify(received)}\n`);
    for (const child of children) child.kill("SIGTERM");
    for (const server of servers) rmSync(server.dataDir, { recursive: true, force: true });
  }

  const summary = CONCURRENCY.flatMap((connections) =>
    [OFF, ON].map((target) => {
      const runs = phases.filter((p) => p.target === target && p.connections === connections);
      const cpu = median(runs.map((r) => r.cpuMsPerCall));
      const left = median(runs.map((r) => r.leftBehindCpuMsPerCall));
      return {
        target,
        connections,
        requestsPerSecond: median(runs.map((r) => r.requestsPerSecond)),
        p50Ms: median(runs.map((r) => r.p50Ms)),
        p99Ms: median(runs.map((r) => r.p99Ms)),
        cpuMsPerCall: cpu,
        leftBehindCpuMsPerCall: left,
        totalCpuMsPerCall: cpu + left,
        failures: runs.reduce((sum, r) => sum + r.failures, 0),
      };
    }),
  );
  const row = (target: string, connections: number) =>
    summary.find((s) => s.target === target && s.connections === connections);
  const added = CONCURRENCY.map((connections) => {
    const on = row(ON, connections);
    const off = row(OFF, connections);
    const minus = (a?: number, b?: number) => (a ?? Number.NaN) - (b ?? Number.NaN);
    const ratio = (a?: number, b?: number) => (a ?? Number.NaN) / (b ?? Number.NaN);
    return {
      connections,
      addedP50Ms: minus(on?.p50Ms, off?.p50Ms),
      p50Ratio: ratio(on?.p50Ms, off?.p50Ms),
      addedCpuMsPerCall: minus(on?.totalCpuMsPerCall, off?.totalCpuMsPerCall),
      cpuRatio: ratio(on?.totalCpuMsPerCall, off?.totalCpuMsPerCall),
      throughputRatio: ratio(on?.requestsPerSecond, off?.requestsPerSecond),
    };
  });
  process.stdout.write(
    [
      "",
      `Non-streaming chat completion, metered, loopback, OTLP ${PROTOCOL}; medians of ${ROUNDS} rounds of ${SECONDS} s:`,
      formatTable(
        [
          "target",
          "conns",
          "req/s",
          "p50 ms",
          "p99 ms",
          "CPU ms/call",
          "after ms/call",
          "total ms/call",
          "failures",
        ],
        summary.map((s) => [
          s.target,
          s.connections,
          s.requestsPerSecond,
          s.p50Ms,
          s.p99Ms,
          s.cpuMsPerCall,
          s.leftBehindCpuMsPerCall,
          s.totalCpuMsPerCall,
          s.failures,
        ]),
      ),
      "",
      "On against off:",
      formatTable(
        ["conns", "added p50 ms", "p50 on/off", "added CPU ms/call", "CPU on/off", "req/s on/off"],
        added.map((a) => [
          a.connections,
          a.addedP50Ms,
          a.p50Ratio,
          a.addedCpuMsPerCall,
          a.cpuRatio,
          a.throughputRatio,
        ]),
      ),
      "",
      `The hook alone (span, metric points, batching, ${PROTOCOL} encoding and export), per call:`,
      formatTable(
        ["calls", "CPU µs/call (median)", "min", "max"],
        [
          [
            HOOK_CALLS,
            median(hook.map((h) => h.cpuUsPerCall)),
            Math.min(...hook.map((h) => h.cpuUsPerCall)),
            Math.max(...hook.map((h) => h.cpuUsPerCall)),
          ],
        ],
      ),
      "",
    ].join("\n"),
  );
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    join(RESULTS, "telemetry.json"),
    `${JSON.stringify({ machine, protocol: PROTOCOL, seconds: SECONDS, rounds: ROUNDS, summary, added, hook, phases }, null, 2)}\n`,
  );
  if (phases.some((p) => p.failures > 0)) process.exitCode = 1;
}

await main();
