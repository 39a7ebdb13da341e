import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DynamoDBClient, ScanCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoMeterStore } from "../../lambda/adapters/dynamodb/billing-meter";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { FolderDeadLetters } from "../../lambda/adapters/in-process/dead-letters";
import { InProcessQueue } from "../../lambda/adapters/in-process/queue";
import { MemoryObjectStore } from "../../lambda/adapters/memory/object-store";
import { stripeMeterSender } from "../../lambda/adapters/stripe/meter-sender";
import { openMeterSender } from "../../lambda/adapters/undici/openmeter-sender";
import { createMeterSender, meterOutbox, meterStatus, resendFailed } from "../../lambda/billing/meter";
import type { MeterConnection, MeterSender, MeterTarget } from "../../lambda/core/billing-meter";
import type { BillingMode } from "../../lambda/core/billing-mode";
import { jsonLogger } from "../../lambda/core/logger";
import { buildRecord, type InteractionRecord } from "../../lambda/core/record";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import {
  cloudEventViolation,
  type OpenMeterReceiver,
  startOpenMeterReceiver,
} from "../support/openmeter-receiver";
import { type StripeStandIn, startStripe } from "../support/stripe";
import { meterEventRoutes, meterEventsOf } from "../support/stripe/meter-events";

// The meter path over dynalite: the warehouse consumer's listener notes and queues each billable call,
// the in-process queue hands its messages to the sender, which reaches the Stripe stand-in through the
// official SDK and an OpenMeter-compatible receiver over HTTP.
const dir = mkdtempSync(join(tmpdir(), "dmt-meter-"));
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;
let stripe: StripeStandIn;
let openMeter: OpenMeterReceiver;
const DAY = 24 * 3600 * 1000;
const SOURCE = "//dmt.example.com/deployments/test";

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(dir);
  db = createDynamoClient({ endpoint: dynamo.endpoint });
  stripe = await startStripe({ modules: [meterEventRoutes] });
  openMeter = await startOpenMeterReceiver();
});
afterAll(async () => {
  await stripe.close();
  await openMeter.close();
  db.destroy();
  await dynamo.close();
  rmSync(dir, { recursive: true, force: true });
});

let sequence = 0;
function record(
  projectId: string,
  options: {
    userId?: string;
    cost?: number | null;
    mode?: BillingMode;
    startedAt?: number;
    tokens?: number;
  } = {},
): InteractionRecord {
  sequence++;
  const tokens = options.tokens ?? 15;
  return buildRecord({
    store: "metadata",
    transactionId: `tx_meter_${process.pid}_${sequence}`,
    projectId,
    keyId: "abcdefghijklmnop",
    vendor: "openai",
    endpoint: "/v1/chat/completions",
    model: "gpt-4o-mini",
    billingMode: options.mode ?? "managed",
    statusCode: 200,
    streamed: false,
    startedAt: options.startedAt ?? Date.now() - 5000,
    latencyMs: 1200,
    ...(options.userId !== undefined ? { userIdHeader: options.userId } : {}),
    usage: {
      inputTokens: tokens - 5,
      outputTokens: 5,
      cachedInputTokens: 2,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      estimated: false,
      complete: true,
    },
    ...(options.cost !== null ? { costMicros: options.cost ?? 1234 } : {}),
    request: { bytes: 2, text: "{}", truncated: false },
    response: { bytes: 2, text: "{}", truncated: false },
  });
}

let groups = 0;
/** A store of its own, the outbox and the sender over an in-process queue, and what was logged. */
async function rig(senders: Partial<Record<MeterTarget, MeterSender>>) {
  const tables = tableNames({}, `meter-${++groups}-`);
  await ensureTables(db, tables);
  const store = new DynamoMeterStore(db, tables);
  const lines: string[] = [];
  const logger = jsonLogger("debug", (line) => lines.push(line));
  let now = Date.now();
  const clock = () => now;
  const queue = new InProcessQueue({
    handler: createMeterSender({ store, senders, logger, clock }),
    deadLetters: new FolderDeadLetters(new MemoryObjectStore()),
    logger,
    flushIntervalMs: 60_000,
    batchSize: 10,
    visibilityTimeoutMs: 30_000,
    maxReceives: 5,
    clock,
  });
  const meterQueue = {
    send: async (bodies: string[]) => void (await Promise.all(bodies.map((b) => queue.enqueue(b)))),
  };
  const written = meterOutbox({ store, queue: meterQueue, logger, clock });
  return {
    store,
    lines,
    tables,
    /** Hands records to the listener as the consumer does, then delivers the queue. */
    async write(records: InteractionRecord[]) {
      await written(records);
      await queue.deliver();
    },
    /** Moves past the queue's visibility timeout and delivers what came back. */
    async later() {
      now += 31_000;
      await queue.deliver();
    },
    resend: async (projectId: string, target: MeterTarget) => {
      const out = await resendFailed({ store, queue: meterQueue }, projectId, target);
      await queue.deliver();
      return out;
    },
    depth: () => queue.depth,
  };
}

const stripeSender = (secretKey = stripe.secretKey) => stripeMeterSender({ secretKey, apiUrl: stripe.url });
const newCustomer = async () => (await stripe.client().customers.create({ name: "meter test" })).id;
const sentFor = (transactionId: string) =>
  meterEventsOf(stripe).filter((e) => e.identifier === transactionId);
const connection = (projectId: string, fields: Partial<MeterConnection>): MeterConnection => ({
  projectId,
  target: "stripe",
  meter: "dmt_usage",
  value: "cost",
  perUser: false,
  createdAt: Date.now(),
  ...fields,
});

describe("Stripe meter events", () => {
  it("sends each managed call's billed amount once, for the project's customer, with the transaction id", async () => {
    const r = await rig({ stripe: stripeSender() });
    const customer = await newCustomer();
    await r.store.connect(connection("meter-a", { customer }));
    const billed = record("meter-a", { cost: 4321 });
    const byok = record("meter-a", { mode: "byok" });
    const free = record("meter-a", { cost: 0 });
    const other = record("meter-unconnected");
    await r.write([billed, byok, free, other]);

    const [event] = sentFor(billed.transaction_id);
    expect(event).toMatchObject({
      event_name: "dmt_usage",
      payload: { stripe_customer_id: customer, value: "4321" },
      timestamp: Math.floor((billed.started_at + billed.latency_ms) / 1000),
    });
    for (const skipped of [byok, free, other]) expect(sentFor(skipped.transaction_id)).toEqual([]);
    const status = await meterStatus(r.store, "meter-a");
    expect(status.connections[0]?.counts).toEqual({ sent: 1, waiting: 0, failed: 0 });

    // The consumer retries a batch: the same records again bill nothing more.
    await r.write([billed]);
    expect(sentFor(billed.transaction_id)).toHaveLength(1);
    expect((await meterStatus(r.store, "meter-a")).connections[0]?.counts.sent).toBe(1);
  });

  it("counts tokens when the connection says so", async () => {
    const r = await rig({ stripe: stripeSender() });
    await r.store.connect(connection("meter-tokens", { customer: await newCustomer(), value: "tokens" }));
    const call = record("meter-tokens", { tokens: 42, cost: null });
    await r.write([call]);
    expect(sentFor(call.transaction_id)[0]?.payload.value).toBe("42");
  });

  it("takes an event Stripe already has as sent: an answer lost after Stripe took it bills once", async () => {
    const r = await rig({ stripe: stripeSender() });
    await r.store.connect(connection("meter-lost", { customer: await newCustomer() }));
    const call = record("meter-lost");
    await r.write([call]);
    // Our note of the send is lost (it reads as failed), and a resend sends it again.
    const [noted] = (await r.store.get("meter-lost", "stripe", [call.transaction_id])).values();
    if (!noted) throw new Error("no entry");
    await r.store.update([{ ...noted, state: "failed", lastError: "lost" }]);
    expect(await r.resend("meter-lost", "stripe")).toEqual({ queued: 1 });
    expect(sentFor(call.transaction_id)).toHaveLength(1);
    expect((await meterStatus(r.store, "meter-lost")).connections[0]?.counts).toEqual({
      sent: 1,
      waiting: 0,
      failed: 0,
    });
  });

  it("keeps refused events as failed with Stripe's message, blocks nothing else, and resends them once mapped", async () => {
    const r = await rig({ stripe: stripeSender() });
    const mapped = await newCustomer();
    await r.store.connect(connection("meter-users", { perUser: true }));
    await r.store.mapUser("meter-users", "alice", mapped);
    await r.store.mapUser("meter-users", "bob", "cus_doesnotexist");
    const alice = record("meter-users", { userId: "alice" });
    const bob = record("meter-users", { userId: "bob" });
    const carol = record("meter-users", { userId: "carol" });
    const old = record("meter-users", { userId: "alice", startedAt: Date.now() - 40 * DAY });
    const alice2 = record("meter-users", { userId: "alice" });
    await r.write([alice, bob, carol, old, alice2]);

    expect(sentFor(alice.transaction_id)[0]?.payload.stripe_customer_id).toBe(mapped);
    expect(sentFor(alice2.transaction_id)).toHaveLength(1);
    const status = await meterStatus(r.store, "meter-users");
    const conn = status.connections[0];
    expect(conn?.counts).toEqual({ sent: 2, waiting: 0, failed: 3 });
    const why = Object.fromEntries(conn?.failed.map((f) => [f.transactionId, f.lastError]) ?? []);
    expect(why[bob.transaction_id]).toBe("resource_missing: No such customer: 'cus_doesnotexist'");
    expect(why[carol.transaction_id]).toMatch(/no Stripe customer is mapped to end user 'carol'/);
    expect(why[old.transaction_id]).toMatch(/^timestamp_too_far_in_past: .*35 calendar days/);
    expect(r.depth()).toBe(0);

    // The mappings fixed, a resend sends what Stripe can take; the event too old stays failed.
    const carolCustomer = await newCustomer();
    await r.store.mapUser("meter-users", "bob", mapped);
    await r.store.mapUser("meter-users", "carol", carolCustomer);
    expect(await r.resend("meter-users", "stripe")).toEqual({ queued: 3 });
    expect(sentFor(bob.transaction_id)[0]?.payload.stripe_customer_id).toBe(mapped);
    expect(sentFor(carol.transaction_id)[0]?.payload.stripe_customer_id).toBe(carolCustomer);
    const after = (await meterStatus(r.store, "meter-users")).connections[0];
    expect(after?.counts).toEqual({ sent: 4, waiting: 0, failed: 1 });
    expect(after?.failed.map((f) => f.transactionId)).toEqual([old.transaction_id]);
  });

  it("keeps events waiting while Stripe is unreachable and sends them when it is back", async () => {
    const r = await rig({
      stripe: stripeMeterSender({ secretKey: stripe.secretKey, apiUrl: stripe.url, timeoutMs: 30_000 }),
    });
    await r.store.connect(connection("meter-down", { customer: await newCustomer() }));
    const call = record("meter-down");
    stripe.unreachable = true;
    try {
      await r.write([call]);
    } finally {
      stripe.unreachable = false;
    }
    expect(sentFor(call.transaction_id)).toEqual([]);
    const waiting = (await meterStatus(r.store, "meter-down")).connections[0];
    expect(waiting?.counts).toEqual({ sent: 0, waiting: 1, failed: 0 });
    expect(r.depth()).toBe(1);
    await r.later();
    expect(sentFor(call.transaction_id)).toHaveLength(1);
    expect((await meterStatus(r.store, "meter-down")).connections[0]?.counts.sent).toBe(1);
  });

  it("never keeps or logs the Stripe key, even when Stripe refuses it", async () => {
    const wrongKey = `sk_test_${"9".repeat(24)}`;
    const r = await rig({ stripe: stripeSender(wrongKey) });
    await r.store.connect(connection("meter-key", { customer: await newCustomer() }));
    await r.write([record("meter-key")]);
    const items = await db.send(new ScanCommand({ TableName: r.tables.billingMeter }));
    const stored = JSON.stringify(items.Items);
    expect(stored).toContain("the deployment's key (401)");
    for (const key of [wrongKey, stripe.secretKey]) {
      expect(stored).not.toContain(key);
      expect(r.lines.join("")).not.toContain(key);
    }
  });
});

describe("OpenMeter CloudEvents", () => {
  const sender = () => openMeterSender({ url: openMeter.url, token: openMeter.token, source: SOURCE });
  const received = (id: string) => openMeter.events.filter((e) => e.id === id);

  it("sends each call as a CloudEvent: the transaction id, the deployment, the end user, the GenAI usage", async () => {
    const r = await rig({ openmeter: sender() });
    await r.store.connect(connection("meter-om", { target: "openmeter", meter: "dmt.usage", perUser: true }));
    const named = record("meter-om", { userId: "dana", cost: 2500 });
    const anonymous = record("meter-om");
    await r.write([named, anonymous, record("meter-om", { mode: "dual" })]);

    const [event] = received(named.transaction_id);
    expect(cloudEventViolation(event)).toBeUndefined();
    expect(event).toMatchObject({
      specversion: "1.0",
      id: named.transaction_id,
      source: SOURCE,
      type: "dmt.usage",
      subject: "dana",
      time: new Date(named.started_at + named.latency_ms).toISOString(),
      datacontenttype: "application/json",
      data: {
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.usage.cache_read.input_tokens": 2,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "dmt.cost_micros": 2500,
        "dmt.cost_usd": "0.002500",
        "dmt.value": 2500,
        "dmt.project_id": "meter-om",
      },
    });
    expect(received(anonymous.transaction_id)[0]?.subject).toBe("meter-om");
    expect(openMeter.events.filter((e) => e.data?.["dmt.project_id"] === "meter-om")).toHaveLength(2);
    const last = openMeter.requests.at(-1);
    expect(last).toMatchObject({ contentType: "application/cloudevents-batch+json", status: 204 });
    expect(last?.authorization).toBe(`Bearer ${openMeter.token}`);
  });

  it("keeps an event the endpoint refuses as failed with its words; the rest of the batch goes in", async () => {
    const r = await rig({ openmeter: sender() });
    await r.store.connect(
      connection("meter-om2", { target: "openmeter", meter: "dmt.usage", perUser: true }),
    );
    openMeter.refusedSubjects.add("mallory");
    const good = record("meter-om2", { userId: "erin" });
    const refused = record("meter-om2", { userId: "mallory" });
    await r.write([good, refused]);
    expect(received(good.transaction_id)).toHaveLength(1);
    expect(received(refused.transaction_id)).toEqual([]);
    const conn = (await meterStatus(r.store, "meter-om2")).connections[0];
    expect(conn?.counts).toEqual({ sent: 1, waiting: 0, failed: 1 });
    expect(conn?.failed[0]?.lastError).toBe("400: subject 'mallory' is not a known customer");

    openMeter.refusedSubjects.delete("mallory");
    await r.resend("meter-om2", "openmeter");
    expect(received(refused.transaction_id)).toHaveLength(1);
  });

  it("retries an endpoint that answers 503, with the same ids", async () => {
    const r = await rig({ openmeter: sender() });
    await r.store.connect(connection("meter-om3", { target: "openmeter", meter: "dmt.usage" }));
    const call = record("meter-om3");
    openMeter.script.push(503);
    await r.write([call]);
    expect(received(call.transaction_id)).toEqual([]);
    expect((await meterStatus(r.store, "meter-om3")).connections[0]?.counts.waiting).toBe(1);
    await r.later();
    expect(received(call.transaction_id)).toHaveLength(1);
    expect((await meterStatus(r.store, "meter-om3")).connections[0]?.counts.sent).toBe(1);
  });

  it("fails a project's events, kept for a resend, when this deployment has no credentials for its target", async () => {
    const r = await rig({});
    await r.store.connect(connection("meter-none", { target: "openmeter", meter: "dmt.usage" }));
    await r.write([record("meter-none")]);
    const conn = (await meterStatus(r.store, "meter-none")).connections[0];
    expect(conn?.failed[0]?.lastError).toBe("this deployment has no openmeter credentials configured");
  });
});
