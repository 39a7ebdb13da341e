import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { DynamoPayments } from "../../lambda/adapters/dynamodb/payments";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { setBudget } from "../../lambda/core/budgets";
import { type CloudEvent, EVENT_TYPES, SUBSCRIBABLE_TYPES } from "../../lambda/core/cloudevent";
import { parseUsd } from "../../lambda/core/credits";
import { budgetThresholdsRule, lowBalanceRule } from "../../lambda/events/alerts";
import { addWebhook } from "../../lambda/events/webhooks";
import { dmtJson } from "../support/cli";
import { startTestHost, type TestHost } from "../support/host";
import { type JsonSchema, validate } from "../support/json-schema";
import { completeCheckout, declineCard, type StripeStandIn, startStripe } from "../support/stripe";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * Every event type, delivered for real through the local stack (calls to the built-in simulator, the
 * CLI's grants and keys, a deletion request, a webhook test), validated against the JSON Schemas that
 * docs/events.md documents: the envelope, and the `data` of its type.
 */

const WAIT = { timeout: 200_000, interval: 100 };

/** The schemas of docs/events.md's "Payload schemas", by title. */
function documentedSchemas(): Map<string, JsonSchema> {
  const docs = readFileSync(join(import.meta.dirname, "../../docs/events.md"), "utf8");
  const section = docs.slice(docs.indexOf("## Payload schemas"), docs.indexOf("## Alert rules"));
  const schemas = new Map<string, JsonSchema>();
  for (const [, block] of section.matchAll(/```json\n([\s\S]*?)\n```/g)) {
    const schema = JSON.parse(block ?? "") as JsonSchema;
    schemas.set(schema.title ?? "", schema);
  }
  return schemas;
}

let stack: TestHost;
let receiver: WebhookReceiver;
let stripe: StripeStandIn;

beforeAll(async () => {
  stripe = await startStripe();
  // Stripe's stand-in for credits.recharge_failed; the sweeper runs its crossing check often.
  stack = await startTestHost(
    {
      DMT_METERING: "on",
      DMT_STRIPE_SECRET_KEY: stripe.secretKey,
      DMT_STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
      DMT_STRIPE_API_URL: stripe.url,
      DMT_SWEEP_INTERVAL_MS: "500",
    },
    undefined,
    { webhooks: { retryDelaysMs: [50] } },
  );
  stripe.webhookUrl = `${stack.url}/stripe/webhook`;
  receiver = await startWebhookReceiver();
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
  await stripe?.close();
});

it("every event type's real payload validates against its documented schema", {
  timeout: 600_000,
}, async () => {
  const schemas = documentedSchemas();
  expect([...schemas.keys()].sort()).toEqual(["envelope", ...EVENT_TYPES].sort());

  const { projectId, key } = await stack.newKey({ tier: "pro" });
  const tables = tableNames(process.env);
  await new DynamoCredits(stack.db, tables).grant(projectId, parseUsd("5"), "test");
  const { webhook, secret } = await addWebhook(
    stack.events.webhooks,
    { projectId, url: receiver.url, events: [...SUBSCRIBABLE_TYPES] },
    "public-or-loopback",
    Date.now(),
  );
  // balance.low on the first charge; budget.threshold and budget.exceeded as a tiny soft budget fills.
  await stack.events.rules.put(lowBalanceRule(projectId, "100", Date.now()));
  await stack.events.rules.put(budgetThresholdsRule(projectId, "50,100", Date.now()));
  stack.events.cachedRules.forget(projectId);
  await setBudget(
    stack.store,
    new DynamoBudgets(stack.db, tables),
    { projectId, usd: "0.000001", window: "day", soft: true },
    Date.now(),
  );
  const call = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-user-id": "u-1" },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(call.status).toBe(200);
  await call.arrayBuffer();
  const transaction = call.headers.get("x-dmt-transaction-id") ?? "";
  await stack.drain();
  // The CLI's own events, through the data dir's journal.
  await dmtJson(
    ["credits", "grant", "--project", projectId, "--usd", "1.5", "--note", "schemas"],
    stack.dataDir,
  );
  const created = await dmtJson<{ id: string }>(
    ["keys", "create", "--project", projectId, "--name", "schemas"],
    stack.dataDir,
  );
  await dmtJson(["keys", "revoke", created.id], stack.dataDir);
  await stack.events.deliveries.test(projectId, webhook.webhookId);
  const deletion = await fetch(`${stack.url}/api/v1/data`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ reason: "schemas", transaction_ids: [transaction] }),
  });
  expect(deletion.status).toBe(202);
  // A Checkout purchase saves a card; the card then declines an auto-recharge: credits.recharge_failed.
  const metadata = { dmt_project: projectId, dmt_deployment: "local" };
  const session = await stripe.client().checkout.sessions.create({
    mode: "payment",
    customer_creation: "always",
    success_url: `${stack.url}/dashboard/credits`,
    line_items: [
      { quantity: 1, price_data: { currency: "usd", unit_amount: 1000, product_data: { name: "credits" } } },
    ],
    metadata,
    payment_intent_data: { metadata, setup_future_usage: "off_session" },
  });
  const paid = await completeCheckout(stripe, session.id);
  // A refund of half of it takes its credits back: credits.debited.
  await stripe.client().refunds.create({ payment_intent: String(paid.payment_intent), amount: 500 });
  declineCard(
    stripe,
    String((await stripe.client().paymentIntents.retrieve(String(paid.payment_intent))).payment_method),
  );
  await new DynamoPayments(stack.db, tables).updateProfile(projectId, {
    recharge: { thresholdMicros: parseUsd("1000"), amountMicros: parseUsd("10") },
    armed: true,
  });

  const received = () =>
    receiver.received.map(
      (r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as CloudEvent,
    );
  await expect.poll(() => new Set(received().map((event) => event.type)), WAIT).toEqual(new Set(EVENT_TYPES));
  for (const event of received()) {
    const envelope = schemas.get("envelope") as JsonSchema;
    expect(validate(envelope, event), event.type).toEqual([]);
    expect(validate(schemas.get(event.type) as JsonSchema, event.data), event.type).toEqual([]);
  }
});
