/**
 * Throughput and latency of `GET /api/v1/status` on the local stack, plus the CPU cost of a cached
 * authentication. Run: `npx tsx bench/status.bench.ts` (see bench/README.md). Never part of the tests.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createKey, createProject } from "../lambda/core/accounts";
import { openLocalStore } from "../lambda/local/store";
import { startDmtServe } from "../test/support/cli";
import { type AuthCost, measureCachedAuth } from "./lib/auth-cost";
import { type LoadResult, runLoad } from "./lib/load";
import { formatTable } from "./lib/table";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 2);
const CONCURRENCY = [1, 50];
// The AWS SDK warns on Node 20, which the local stack supports (as bin/dmt.mjs does for the server).
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

async function main(): Promise<void> {
  // The machine is shared: the load average at the start says how much to trust the figures.
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-bench-"));
  // The server runs in a child process so that the load generator does not share its event loop.
  const server = await startDmtServe(dataDir);
  const http: LoadResult[] = [];
  let auth: AuthCost;
  try {
    // The server owns the store; this process reaches it through the endpoint it published.
    const local = await openLocalStore(dataDir);
    let key: string;
    try {
      await createProject(local.store, "bench", "enterprise", Date.now());
      // A limit out of the way: the bench measures the endpoint, with the rate limit's own work included.
      ({ key } = await createKey(
        local.store,
        { projectId: "bench", name: "bench", rateLimit: { rpm: 1_000_000, burst: 1_000_000 } },
        Date.now(),
      ));
      auth = await measureCachedAuth(local.store, key);
    } finally {
      await local.close();
    }

    const url = `${server.url}/api/v1/status`;
    const headers = { authorization: `Bearer ${key}` };
    const check = await fetch(url, { headers });
    if (check.status !== 200) throw new Error(`status answered ${check.status}: ${await check.text()}`);
    await runLoad(url, 10, WARMUP_SECONDS, headers);
    for (const connections of CONCURRENCY) http.push(await runLoad(url, connections, SECONDS, headers));
  } finally {
    await server.stop("SIGINT");
    rmSync(dataDir, { recursive: true, force: true });
  }

  const failures = http.reduce((n, r) => n + r.errors + r.non2xx, 0);
  process.stdout.write(
    [
      `GET /api/v1/status on ${server.url} (child process), ${SECONDS} s per row after ${WARMUP_SECONDS} s warm-up`,
      formatTable(
        ["connections", "req/s", "p50 ms", "p99 ms", "mean ms", "requests", "errors+non-2xx"],
        http.map((r) => [
          r.connections,
          r.requestsPerSecond,
          r.p50Ms,
          r.p99Ms,
          r.meanMs,
          r.requests,
          r.errors + r.non2xx,
        ]),
      ),
      "",
      "authenticate() with a warm CachedKeyLookup (credentials, key parse, lookup, hash compare, endpoint check)",
      formatTable(
        ["ops/s", "CPU µs/op", "wall µs/op", "iterations"],
        [[auth.opsPerSecond, auth.cpuMicrosPerOp, auth.wallMicrosPerOp, auth.iterations]],
      ),
      "",
    ].join("\n"),
  );

  const resultsDir = join(import.meta.dirname, "results");
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, "status.json");
  const report = {
    date: new Date().toISOString(),
    machine,
    seconds: SECONDS,
    warmupSeconds: WARMUP_SECONDS,
    http,
    auth,
  };
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`Wrote ${file}\n`);
  if (failures > 0) {
    process.stderr.write(`${failures} requests failed or were not 2xx\n`);
    process.exitCode = 1;
  }
}

await main();
