/**
 * The proxy's added latency and throughput, side by side with a bare node:http pass-through and with
 * Portkey's gateway, all in front of the same vendor simulator on loopback.
 * Run: `npx tsx bench/proxy.bench.ts` (BENCH_SECONDS, BENCH_WARMUP_SECONDS, BENCH_STREAMS tune it).
 * Never part of the tests.
 *
 * Every server runs in a child process of its own (simulator, pass-through, `dmt serve`, Portkey);
 * this process only generates load (autocannon) and times streams (undici). Portkey is installed on
 * first run into bench/portkey (its own package.json pins @hono/node-server 1.14.1, which it needs to
 * stream on Node 20). Prints a table and writes bench/results/proxy.json.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { Pool } from "undici";
import { createKey, createProject } from "../lambda/core/accounts";
import { openLocalStore } from "../lambda/local/store";
import { startDmtServe } from "../test/support/cli";
import { formatTable } from "./lib/table";

declare module "autocannon" {
  interface Options {
    method?: string;
    body?: string;
  }
}

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 200);
const CONCURRENCY = [1, 50];
const VENDOR_KEY = "sk-bench-vendor-key";
const ROOT = new URL("..", import.meta.url).pathname;
const PORTKEY_DIR = join(ROOT, "bench/portkey");
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
// The relay alone, as the other targets are; bench/metering.bench.ts measures what metering adds (and
// with metering on, this bench's project, which has no credits, would get 402s).
process.env.DMT_METERING ??= "off";

const CHAT = JSON.stringify({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Write one short sentence about benchmarks." }],
  max_tokens: 32,
});
const STREAM_CHAT = JSON.stringify({ ...JSON.parse(CHAT), stream: true });

interface Target {
  name: string;
  /** URL of the chat completions endpoint. */
  url: string;
  headers: Record<string, string>;
}

interface LoadFigures {
  target: string;
  connections: number;
  requests: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
}

interface StreamFigures {
  target: string;
  streams: number;
  ttfbP50Ms: number;
  ttfbP99Ms: number;
}

/** Starts a child that prints `{"url": ...}` on its first line. */
function startChild(command: string, args: string[]): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(command, args, { cwd: ROOT, stdio: ["ignore", "pipe", "inherit"] });
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

function freePort(): Promise<number> {
  const server = createServer();
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    }),
  );
}

/** Portkey's gateway on `port`, installed into bench/portkey on first use. */
async function startPortkey(port: number): Promise<ChildProcess> {
  const entry = join(PORTKEY_DIR, "node_modules/@portkey-ai/gateway/build/start-server.js");
  if (!existsSync(entry)) {
    process.stdout.write("Installing @portkey-ai/gateway into bench/portkey (first run)...\n");
    execFileSync("npm", ["install", "--prefix", PORTKEY_DIR, "--no-audit", "--no-fund"], {
      stdio: "inherit",
    });
  }
  const child = spawn(process.execPath, [entry, `--port=${port}`, "--headless"], {
    cwd: PORTKEY_DIR,
    stdio: ["ignore", "ignore", "inherit"],
  });
  // Ready once it answers its root path.
  for (let attempt = 0; attempt < 100; attempt++) {
    const ok = await fetch(`http://127.0.0.1:${port}/`).then(
      (res) => res.ok,
      () => false,
    );
    if (ok) return child;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill("SIGTERM");
  throw new Error("Portkey's gateway did not start");
}

function percentile(sorted: Float64Array, q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
}

/** autocannon on one target; latencies from every response at hrtime resolution. */
function load(target: Target, connections: number, seconds: number): Promise<LoadFigures> {
  const latencies: number[] = [];
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: target.url,
        connections,
        duration: seconds,
        method: "POST",
        body: CHAT,
        headers: { "content-type": "application/json", ...target.headers },
      },
      (err, result) => {
        if (err) return reject(err);
        const sorted = Float64Array.from(latencies).sort();
        resolve({
          target: target.name,
          connections,
          requests: result["2xx"],
          requestsPerSecond: result["2xx"] / result.duration,
          p50Ms: percentile(sorted, 0.5),
          p99Ms: percentile(sorted, 0.99),
          errors: result.errors + result.timeouts,
          non2xx: result.non2xx,
        });
      },
    );
    instance.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) latencies.push(ms);
    });
  });
}

/** Time to the first body byte of a streamed chat completion, `count` streams one after another. */
async function streamTtfb(target: Target, count: number): Promise<StreamFigures> {
  const url = new URL(target.url);
  const pool = new Pool(url.origin);
  const times: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      const response = await pool.request({
        method: "POST",
        path: url.pathname,
        headers: { "content-type": "application/json", ...target.headers },
        body: STREAM_CHAT,
      });
      let first = true;
      for await (const _chunk of response.body) {
        if (first) {
          times.push(performance.now() - started);
          first = false;
        }
      }
      if (response.statusCode !== 200)
        throw new Error(`${target.name} stream answered ${response.statusCode}`);
    }
  } finally {
    await pool.close();
  }
  const sorted = Float64Array.from(times).sort();
  return {
    target: target.name,
    streams: count,
    ttfbP50Ms: percentile(sorted, 0.5),
    ttfbP99Ms: percentile(sorted, 0.99),
  };
}

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const children: ChildProcess[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-bench-proxy-"));
  const loads: LoadFigures[] = [];
  const streams: StreamFigures[] = [];
  let dmt: Awaited<ReturnType<typeof startDmtServe>> | undefined;
  try {
    const simulator = await startChild(process.execPath, ["--import", "tsx", "bench/proxy-simulator.ts"]);
    children.push(simulator.child);
    const vendorOrigin = `${simulator.url}/openai`;
    const bare = await startChild(process.execPath, ["bench/proxy-passthrough.mjs", simulator.url]);
    children.push(bare.child);
    const portkeyPort = await freePort();
    children.push(await startPortkey(portkeyPort));

    process.env.DMT_UPSTREAM_OPENAI = vendorOrigin;
    process.env.OPENAI_API_KEY = VENDOR_KEY;
    dmt = await startDmtServe(dataDir);
    const local = await openLocalStore(dataDir);
    let serviceKey: string;
    try {
      await createProject(local.store, "bench", "enterprise", Date.now());
      ({ key: serviceKey } = await createKey(local.store, { projectId: "bench", name: "bench" }, Date.now()));
    } finally {
      await local.close();
    }

    const vendorAuth = { authorization: `Bearer ${VENDOR_KEY}` };
    const targets: Target[] = [
      { name: "simulator (direct)", url: `${vendorOrigin}/v1/chat/completions`, headers: vendorAuth },
      { name: "node:http pass-through", url: `${bare.url}/openai/v1/chat/completions`, headers: vendorAuth },
      {
        name: "dmt",
        url: `${dmt.url}/openai/v1/chat/completions`,
        headers: { authorization: `Bearer ${serviceKey}` },
      },
      {
        name: "portkey gateway",
        url: `http://127.0.0.1:${portkeyPort}/v1/chat/completions`,
        headers: {
          ...vendorAuth,
          "x-portkey-provider": "openai",
          "x-portkey-custom-host": `${vendorOrigin}/v1`,
        },
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
    }

    for (const target of targets) {
      process.stdout.write(`${target.name}: warm-up, then ${CONCURRENCY.join(" and ")} connections...\n`);
      await load(target, 10, WARMUP_SECONDS);
      for (const connections of CONCURRENCY) loads.push(await load(target, connections, SECONDS));
      streams.push(await streamTtfb(target, STREAMS));
    }
  } finally {
    await dmt?.stop("SIGINT");
    for (const child of children) child.kill("SIGTERM");
    rmSync(dataDir, { recursive: true, force: true });
  }

  const direct = (connections: number) =>
    loads.find((l) => l.target === "simulator (direct)" && l.connections === connections);
  const rows = loads.map((l) => {
    const base = direct(l.connections);
    return [
      l.target,
      l.connections,
      l.requestsPerSecond,
      l.p50Ms,
      l.p99Ms,
      l.p50Ms - (base?.p50Ms ?? Number.NaN),
      l.p99Ms - (base?.p99Ms ?? Number.NaN),
      l.errors + l.non2xx,
    ];
  });
  const directStream = streams.find((s) => s.target === "simulator (direct)");
  const streamRows = streams.map((s) => [
    s.target,
    s.streams,
    s.ttfbP50Ms,
    s.ttfbP99Ms,
    s.ttfbP50Ms - (directStream?.ttfbP50Ms ?? Number.NaN),
  ]);
  const at50 = (name: string) =>
    loads.find((l) => l.target === name && l.connections === 50)?.requestsPerSecond;
  const dmtAdded = rows.find((r) => r[0] === "dmt" && r[1] === 1)?.[5] as number | undefined;
  const targets = {
    addedP50AtC1Ms: dmtAdded,
    addedP50AtC1Under1Ms: dmtAdded !== undefined && dmtAdded < 1,
    throughputRatioVsPortkeyAtC50: (at50("dmt") ?? Number.NaN) / (at50("portkey gateway") ?? Number.NaN),
  };

  process.stdout.write(
    [
      "",
      "Non-streaming chat completion (POST /v1/chat/completions), loopback:",
      formatTable(["target", "conns", "req/s", "p50 ms", "p99 ms", "added p50", "added p99", "errors"], rows),
      "",
      `Streamed chat completion, time to first body byte (${STREAMS} sequential streams):`,
      formatTable(["target", "streams", "ttfb p50 ms", "ttfb p99 ms", "added p50"], streamRows),
      "",
      `dmt added p50 at c=1: ${dmtAdded?.toFixed(3)} ms (target < 1 ms); ` +
        `dmt/portkey req/s at c=50: ${targets.throughputRatioVsPortkeyAtC50.toFixed(2)}x (target >= 3x)`,
      "",
    ].join("\n"),
  );
  const resultsDir = join(ROOT, "bench/results");
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(
    join(resultsDir, "proxy.json"),
    `${JSON.stringify({ machine, seconds: SECONDS, loads, streams, targets }, null, 2)}\n`,
  );
  if (loads.some((l) => l.errors + l.non2xx > 0)) process.exitCode = 1;
}

await main();
