/**
 * What metering costs: the proxy's latency and throughput with metering off, on (rate limit, credit
 * hold, settlement), and on with an X-Request-ID on every call (idempotency records and stored
 * responses too), in the same run, against the same vendor simulator on loopback.
 * Run: `npx tsx bench/metering.bench.ts` (BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_ROUNDS tune it).
 * Never part of the tests.
 *
 * Every server is a child process of its own (the simulator, the store, two `dmt serve` sharing that
 * store, as instances in AWS share DynamoDB); this process only generates load. The targets take turns,
 * BENCH_ROUNDS times, and each figure is the median over the rounds, so a load spike on this shared
 * machine hits all of them alike. A store round trip's own latency is measured too: one of them is what
 * metering adds on the critical path. Prints a table and writes bench/results/metering.json.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { GetItemCommand } from "@aws-sdk/client-dynamodb";
import { Pool } from "undici";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { createKey, createProject } from "../lambda/core/accounts";
import { openLocalStore } from "../lambda/local/store";
import { type ServeProcess, startDmtServe } from "../test/support/cli";
import { CHAT, type ChatTarget, chatLoad, type LoadFigures } from "./lib/chat-load";
import { median, percentile } from "./lib/stats";
import { formatTable } from "./lib/table";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = [1, 50];
/** Isolated calls per round, and the pause after each: time for its settlement to finish first. */
const ISOLATED_CALLS = Number(process.env.BENCH_ISOLATED_CALLS ?? 100);
const PAUSE_MS = 40;
const VENDOR_KEY = "sk-bench-vendor-key";
const ROOT = new URL("..", import.meta.url).pathname;
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

type Target = ChatTarget;

/**
 * Calls one at a time with a pause after each, so that none waits for the store work of the one before
 * (back to back, the next call queues behind the previous call's settlement in the store): the latency
 * a lone client sees, and what the critical path itself adds.
 */
async function isolated(target: Target, round: number): Promise<LoadFigures> {
  const url = new URL(target.url);
  const pool = new Pool(url.origin);
  const times: number[] = [];
  let failures = 0;
  try {
    for (let i = 0; i < ISOLATED_CALLS; i++) {
      const headers: Record<string, string> = { "content-type": "application/json", ...target.headers };
      if (target.requestIds) headers["x-request-id"] = randomUUID();
      const started = performance.now();
      const response = await pool.request({ method: "POST", path: url.pathname, headers, body: CHAT });
      await response.body.text();
      if (response.statusCode === 200) times.push(performance.now() - started);
      else failures++;
      await sleep(PAUSE_MS);
    }
  } finally {
    await pool.close();
  }
  const sorted = Float64Array.from(times).sort();
  return {
    target: target.name,
    connections: 0,
    round,
    requests: times.length,
    requestsPerSecond: Number.NaN,
    p50Ms: percentile(sorted, 0.5),
    p99Ms: percentile(sorted, 0.99),
    failures,
  };
}

/** A TypeScript child that prints `{"url": ...}` once listening. */
function startChild(script: string, args: string[] = []): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let output = "";
    child.once("exit", (code) => reject(new Error(`${script} exited with ${code}`)));
    child.stdout?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const line = output.split("\n").find((l) => l.startsWith("{"));
      if (line) resolve({ url: (JSON.parse(line) as { url: string }).url, child });
    });
  });
}

/**
 * `dmt serve` with metering on or off over the shared store, and a project of its own with a key whose
 * limit stays out of the way and credits that last.
 */
async function startServer(
  metering: "on" | "off",
  dataDir: string,
  storeUrl: string,
): Promise<{ server: ServeProcess; key: string }> {
  process.env.DMT_METERING = metering;
  const server = await startDmtServe(dataDir);
  const local = await openLocalStore(dataDir, storeUrl);
  try {
    const projectId = `bench-${metering}`;
    await createProject(local.store, projectId, "enterprise", Date.now());
    const { key } = await createKey(
      local.store,
      { projectId, name: "bench", rateLimit: { rpm: 1_000_000, burst: 1_000_000 } },
      Date.now(),
    );
    await new DynamoCredits(local.db, local.tables).grant(projectId, 1_000_000 * 1_000_000, "bench");
    return { server, key };
  } finally {
    await local.close();
  }
}

/** The median latency of one store round trip (a GetItem, as the server's client sends it). */
async function storeRoundTripMs(dataDir: string, storeUrl: string): Promise<number> {
  const local = await openLocalStore(dataDir, storeUrl);
  try {
    const times: number[] = [];
    for (let i = 0; i < 500; i++) {
      const started = performance.now();
      await local.db.send(
        new GetItemCommand({ TableName: local.tables.credits, Key: { projectId: { S: "bench-on" } } }),
      );
      if (i >= 50) times.push(performance.now() - started);
    }
    return median(times);
  } finally {
    await local.close();
  }
}

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const [storeDir, offDir, onDir] = ["store", "off", "on"].map((name) =>
    mkdtempSync(join(tmpdir(), `dmt-bench-${name}-`)),
  ) as [string, string, string];
  const servers: ServeProcess[] = [];
  const children: ChildProcess[] = [];
  const loads: LoadFigures[] = [];
  let storeMs = Number.NaN;
  try {
    const sim = await startChild("bench/proxy-simulator.ts");
    children.push(sim.child);
    const store = await startChild("bench/metering-store.ts", [storeDir]);
    children.push(store.child);
    process.env.DMT_UPSTREAM_OPENAI = `${sim.url}/openai`;
    process.env.OPENAI_API_KEY = VENDOR_KEY;
    process.env.DMT_DYNAMODB_ENDPOINT = store.url;
    const off = await startServer("off", offDir, store.url);
    const on = await startServer("on", onDir, store.url);
    servers.push(off.server, on.server);
    storeMs = await storeRoundTripMs(onDir, store.url);

    const path = "/openai/v1/chat/completions";
    const targets: Target[] = [
      {
        name: "metering off",
        url: `${off.server.url}${path}`,
        headers: { authorization: `Bearer ${off.key}` },
        requestIds: false,
      },
      {
        name: "metering on",
        url: `${on.server.url}${path}`,
        headers: { authorization: `Bearer ${on.key}` },
        requestIds: false,
      },
      {
        name: "metering on + X-Request-ID",
        url: `${on.server.url}${path}`,
        headers: { authorization: `Bearer ${on.key}` },
        requestIds: true,
      },
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
      for (const target of targets) {
        process.stdout.write(`round ${round}/${ROUNDS}: ${target.name}, isolated calls...\n`);
        loads.push(await isolated(target, round));
      }
      for (const connections of CONCURRENCY) {
        for (const target of targets) {
          process.stdout.write(`round ${round}/${ROUNDS}: ${target.name}, ${connections} connections...\n`);
          loads.push(await chatLoad(target, connections, SECONDS, round));
        }
      }
    }
  } finally {
    for (const server of servers) await server.stop("SIGINT");
    // The store's process writes its folder until it has exited: wait for that before removing it.
    const exited = children.map((child) =>
      child.exitCode === null ? new Promise((resolve) => child.once("exit", resolve)) : undefined,
    );
    for (const child of children) {
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
    }
    await Promise.all(exited);
    for (const dir of [storeDir, offDir, onDir]) rmSync(dir, { recursive: true, force: true });
  }

  const summary = [0, ...CONCURRENCY].flatMap((connections) =>
    [...new Set(loads.map((l) => l.target))].map((target) => {
      const runs = loads.filter((l) => l.target === target && l.connections === connections);
      return {
        target,
        connections,
        requestsPerSecond: median(runs.map((r) => r.requestsPerSecond)),
        p50Ms: median(runs.map((r) => r.p50Ms)),
        p99Ms: median(runs.map((r) => r.p99Ms)),
        failures: runs.reduce((sum, r) => sum + r.failures, 0),
      };
    }),
  );
  const baseline = (connections: number) =>
    summary.find((s) => s.target === "metering off" && s.connections === connections);
  const rows = summary.map((s) => {
    const base = baseline(s.connections);
    return [
      s.target,
      s.connections === 0 ? "isolated" : String(s.connections),
      s.requestsPerSecond,
      s.p50Ms,
      s.p99Ms,
      s.p50Ms - (base?.p50Ms ?? Number.NaN),
      s.requestsPerSecond / (base?.requestsPerSecond ?? Number.NaN),
      s.failures,
    ];
  });
  const added = (target: string, connections: number) => {
    const row = summary.find((s) => s.target === target && s.connections === connections);
    return (row?.p50Ms ?? Number.NaN) - (baseline(connections)?.p50Ms ?? Number.NaN);
  };
  const targets = {
    storeRoundTripP50Ms: storeMs,
    addedP50IsolatedMs: added("metering on", 0),
    addedP50IsolatedWithRequestIdMs: added("metering on + X-Request-ID", 0),
    addedP50AtC1Ms: added("metering on", 1),
    addedP50AtC1Under1Ms: added("metering on", 1) < 1,
    addedP50AtC1WithRequestIdMs: added("metering on + X-Request-ID", 1),
  };

  process.stdout.write(
    [
      "",
      `Non-streaming chat completion through dmt, loopback; medians of ${ROUNDS} rounds ` +
        `(isolated: ${ISOLATED_CALLS} calls one at a time, ${PAUSE_MS} ms apart; then ${SECONDS} s back to back):`,
      formatTable(
        ["target", "conns", "req/s", "p50 ms", "p99 ms", "added p50", "req/s vs off", "failures"],
        rows,
      ),
      "",
      `full metering adds ${targets.addedP50AtC1Ms.toFixed(3)} ms at p50, c=1 back to back (target < 1 ms), ` +
        `${targets.addedP50IsolatedMs.toFixed(3)} ms to an isolated call ` +
        `(with X-Request-ID: ${targets.addedP50AtC1WithRequestIdMs.toFixed(3)} / ` +
        `${targets.addedP50IsolatedWithRequestIdMs.toFixed(3)} ms); ` +
        `one store round trip (GetItem, p50) takes ${storeMs.toFixed(3)} ms here`,
      "",
    ].join("\n"),
  );
  const resultsDir = join(ROOT, "bench/results");
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(
    join(resultsDir, "metering.json"),
    `${JSON.stringify({ machine, seconds: SECONDS, rounds: ROUNDS, summary, loads, targets }, null, 2)}\n`,
  );
  if (loads.some((l) => l.failures > 0)) process.exitCode = 1;
}

await main();
