/**
 * The Stripe path of billing exports: how many meter events a second one consumer batch sends, and
 * the lag from a call's end to its meter event at Stripe. Run: `npx tsx bench/billing-meter.bench.ts`
 * (see bench/README.md). Never part of the tests.
 *
 * 1. Batch: BATCH records (one warehouse consumer batch) handed to the consumer's listener over
 *    dynalite, then the meter queue delivered once: the sender's events per second to the local Stripe
 *    stand-in through the official SDK (16 in flight), and the same for an OpenMeter-compatible receiver
 *    (CloudEvents batches of 100).
 * 2. Lag: CALLS managed calls through the local stack (in this process), one every 250 ms; for each,
 *    from the end of its response to the stand-in taking its meter event: the warehouse's flush
 *    (DMT_WAREHOUSE_FLUSH_MS, 2 s by default) plus the meter queue's tick (1 s) plus the send.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { DynamoMeterStore } from "../lambda/adapters/dynamodb/billing-meter";
import { createDynamoClient, ensureTables } from "../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { FolderDeadLetters } from "../lambda/adapters/in-process/dead-letters";
import { InProcessQueue } from "../lambda/adapters/in-process/queue";
import { MemoryObjectStore } from "../lambda/adapters/memory/object-store";
import { stripeMeterSender } from "../lambda/adapters/stripe/meter-sender";
import { openMeterSender } from "../lambda/adapters/undici/openmeter-sender";
import { createMeterSender, meterOutbox } from "../lambda/billing/meter";
import type { MeterSender, MeterTarget } from "../lambda/core/billing-meter";
import { parseUsd } from "../lambda/core/credits";
import { silentLogger } from "../lambda/core/logger";
import { buildRecord, type InteractionRecord } from "../lambda/core/record";
import { startEmbeddedDynamo } from "../lambda/local/embedded-dynamo";
import { startTestHost } from "../test/support/host";
import { startOpenMeterReceiver } from "../test/support/openmeter-receiver";
import { startStripe } from "../test/support/stripe";
import { meterEventArrivals, meterEventRoutes } from "../test/support/stripe/meter-events";
import { percentile } from "./lib/stats";
import { formatTable } from "./lib/table";

const BATCH = Number(process.env.BENCH_METER_BATCH ?? 1000);
const CALLS = Number(process.env.BENCH_METER_CALLS ?? 20);
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

function records(projectId: string, n: number): InteractionRecord[] {
  const now = Date.now();
  return Array.from({ length: n }, (_, i) =>
    buildRecord({
      store: "metadata",
      transactionId: `tx_bench_${projectId}_${i}`,
      projectId,
      keyId: "abcdefghijklmnop",
      vendor: "openai",
      endpoint: "/v1/chat/completions",
      model: "gpt-4o-mini",
      billingMode: "managed",
      statusCode: 200,
      streamed: false,
      startedAt: now - 10_000 + i,
      latencyMs: 800,
      userIdHeader: `user-${i % 50}`,
      usage: {
        inputTokens: 100,
        outputTokens: 50,
        cachedInputTokens: 0,
        cacheWriteTokens: 0,
        reasoningTokens: 0,
        estimated: false,
        complete: true,
      },
      costMicros: 45,
      request: { bytes: 2, text: "{}", truncated: false },
      response: { bytes: 2, text: "{}", truncated: false },
    }),
  );
}

interface BatchRow {
  target: MeterTarget;
  events: number;
  seconds: number;
  eventsPerSecond: number;
  failed: number;
}

async function batchRun(): Promise<BatchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), "dmt-bench-meter-"));
  const dynamo = await startEmbeddedDynamo(dir);
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  const stripe = await startStripe({ modules: [meterEventRoutes] });
  const openMeter = await startOpenMeterReceiver();
  const rows: BatchRow[] = [];
  try {
    const tables = tableNames({}, "bench-meter-");
    await ensureTables(db, tables);
    const store = new DynamoMeterStore(db, tables);
    const customer = (await stripe.client().customers.create({ name: "bench" })).id;
    const senders: Record<MeterTarget, MeterSender> = {
      stripe: stripeMeterSender({ secretKey: stripe.secretKey, apiUrl: stripe.url }),
      openmeter: openMeterSender({ url: openMeter.url, token: openMeter.token, source: "//bench" }),
    };
    for (const target of ["stripe", "openmeter"] as const) {
      const projectId = `bench-${target}`;
      await store.connect({
        projectId,
        target,
        meter: "dmt_usage",
        value: "cost",
        perUser: false,
        customer,
        createdAt: Date.now(),
      });
      const queue = new InProcessQueue({
        handler: createMeterSender({ store, senders, logger: silentLogger }),
        deadLetters: new FolderDeadLetters(new MemoryObjectStore()),
        logger: silentLogger,
        flushIntervalMs: 60_000,
        batchSize: 10,
        visibilityTimeoutMs: 30_000,
        maxReceives: 5,
      });
      const outbox = meterOutbox({
        store,
        queue: { send: async (bodies) => void (await Promise.all(bodies.map((b) => queue.enqueue(b)))) },
        logger: silentLogger,
      });
      const batch = records(projectId, BATCH);
      const started = performance.now();
      await outbox(batch);
      while (queue.depth > 0) await queue.deliver();
      const seconds = (performance.now() - started) / 1000;
      const counts = await store.counts(projectId, target);
      rows.push({
        target,
        events: counts.sent,
        seconds,
        eventsPerSecond: counts.sent / seconds,
        failed: counts.failed,
      });
    }
  } finally {
    await stripe.close();
    await openMeter.close();
    db.destroy();
    await dynamo.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

async function lagRun(): Promise<{ lags: number[]; flushMs: number }> {
  const stripe = await startStripe({ modules: [meterEventRoutes] });
  const flushMs = 2000;
  const stack = await startTestHost({
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: String(flushMs),
    DMT_STRIPE_SECRET_KEY: stripe.secretKey,
    DMT_STRIPE_API_URL: stripe.url,
  });
  const lags: number[] = [];
  try {
    const { key, projectId } = await stack.newKey({ tier: "enterprise" });
    await new DynamoCredits(stack.db, tableNames(process.env)).grant(projectId, parseUsd("100"), "bench");
    const customer = (await stripe.client().customers.create({ name: "bench" })).id;
    const { DynamoMeterStore: Store } = await import("../lambda/adapters/dynamodb/billing-meter");
    await new Store(stack.db, tableNames(process.env)).connect({
      projectId,
      target: "stripe",
      meter: "dmt_usage",
      value: "cost",
      perUser: false,
      customer,
      createdAt: Date.now(),
    });
    const ended = new Map<string, number>();
    for (let i = 0; i < CALLS; i++) {
      const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
      });
      await res.arrayBuffer();
      const id = res.headers.get("x-dmt-transaction-id");
      if (res.status !== 200 || !id) throw new Error(`call answered ${res.status}`);
      ended.set(id, Date.now());
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const arrivals = meterEventArrivals(stripe);
    const deadline = Date.now() + 60_000;
    while ([...ended.keys()].some((id) => !arrivals.has(id)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    for (const [id, at] of ended) {
      const arrived = arrivals.get(id);
      if (arrived !== undefined) lags.push(arrived - at);
    }
  } finally {
    await stack.stop();
    await stripe.close();
  }
  return { lags: lags.sort((a, b) => a - b), flushMs };
}

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const batch = await batchRun();
  const { lags, flushMs } = await lagRun();
  const lag = {
    calls: CALLS,
    received: lags.length,
    p50Ms: percentile(lags, 0.5),
    p95Ms: percentile(lags, 0.95),
    maxMs: lags.at(-1) ?? Number.NaN,
  };
  process.stdout.write(
    [
      `One consumer batch of ${BATCH} records to the local stand-ins (this process; dynalite for the status store)`,
      formatTable(
        ["target", "events sent", "seconds", "events/s", "failed"],
        batch.map((r) => [r.target, r.events, r.seconds, r.eventsPerSecond, r.failed]),
      ),
      "",
      `Lag from a call's end to its Stripe meter event, ${CALLS} calls through the local stack (warehouse flush ${flushMs} ms, meter tick 1000 ms)`,
      formatTable(
        ["calls", "received", "p50 ms", "p95 ms", "max ms"],
        [[lag.calls, lag.received, lag.p50Ms, lag.p95Ms, lag.maxMs]],
      ),
      `load average at start: ${machine.loadavg.map((l) => l.toFixed(2)).join(" ")}`,
      "",
    ].join("\n"),
  );
  const out = join(import.meta.dirname, "results");
  mkdirSync(out, { recursive: true });
  writeFileSync(
    join(out, "billing-meter.json"),
    `${JSON.stringify({ at: new Date().toISOString(), machine, batchSize: BATCH, batch, lag }, null, 2)}\n`,
  );
}

await main();
