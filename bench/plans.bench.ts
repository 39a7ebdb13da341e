/**
 * What the price-plan lookup adds to a metered call: metering's hooks (admit, before, after) over the
 * in-memory store ports, a managed chat call each, for a project on the default plan (no plan store:
 * the deployment's markup), on a stored plan with vendor and model rules looked up through the warm
 * cache (as in production), and through a cache that keeps nothing (every call reads the store: what
 * the cache saves). Side by side in one run, taking turns over BENCH_ROUNDS rounds; medians. Also the
 * warm lookup alone (`CachedPlans.applied`), and the plan-store reads per call.
 * Run: `npx tsx bench/plans.bench.ts` (BENCH_CALLS, BENCH_ROUNDS tune it). Never part of the tests.
 * Prints a table and writes bench/results/plans.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { activePriceCatalogue } from "../lambda/adapters/fs/price-catalogue";
import { MemoryCredits } from "../lambda/adapters/memory/credits";
import { MemoryIdempotency } from "../lambda/adapters/memory/idempotency";
import { MemoryMasterKey } from "../lambda/adapters/memory/key-wrapper";
import { MemoryPlans } from "../lambda/adapters/memory/plans";
import { MemoryRateLimiter } from "../lambda/adapters/memory/rate-limit";
import { MemoryVendorKeys } from "../lambda/adapters/memory/vendor-keys";
import { silentLogger } from "../lambda/core/logger";
import { CachedVendorKeys } from "../lambda/core/metering-vendor-keys";
import { CachedPlans } from "../lambda/core/plan-cache";
import { createPlan, setProjectPlan } from "../lambda/core/plans";
import { createMetering } from "../lambda/metering/hooks";
import { chatCall, outcomeOf, runCall } from "../test/support/proxy-calls";
import { median } from "./lib/stats";
import { formatTable } from "./lib/table";

const CALLS = Number(process.env.BENCH_CALLS ?? 20_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const LOOKUPS = 1_000_000;
const ROOT = new URL("..", import.meta.url).pathname;
const prices = activePriceCatalogue({ DMT_PRICE_MARKUP: "1.1" });
const USAGE = { inputTokens: 10, outputTokens: 30 };
const MODELS = prices.list().map((row) => row.model);

type Target = { name: string; run(calls: number): Promise<void>; reads(): number };

async function target(name: string, plan: "none" | "cached" | "uncached"): Promise<Target> {
  const clock = Date.now;
  const credits = new MemoryCredits(clock);
  await credits.grant("bench", 1_000_000_000_000, "bench");
  const store = new MemoryPlans();
  let reads = 0;
  const counted = {
    getPlan(id: string) {
      reads++;
      return store.getPlan(id);
    },
    getProjectPlan(id: string) {
      reads++;
      return store.getProjectPlan(id);
    },
  };
  if (plan !== "none") {
    const rules = {
      percent: "20",
      vendors: { openai: "15" },
      models: { "gpt-4o*": "10", "gpt-4.1*": "12", "o3*": "8" },
    };
    await createPlan(store, "bench-plan", rules, MODELS, Date.now());
    await setProjectPlan(store, "bench", "bench-plan", undefined, Date.now());
  }
  const metering = createMetering({
    credits,
    limiter: new MemoryRateLimiter(clock),
    idempotency: new MemoryIdempotency(clock),
    vendorKeys: new CachedVendorKeys(new MemoryVendorKeys(new MemoryMasterKey(), clock), 60_000),
    prices,
    ...(plan === "none"
      ? {}
      : { plans: new CachedPlans(counted, prices.markup, plan === "cached" ? 60_000 : 0) }),
    logger: silentLogger,
    clock,
    holdTtlMs: 15 * 60_000,
    noteChargesMs: 1000,
  });
  return {
    name,
    reads: () => reads,
    async run(calls) {
      for (let i = 0; i < calls; i++) {
        const call = chatCall({
          projectId: "bench",
          startedAt: Date.now(),
          maxTokens: 64,
          auth: { rateLimit: { rpm: 1_000_000_000, burst: 1_000_000_000 } },
        });
        const { refused } = await runCall(metering, call, outcomeOf(USAGE));
        if (refused) throw new Error(`refused: ${refused.message}`);
      }
    },
  };
}

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const targets = [
    await target("default plan (no plan store)", "none"),
    await target("stored plan, warm cache", "cached"),
    await target("stored plan, no cache (store read per call)", "uncached"),
  ];
  for (const t of targets) await t.run(2_000); // warm-up: JIT, leases, caches
  const samples = new Map<string, { usPerCall: number[]; cpuUsPerCall: number[] }>();
  for (let round = 0; round < ROUNDS; round++) {
    // Each round starts with another target, so drift in the machine's load hits all alike.
    const order = targets.map((_, i) => targets[(i + round) % targets.length] as Target);
    for (const t of order) {
      const cpu = process.cpuUsage();
      const start = process.hrtime.bigint();
      await t.run(CALLS);
      const wall = Number(process.hrtime.bigint() - start) / 1000;
      const used = process.cpuUsage(cpu);
      const s = samples.get(t.name) ?? { usPerCall: [], cpuUsPerCall: [] };
      s.usPerCall.push(wall / CALLS);
      s.cpuUsPerCall.push((used.user + used.system) / CALLS);
      samples.set(t.name, s);
    }
  }
  const readsBefore = targets.map((t) => t.reads());
  for (const t of targets) await t.run(1000);
  const readsPerCall = targets.map((t, i) => (t.reads() - (readsBefore[i] ?? 0)) / 1000);

  // The warm lookup alone, as metering calls it.
  const lookupStore = new MemoryPlans();
  await createPlan(
    lookupStore,
    "bench-plan",
    { percent: "20", models: { "gpt-4o*": "10" } },
    MODELS,
    Date.now(),
  );
  await setProjectPlan(lookupStore, "bench", "bench-plan", undefined, Date.now());
  const lookup = new CachedPlans(lookupStore, prices.markup, 60_000);
  const lookupNs: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < LOOKUPS; i++) await lookup.applied("bench", "openai", ["gpt-4o-mini"], Date.now());
    lookupNs.push(Number(process.hrtime.bigint() - start) / LOOKUPS);
  }

  const base = samples.get(targets[0]?.name ?? "") as { usPerCall: number[]; cpuUsPerCall: number[] };
  const baseUs = median(base.usPerCall);
  // CPU time is the steadier figure on a shared machine: wall time includes waiting for a core.
  const baseCpuUs = median(base.cpuUsPerCall);
  const summary = targets.map((t, i) => {
    const s = samples.get(t.name) as { usPerCall: number[]; cpuUsPerCall: number[] };
    const us = median(s.usPerCall);
    return {
      target: t.name,
      usPerCall: us,
      cpuUsPerCall: median(s.cpuUsPerCall),
      addedUsPerCall: us - baseUs,
      ratioToDefault: us / baseUs,
      addedCpuUsPerCall: median(s.cpuUsPerCall) - baseCpuUs,
      cpuRatioToDefault: median(s.cpuUsPerCall) / baseCpuUs,
      planStoreReadsPerCall: readsPerCall[i] ?? 0,
    };
  });
  const finalLoad = loadavg();
  process.stdout.write(
    [
      "",
      `Metering hooks per managed call (admit + before + after, in-memory stores), ${CALLS} calls a run; ` +
        `medians of ${ROUNDS} rounds (load average at start ${machine.loadavg.map((l) => l.toFixed(1)).join(" ")}, ` +
        `at end ${finalLoad.map((l) => l.toFixed(1)).join(" ")}):`,
      formatTable(
        ["target", "µs/call", "× default", "CPU µs/call", "added CPU µs", "CPU × default", "plan reads/call"],
        summary.map((s) => [
          s.target,
          s.usPerCall.toFixed(2),
          s.ratioToDefault.toFixed(3),
          s.cpuUsPerCall.toFixed(2),
          s.addedCpuUsPerCall.toFixed(2),
          s.cpuRatioToDefault.toFixed(3),
          s.planStoreReadsPerCall.toFixed(3),
        ]),
      ),
      `Warm lookup alone (CachedPlans.applied, awaited): ${median(lookupNs).toFixed(0)} ns per call.`,
      "",
    ].join("\n"),
  );
  const resultsDir = join(ROOT, "bench/results");
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(
    join(resultsDir, "plans.json"),
    `${JSON.stringify({ machine, finalLoad, calls: CALLS, rounds: ROUNDS, summary, lookupNs: median(lookupNs), samples: Object.fromEntries(samples) }, null, 2)}\n`,
  );
}

await main();
