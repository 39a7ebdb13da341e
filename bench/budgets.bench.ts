/**
 * What budgets cost: a managed chat call through the local stack (dynalite, the vendor simulator, full
 * metering) under three budgets (project per month, key per day, end user per month) against the same
 * call under none, side by side in the same run, at c=1 and c=50; and the store writes per call, counted
 * on the store client (each one is a DynamoDB write in AWS), settlements included.
 * Run: `npx tsx bench/budgets.bench.ts` (BENCH_CALLS, BENCH_ROUNDS tune it). Never part of the tests.
 *
 * The targets take turns, BENCH_ROUNDS times, and each figure is the median over the rounds, so a load
 * spike on a shared machine hits both alike. Prints a table and writes bench/results/budgets.json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Pool } from "undici";
import { DynamoBudgets } from "../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { createKey, createProject } from "../lambda/core/accounts";
import { setBudget } from "../lambda/core/budgets";
import { silentLogger } from "../lambda/core/logger";
import { parseLocalConfig } from "../lambda/local/config";
import { startEmbeddedHost } from "../lambda/local/host";
import { median, percentile } from "./lib/stats";
import { formatTable } from "./lib/table";

const CALLS = Number(process.env.BENCH_CALLS ?? 400);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = [1, 50];
const ROOT = new URL("..", import.meta.url).pathname;
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const CHAT = JSON.stringify({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Write one short sentence about benchmarks." }],
  max_tokens: 32,
});
const WRITES = new Set(["PutItemCommand", "UpdateItemCommand", "DeleteItemCommand"]);

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const dir = mkdtempSync(join(tmpdir(), "dmt-bench-budgets-"));
  const stack = await startEmbeddedHost(
    parseLocalConfig({
      PORT: "0",
      DMT_DATA_DIR: dir,
      DMT_METERING: "on",
      DMT_LOG_LEVEL: "error",
      DMT_ACCESS_LOG: "off",
    }),
    silentLogger,
  );
  // Every command the server's store client sends, by table: the writes per call.
  const writes = new Map<string, number>();
  stack.db.middlewareStack.add(
    (next, context) => async (args) => {
      const table = (args.input as { TableName?: string }).TableName ?? "?";
      if (WRITES.has(context.commandName ?? "")) writes.set(table, (writes.get(table) ?? 0) + 1);
      return next(args);
    },
    { step: "initialize", name: "countWrites" },
  );
  const tables = tableNames(process.env);
  const credits = new DynamoCredits(stack.db, tables);
  const budgets = new DynamoBudgets(stack.db, tables);
  const targets: { name: string; key: string; headers: Record<string, string> }[] = [];
  try {
    for (const name of ["no budgets", "three budgets"]) {
      const projectId = name === "no budgets" ? "bench-plain" : "bench-budgets";
      await createProject(stack.store, projectId, "enterprise", Date.now());
      const { key, record } = await createKey(
        stack.store,
        { projectId, name: "bench", rateLimit: { rpm: 1_000_000, burst: 1_000_000 } },
        Date.now(),
      );
      await credits.grant(projectId, 1_000_000 * 1_000_000, "bench");
      if (name === "three budgets") {
        const now = Date.now();
        await setBudget(stack.store, budgets, { projectId, usd: "100000", window: "month" }, now);
        await setBudget(
          stack.store,
          budgets,
          { projectId, keyId: record.keyId, usd: "50000", window: "day" },
          now,
        );
        await setBudget(
          stack.store,
          budgets,
          { projectId, userId: "bench-user", usd: "50000", window: "month" },
          now,
        );
      }
      targets.push({ name, key, headers: { "x-user-id": "bench-user" } });
    }

    const url = new URL(stack.url);
    const pool = new Pool(url.origin, { connections: 64 });
    const call = async (target: (typeof targets)[number]) => {
      const started = performance.now();
      const response = await pool.request({
        method: "POST",
        path: "/openai/v1/chat/completions",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${target.key}`,
          ...target.headers,
        },
        body: CHAT,
      });
      await response.body.text();
      if (response.statusCode !== 200) throw new Error(`${target.name} answered ${response.statusCode}`);
      return performance.now() - started;
    };
    /** CALLS calls over `connections` workers; latencies of each, and the writes they caused. */
    const run = async (target: (typeof targets)[number], connections: number) => {
      await stack.drain();
      writes.clear();
      const times: number[] = [];
      let left = CALLS;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: connections }, async () => {
          while (left-- > 0) times.push(await call(target));
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      // Settlements of the leases are the calls' writes too.
      await stack.drain();
      const all = [...writes.values()].reduce((sum, n) => sum + n, 0);
      times.sort((a, b) => a - b);
      return {
        target: target.name,
        connections,
        p50Ms: percentile(times, 0.5),
        p99Ms: percentile(times, 0.99),
        requestsPerSecond: CALLS / seconds,
        writesPerCall: all / CALLS,
        budgetWritesPerCall: (writes.get(tables.budgetCounters) ?? 0) / CALLS,
      };
    };
    for (const target of targets) {
      process.stdout.write(`${target.name}: warm-up...\n`);
      for (let i = 0; i < 50; i++) await call(target);
    }
    const runs: Awaited<ReturnType<typeof run>>[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      for (const connections of CONCURRENCY) {
        for (const target of targets) {
          process.stdout.write(`round ${round}/${ROUNDS}: ${target.name}, c=${connections}...\n`);
          runs.push(await run(target, connections));
        }
      }
    }
    await pool.close();

    const summary = CONCURRENCY.flatMap((connections) =>
      targets.map(({ name }) => {
        const mine = runs.filter((r) => r.target === name && r.connections === connections);
        return {
          target: name,
          connections,
          p50Ms: median(mine.map((r) => r.p50Ms)),
          p99Ms: median(mine.map((r) => r.p99Ms)),
          requestsPerSecond: median(mine.map((r) => r.requestsPerSecond)),
          writesPerCall: median(mine.map((r) => r.writesPerCall)),
          budgetWritesPerCall: median(mine.map((r) => r.budgetWritesPerCall)),
        };
      }),
    );
    const base = (c: number) => summary.find((s) => s.target === "no budgets" && s.connections === c);
    const rows = summary.map((s) => [
      s.target,
      String(s.connections),
      s.requestsPerSecond,
      s.p50Ms,
      s.p99Ms,
      s.p50Ms - (base(s.connections)?.p50Ms ?? Number.NaN),
      s.requestsPerSecond / (base(s.connections)?.requestsPerSecond ?? Number.NaN),
      s.writesPerCall,
      s.budgetWritesPerCall,
    ]);
    const finalLoad = loadavg();
    process.stdout.write(
      [
        "",
        `Managed chat completion through the local stack, ${CALLS} calls a run; medians of ${ROUNDS} rounds ` +
          `(load average at start ${machine.loadavg.map((l) => l.toFixed(1)).join(" ")}, at end ` +
          `${finalLoad.map((l) => l.toFixed(1)).join(" ")}):`,
        formatTable(
          [
            "target",
            "conns",
            "req/s",
            "p50 ms",
            "p99 ms",
            "added p50",
            "req/s vs none",
            "writes/call",
            "budget writes/call",
          ],
          rows,
        ),
        "",
      ].join("\n"),
    );
    const resultsDir = join(ROOT, "bench/results");
    mkdirSync(resultsDir, { recursive: true });
    writeFileSync(
      join(resultsDir, "budgets.json"),
      `${JSON.stringify({ machine, finalLoad, calls: CALLS, rounds: ROUNDS, summary, runs }, null, 2)}\n`,
    );
  } finally {
    await stack.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
