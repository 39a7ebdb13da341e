/**
 * Issue #20's targets, side by side in one run: what dmt with full metering adds over a bare node:http
 * pipe, and what a fresh X-Request-ID on every call adds over that, at 1 and 50 connections.
 * Run: `npx tsx bench/overhead.bench.ts` (BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_ROUNDS tune it;
 * BENCH_CPU_PROF=1 also writes the server's CPU profiles under bench/results/profiles/;
 * BENCH_BASELINE=<another checkout> also measures that checkout's `dmt serve`, "(baseline)", in turn
 * with the others: a before/after in one run). Never part of the tests.
 *
 * Child processes: the vendor simulator, the bare pipe (bench/proxy-passthrough.mjs) and
 * `dmt serve` as a user runs it (its store is the embedded dynalite in a worker thread, metering on: a
 * managed key with credits and a rate limit, records to the warehouse). This process only generates
 * load. The targets take turns, BENCH_ROUNDS times, each round in another order, each phase once the
 * servers are quiet again (a phase's leftover work is not billed to the next); each figure is the
 * median over the rounds, so a load spike on a shared machine hits all of them alike, and the targets
 * are judged as ratios.
 *
 * The server is loaded with bench/lib/thread-probe.mjs: per phase, it reports the CPU each of the
 * server's threads used (main, dynalite worker, warehouse worker, the rest), the main thread's event-loop
 * delay and GC pauses. Prints tables and writes bench/results/overhead.json.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { createKey, createProject } from "../lambda/core/accounts";
import { openLocalStore } from "../lambda/local/store";
import { type ServeProcess, startDmtServe } from "../test/support/cli";
import { CHAT, type ChatTarget, chatLoad, type LoadFigures } from "./lib/chat-load";
import { median } from "./lib/stats";
import { formatTable } from "./lib/table";

/**
 * 8 s, as the harness ran: the warehouse flushes every 2 s, and a shorter phase leaves more of
 * its work and of the store's compactions until after the load, which flatters c=50 (bench/journal.md).
 */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CPU_PROF = process.env.BENCH_CPU_PROF === "1";
/** Another checkout of dmt (its node_modules installed or linked), measured side by side as "before". */
const BASELINE = process.env.BENCH_BASELINE;
const BASELINE_SUFFIX = " (baseline)";
const CONCURRENCY = [1, 50];
const VENDOR_KEY = "sk-bench-vendor-key";
const ROOT = new URL("..", import.meta.url).pathname;
const RESULTS = join(ROOT, "bench/results");
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const BARE = "node:http pipe";
const METERED = "dmt, metered";
const WITH_ID = "dmt, metered + X-Request-ID";

interface Target extends ChatTarget {
  /** The dmt server behind it, whose threads are measured. */
  server?: Server;
}

/** What the server's threads did during a phase (dmt targets only). */
interface ServerFigures {
  /** CPU time per thread kind, in cores (CPU seconds per second). */
  cpu: Record<string, number>;
  delayP50Ms: number;
  delayP99Ms: number;
  delayMaxMs: number;
  utilisation: number;
  gc: { count: number; ms: number; maxMs: number };
  /** The main thread's heap in use at the end of the phase. */
  heapUsedMb: number;
  /**
   * What the phase left behind: the CPU seconds the server used from the end of the load until it was
   * quiet, and how long that took. Work deferred past a phase (a flush, a backlog a lower priority
   * let grow) shows here and not in `cpu`.
   */
  leftBehind: { cpuSeconds: number; seconds: number };
}

interface PhaseFigures extends LoadFigures {
  server?: ServerFigures;
}

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

/** The server's threads as the probe named them, and their CPU ticks so far. */
class ServerProbe {
  private ticksBefore = new Map<number, number>();
  private startedAt = 0;
  private stoppedAt = { cpuSeconds: 0, at: 0 };
  private readonly tickHz = 100; // USER_HZ on Linux

  constructor(
    private readonly pid: number,
    private readonly dir: string,
  ) {}

  private kinds(): Map<number, string> {
    const kinds = new Map<number, string>();
    for (const file of readdirSync(this.dir).filter((f) => f.startsWith("thread-"))) {
      const { tid, kind } = JSON.parse(readFileSync(join(this.dir, file), "utf8")) as {
        tid: number;
        kind: string;
      };
      kinds.set(tid, kind);
    }
    return kinds;
  }

  private ticks(): Map<number, number> {
    const ticks = new Map<number, number>();
    for (const tid of readdirSync(`/proc/${this.pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${this.pid}/task/${tid}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        ticks.set(Number(tid), Number(fields[11]) + Number(fields[12])); // utime + stime
      } catch {
        // the thread ended meanwhile
      }
    }
    return ticks;
  }

  private async signal(): Promise<Omit<ServerFigures, "cpu">> {
    const file = join(this.dir, "loop.json");
    rmSync(file, { force: true });
    process.kill(this.pid, "SIGUSR2");
    for (let i = 0; i < 200; i++) {
      try {
        return JSON.parse(readFileSync(file, "utf8")) as Omit<ServerFigures, "cpu">;
      } catch {
        await sleep(10);
      }
    }
    throw new Error("the server's probe did not answer");
  }

  /** CPU seconds all of the server's threads used so far. */
  cpuSeconds(): number {
    let ticks = 0;
    for (const used of this.ticks().values()) ticks += used;
    return ticks / this.tickHz;
  }

  async start(): Promise<void> {
    await this.signal();
    this.ticksBefore = this.ticks();
    this.startedAt = performance.now();
  }

  async stop(): Promise<Omit<ServerFigures, "leftBehind">> {
    const loop = await this.signal();
    const seconds = (performance.now() - this.startedAt) / 1000;
    const kinds = this.kinds();
    const cpu: Record<string, number> = {};
    for (const [tid, ticks] of this.ticks()) {
      const kind = kinds.get(tid) ?? "other threads";
      const used = (ticks - (this.ticksBefore.get(tid) ?? 0)) / this.tickHz / seconds;
      cpu[kind] = (cpu[kind] ?? 0) + used;
    }
    this.stoppedAt = { cpuSeconds: this.cpuSeconds(), at: performance.now() };
    return { cpu, ...loop };
  }

  /** Waits until this server is quiet, then says what it used since `stop`. */
  async leftBehind(): Promise<ServerFigures["leftBehind"]> {
    await untilQuiet([this]);
    return {
      cpuSeconds: this.cpuSeconds() - this.stoppedAt.cpuSeconds,
      seconds: (performance.now() - this.stoppedAt.at) / 1000,
    };
  }
}

/** The servers count as quiet when together they use less than this share of one core... */
const QUIET_SHARE = 0.04;
/** ...over this window. */
const QUIET_WINDOW_MS = 500;
/** A phase starts after this long even if they are not quiet (the run says so). */
const QUIET_MAX_MS = 30_000;

/**
 * Waits until the servers finish what a phase left them (the warehouse's flush of its records, the
 * store's writes and compactions), so that it is not billed to the next phase, whichever server that is.
 */
async function untilQuiet(probes: ServerProbe[]): Promise<void> {
  const started = performance.now();
  const used = () => probes.reduce((sum, p) => sum + p.cpuSeconds(), 0);
  for (let before = used(); performance.now() - started < QUIET_MAX_MS; ) {
    await sleep(QUIET_WINDOW_MS);
    const now = used();
    if (now - before < (QUIET_SHARE * QUIET_WINDOW_MS) / 1000) return;
    before = now;
  }
  process.stdout.write(`the servers were still busy after ${QUIET_MAX_MS / 1000} s; measuring anyway\n`);
}

/** `items` rotated left by `by`: round r starts with the r-th target, so no target always goes first or last. */
const rotated = <T>(items: T[], by: number): T[] => items.map((_, i) => items[(i + by) % items.length] as T);

/** One `dmt serve` with the probe, and a managed key on its store. */
interface Server {
  serve: ServeProcess;
  probe: ServerProbe;
  probeDir: string;
  dataDir: string;
  key: string;
}

/** `dmt serve` from `bin` (this checkout's or a baseline's) on a data dir of its own. */
async function startServer(bin: string | undefined, profileDir: string | undefined): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-bench-overhead-"));
  const probeDir = mkdtempSync(join(tmpdir(), "dmt-bench-probe-"));
  process.env.DMT_PROBE_DIR = probeDir;
  const args = [`--import=${join(ROOT, "bench/lib/thread-probe.mjs")}`];
  if (profileDir) args.push("--cpu-prof", `--cpu-prof-dir=${profileDir}`);
  const serve = await startDmtServe(dataDir, args, bin);
  // A managed key as a customer has it: credits that last, a rate limit that stays out of the way.
  const local = await openLocalStore(dataDir);
  try {
    await createProject(local.store, "bench", "enterprise", Date.now());
    const { key } = await createKey(
      local.store,
      { projectId: "bench", name: "bench", rateLimit: { rpm: 1_000_000, burst: 1_000_000 } },
      Date.now(),
    );
    await new DynamoCredits(local.db, local.tables).grant("bench", 1_000_000 * 1_000_000, "bench");
    return { serve, probe: new ServerProbe(serve.child.pid as number, probeDir), probeDir, dataDir, key };
  } finally {
    await local.close();
  }
}

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const profileDir = join(RESULTS, "profiles");
  const children: ChildProcess[] = [];
  const servers: Server[] = [];
  const loads: PhaseFigures[] = [];
  try {
    const sim = await startChild(["--import", "tsx", "bench/proxy-simulator.ts"]);
    children.push(sim.child);
    const bare = await startChild(["bench/proxy-passthrough.mjs", sim.url]);
    children.push(bare.child);

    process.env.DMT_METERING = "on";
    process.env.DMT_UPSTREAM_OPENAI = `${sim.url}/openai`;
    process.env.OPENAI_API_KEY = VENDOR_KEY;
    if (CPU_PROF) {
      rmSync(profileDir, { recursive: true, force: true });
      mkdirSync(profileDir, { recursive: true });
    }
    const current = await startServer(undefined, CPU_PROF ? profileDir : undefined);
    servers.push(current);
    const baseline = BASELINE ? await startServer(join(BASELINE, "bin/dmt.mjs"), undefined) : undefined;
    if (baseline) servers.push(baseline);

    const path = "/openai/v1/chat/completions";
    const dmtTargets = (server: Server, suffix: string): Target[] => [
      {
        name: METERED + suffix,
        url: `${server.serve.url}${path}`,
        headers: { authorization: `Bearer ${server.key}` },
        requestIds: false,
        server,
      },
      {
        name: WITH_ID + suffix,
        url: `${server.serve.url}${path}`,
        headers: { authorization: `Bearer ${server.key}` },
        requestIds: true,
        server,
      },
    ];
    const targets: Target[] = [
      {
        name: BARE,
        url: `${bare.url}${path}`,
        headers: { authorization: `Bearer ${VENDOR_KEY}` },
        requestIds: false,
      },
      ...dmtTargets(current, ""),
      ...(baseline ? dmtTargets(baseline, BASELINE_SUFFIX) : []),
    ];
    for (const target of targets) {
      const check = await fetch(target.url, {
        method: "POST",
        headers: { "content-type": "application/json", ...target.headers },
        body: CHAT,
      });
      if (check.status !== 200)
        throw new Error(`${target.name} answered ${check.status}: ${await check.text()}`);
      process.stdout.write(`${target.name}: warm-up...\n`);
      await chatLoad(target, 10, WARMUP_SECONDS, 0);
    }
    for (let round = 1; round <= ROUNDS; round++) {
      for (const connections of CONCURRENCY) {
        for (const target of rotated(targets, round - 1)) {
          await untilQuiet(servers.map((s) => s.probe));
          process.stdout.write(`round ${round}/${ROUNDS}: ${target.name}, ${connections} connections...\n`);
          await target.server?.probe.start();
          const figures: PhaseFigures = await chatLoad(target, connections, SECONDS, round);
          if (target.server) {
            const during = await target.server.probe.stop();
            figures.server = { ...during, leftBehind: await target.server.probe.leftBehind() };
          }
          loads.push(figures);
        }
      }
    }
  } finally {
    for (const server of servers) await server.serve.stop("SIGINT");
    for (const child of children) child.kill("SIGTERM");
    for (const server of servers) {
      rmSync(server.dataDir, { recursive: true, force: true });
      rmSync(server.probeDir, { recursive: true, force: true });
    }
  }

  const names = [...new Set(loads.map((l) => l.target))];
  const summary = CONCURRENCY.flatMap((connections) =>
    names.map((target) => {
      const runs = loads.filter((l) => l.target === target && l.connections === connections);
      const servers = runs.flatMap((r) => (r.server ? [r.server] : []));
      const kinds = [...new Set(servers.flatMap((s) => Object.keys(s.cpu)))];
      return {
        target,
        connections,
        requestsPerSecond: median(runs.map((r) => r.requestsPerSecond)),
        p50Ms: median(runs.map((r) => r.p50Ms)),
        p99Ms: median(runs.map((r) => r.p99Ms)),
        failures: runs.reduce((sum, r) => sum + r.failures, 0),
        ...(servers.length > 0 && {
          server: {
            cpu: Object.fromEntries(kinds.map((k) => [k, median(servers.map((s) => s.cpu[k] ?? 0))])),
            delayP99Ms: median(servers.map((s) => s.delayP99Ms)),
            delayMaxMs: median(servers.map((s) => s.delayMaxMs)),
            utilisation: median(servers.map((s) => s.utilisation)),
            gcMsPerSecond: median(servers.map((s) => s.gc.ms / SECONDS)),
            gcMaxMs: median(servers.map((s) => s.gc.maxMs)),
            // Per request of the phase; seconds from the end of the load until the server was quiet.
            leftBehindCpuMs: median(
              runs.map((r) => ((r.server?.leftBehind.cpuSeconds ?? Number.NaN) * 1000) / r.requests),
            ),
            settleSeconds: median(servers.map((s) => s.leftBehind.seconds)),
          },
        }),
      };
    }),
  );
  const row = (target: string, connections: number) =>
    summary.find((s) => s.target === target && s.connections === connections);
  const vs = (target: string, base: string, connections: number) => {
    const a = row(target, connections);
    const b = row(base, connections);
    return {
      addedP50Ms: (a?.p50Ms ?? Number.NaN) - (b?.p50Ms ?? Number.NaN),
      addedP99Ms: (a?.p99Ms ?? Number.NaN) - (b?.p99Ms ?? Number.NaN),
      throughputRatio: (a?.requestsPerSecond ?? Number.NaN) / (b?.requestsPerSecond ?? Number.NaN),
    };
  };
  /** Issue #20's five targets for one dmt (this checkout's, or the baseline's with its suffix). */
  const goals = (suffix: string) => {
    const metered1 = vs(METERED + suffix, BARE, 1);
    const metered50 = vs(METERED + suffix, BARE, 50);
    const id1 = vs(WITH_ID + suffix, METERED + suffix, 1);
    const id50 = vs(WITH_ID + suffix, METERED + suffix, 50);
    return [
      ["metered c=1: added p50 vs pipe", metered1.addedP50Ms, "< 0.5 ms", metered1.addedP50Ms < 0.5],
      ["metered c=1: added p99 vs pipe", metered1.addedP99Ms, "< 5 ms", metered1.addedP99Ms < 5],
      ["metered c=50: req/s vs pipe", metered50.throughputRatio, ">= 0.40", metered50.throughputRatio >= 0.4],
      ["X-Request-ID c=1: added p50 vs metered", id1.addedP50Ms, "< 2 ms", id1.addedP50Ms < 2],
      ["X-Request-ID c=50: req/s vs metered", id50.throughputRatio, ">= 0.60", id50.throughputRatio >= 0.6],
    ].map(([target, value, goal, met]) => ({
      target: `${target}${suffix}`,
      value: value as number,
      goal: goal as string,
      met: met as boolean,
    }));
  };
  const targets = [...goals(""), ...(BASELINE ? goals(BASELINE_SUFFIX) : [])];

  // CPU per request: less sensitive to a busy machine than the rates, which other processes' load lowers.
  const perRequest = (s: (typeof summary)[number], kind: string) =>
    ((s.server?.cpu[kind] ?? Number.NaN) * 1000) / s.requestsPerSecond;
  process.stdout.write(
    [
      "",
      `Non-streaming chat completion, loopback; medians of ${ROUNDS} rounds of ${SECONDS} s:`,
      formatTable(
        ["target", "conns", "req/s", "p50 ms", "p99 ms", "failures"],
        summary.map((s) => [s.target, s.connections, s.requestsPerSecond, s.p50Ms, s.p99Ms, s.failures]),
      ),
      "",
      "The server during each phase (CPU ms per request by thread; after it, the CPU ms per request it",
      "left behind and the seconds until quiet; loop delay and GC of the main thread):",
      formatTable(
        [
          "target",
          "conns",
          "main",
          "dynalite",
          "warehouse",
          "other",
          "left behind",
          "settle s",
          "loop p99 ms",
          "loop max ms",
          "GC ms/s",
          "GC max ms",
        ],
        summary
          .filter((s) => s.server)
          .map((s) => [
            s.target,
            s.connections,
            perRequest(s, "main"),
            perRequest(s, "dynalite worker"),
            perRequest(s, "warehouse worker"),
            perRequest(s, "other threads"),
            s.server?.leftBehindCpuMs ?? Number.NaN,
            s.server?.settleSeconds ?? Number.NaN,
            s.server?.delayP99Ms ?? Number.NaN,
            s.server?.delayMaxMs ?? Number.NaN,
            s.server?.gcMsPerSecond ?? Number.NaN,
            s.server?.gcMaxMs ?? Number.NaN,
          ]),
      ),
      "",
      "Issue #20's targets:",
      formatTable(
        ["target", "value", "goal", "met"],
        targets.map((t) => [t.target, t.value, t.goal, t.met ? "yes" : "no"]),
      ),
      "",
    ].join("\n"),
  );
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(
    join(RESULTS, "overhead.json"),
    `${JSON.stringify({ machine, seconds: SECONDS, rounds: ROUNDS, summary, targets, loads }, null, 2)}\n`,
  );
  if (loads.some((l) => l.failures > 0)) process.exitCode = 1;
}

await main();
