import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { APIGatewayProxyEvent } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoPorts } from "../../lambda/adapters/dynamodb/ports";
import { TABLES, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { composePayments } from "../../lambda/compose/payments";
import { createProject } from "../../lambda/core/accounts";
import { LOW_BALANCE_RULE, type LowBalanceRule } from "../../lambda/core/alert-rules";
import { silentLogger } from "../../lambda/core/logger";
import { lowBalanceRule } from "../../lambda/events/alerts";
import { awsStripeSettings } from "../../lambda/handlers/runtime/stripe";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { completeCheckout, type StripeStandIn, signedHeader, startStripe } from "../support/stripe";
import { gatewayProxyEvent, type SecretsEndpoint, startSecretsEndpoint } from "./lambda-runtime";
import { type EventBridgeStandIn, startEventBridgeStandIn } from "./metering-stand-ins";

/**
 * The webhook's Lambda handler as API Gateway invokes it for `POST /stripe/webhook` (no authorizer):
 * the Stripe secrets read from a Secrets Manager stand-in by ARN, the grant in DynamoDB.
 */
const KEY_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:StripeSecretKey-AbCdEf";
const WEBHOOK_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:PaymentsWebhookSecret-AbCdEf";
const DEPLOYMENT = "DmtHandlerTest";

const dataDir = mkdtempSync(join(tmpdir(), "dmt-stripe-handler-"));
let dynamo: EmbeddedDynamo;
let secrets: SecretsEndpoint;
let stripe: StripeStandIn;
let bus: EventBridgeStandIn;
let store: DynamoPorts;
type Answer = { statusCode: number; body: string };
let api: (event: APIGatewayProxyEvent) => Promise<Answer>;

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(dataDir);
  secrets = await startSecretsEndpoint();
  stripe = await startStripe();
  bus = await startEventBridgeStandIn();
  secrets.secrets.set(KEY_ARN, { AWSCURRENT: stripe.secretKey });
  secrets.secrets.set(WEBHOOK_ARN, { AWSCURRENT: stripe.webhookSecret });
  Object.assign(process.env, {
    DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
    DMT_LOG_LEVEL: "silent",
    DMT_ATHENA_WORKGROUP: "handlers_workgroup",
    DMT_WAREHOUSE_DATABASE: "handlers_database",
    DMT_WAREHOUSE_TABLE: "interactions",
    DMT_SECRETS_ENDPOINT: secrets.url,
    DMT_STRIPE_SECRET_ARN: KEY_ARN,
    DMT_STRIPE_WEBHOOK_SECRET_ARN: WEBHOOK_ARN,
    DMT_STRIPE_DEPLOYMENT: DEPLOYMENT,
    DMT_STRIPE_API_URL: stripe.url,
    DMT_EVENT_BUS_NAME: "dmt-events",
    DMT_EVENTBRIDGE_ENDPOINT: bus.url,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: "eu-west-1",
  });
  for (const name of Object.keys(TABLES)) process.env[`DMT_TABLE_${name.toUpperCase()}`] = `stripe-${name}`;
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  const names = tableNames(process.env);
  await ensureTables(db, names);
  store = new DynamoPorts(db, names, () => {
    throw new Error("no BYOK keys here");
  });
  const { handler } = await import("../../lambda/handlers/stripe-webhook");
  // hono/aws-lambda declares its own event types; API Gateway's REST events are what it takes.
  api = (event) => (handler as unknown as (e: APIGatewayProxyEvent) => Promise<Answer>)(event);
}, 120_000);

afterAll(async () => {
  await stripe?.close();
  await bus?.close();
  await secrets?.close();
  await dynamo?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** A project that bought `usd` on Checkout (created as the dashboard does); Stripe's completion event. */
async function paidCheckout(projectId: string, usd: number): Promise<string> {
  await createProject(store.keys, projectId, "pro", Date.now());
  const billing = composePayments(
    { store, logger: silentLogger, clock: Date.now },
    {
      secretKey: stripe.secretKey,
      webhookSecret: stripe.webhookSecret,
      amountsMicros: [usd * 1_000_000],
      deployment: DEPLOYMENT,
      apiUrl: stripe.url,
    },
  );
  const session = await billing?.payments.startCheckout(
    projectId,
    usd * 1_000_000,
    "https://dashboard.example.com/credits",
  );
  await completeCheckout(stripe, session?.sessionId ?? "");
  const event = stripe.events.findLast((e) => e.event.type === "checkout.session.completed")?.event;
  if (!event) throw new Error("no checkout.session.completed");
  return JSON.stringify(event);
}

async function lowRule(projectId: string): Promise<LowBalanceRule | undefined> {
  return (await store.alertRules.list(projectId)).find((r): r is LowBalanceRule => r.kind === "low_balance");
}

function webhook(payload: string, signature?: string): Promise<Answer> {
  return api(
    gatewayProxyEvent(
      {
        method: "POST",
        path: "/stripe/webhook",
        headers: {
          "content-type": "application/json",
          ...(signature !== undefined && { "stripe-signature": signature }),
        },
        body: payload,
      },
      {},
    ),
  );
}

describe("POST /stripe/webhook through its Lambda handler", () => {
  it("grants a signed checkout once, the webhook secret read from Secrets Manager", async () => {
    const payload = await paidCheckout("stripe-aws-1", 25);
    const signature = signedHeader(payload, stripe.webhookSecret);
    const first = await webhook(payload, signature);
    expect(first.statusCode).toBe(200);
    expect(JSON.parse(first.body)).toMatchObject({ received: true });
    expect((await store.credits.balance("stripe-aws-1")).availableMicros).toBe(25_000_000);
    // Stripe's retry of the same event: nothing more.
    expect((await webhook(payload, signature)).statusCode).toBe(200);
    expect((await store.credits.balance("stripe-aws-1")).availableMicros).toBe(25_000_000);
    expect(secrets.reads.map((r) => r.secretId)).toEqual(expect.arrayContaining([KEY_ARN, WEBHOOK_ARN]));
    // credits.granted on the stack's bus, as the local server publishes it: once, not for the retry.
    const granted = bus.entries
      .filter((entry) => entry.DetailType === "credits.granted")
      .map((entry) => JSON.parse(entry.Detail))
      .filter((event) => event.projectid === "stripe-aws-1");
    expect(granted).toHaveLength(1);
    expect(granted[0]).toMatchObject({
      type: "credits.granted",
      data: { amount_usd: "25.00", source: "stripe_checkout", available_usd: "25.00" },
    });
    expect(bus.entries[0]).toMatchObject({ EventBusName: "dmt-events", Source: "dmt" });
    expect(JSON.stringify(bus.entries)).not.toContain(stripe.secretKey);
  });

  it("takes a refund's credits back and puts credits.debited on the bus, once however often Stripe sends it", async () => {
    const payload = await paidCheckout("stripe-aws-refund", 25);
    expect((await webhook(payload, signedHeader(payload, stripe.webhookSecret))).statusCode).toBe(200);
    const intent = String(
      (JSON.parse(payload) as { data: { object: { payment_intent: string } } }).data.object.payment_intent,
    );
    await stripe.client().refunds.create({ payment_intent: intent, amount: 1000 });
    const refunded = stripe.events.findLast((e) => e.event.type === "charge.refunded")?.event;
    const body = JSON.stringify(refunded);
    for (let delivery = 0; delivery < 2; delivery++) {
      const answer = await webhook(body, signedHeader(body, stripe.webhookSecret));
      expect(answer.statusCode).toBe(200);
    }
    expect((await store.credits.balance("stripe-aws-refund")).availableMicros).toBe(15_000_000);
    const debited = bus.entries
      .filter((entry) => entry.DetailType === "credits.debited")
      .map((entry) => JSON.parse(entry.Detail))
      .filter((event) => event.projectid === "stripe-aws-refund");
    expect(debited).toHaveLength(1);
    expect(debited[0].data).toMatchObject({
      payment_id: intent,
      source: "stripe_refund",
      amount_usd: "10.00",
      not_taken_usd: "0.00",
      available_usd: "15.00",
    });
  });

  it("re-checks the project's low-balance alert at once: re-armed above it, fired while still below", async () => {
    // A rule that fired at zero: the purchase lifts the balance above it, so it is armed again.
    const above = await paidCheckout("stripe-aws-rearm", 25);
    await store.alertRules.put(lowBalanceRule("stripe-aws-rearm", "10", Date.now()));
    expect(await store.alertRules.disarm("stripe-aws-rearm", LOW_BALANCE_RULE, Date.now())).toBe(true);
    expect((await webhook(above, signedHeader(above, stripe.webhookSecret))).statusCode).toBe(200);
    expect((await lowRule("stripe-aws-rearm"))?.armed).toBe(true);

    // An armed rule above what was bought: still below it, so balance.low goes on the bus, once.
    const below = await paidCheckout("stripe-aws-low", 25);
    await store.alertRules.put(lowBalanceRule("stripe-aws-low", "50", Date.now()));
    for (let delivery = 0; delivery < 2; delivery++) {
      expect((await webhook(below, signedHeader(below, stripe.webhookSecret))).statusCode).toBe(200);
    }
    expect((await lowRule("stripe-aws-low"))?.armed).toBe(false);
    const low = bus.entries
      .filter((entry) => entry.DetailType === "balance.low")
      .map((entry) => JSON.parse(entry.Detail))
      .filter((event) => event.projectid === "stripe-aws-low");
    expect(low).toHaveLength(1);
    expect(low[0].data).toEqual({ available_usd: "25.00", threshold_usd: "50.00" });
  });

  it("refuses a missing, forged or replayed signature and grants nothing", async () => {
    const payload = await paidCheckout("stripe-aws-2", 25);
    const tenMinutesAgo = Math.floor(Date.now() / 1000) - 600;
    for (const signature of [
      undefined,
      signedHeader(payload, "whsec_not_the_endpoints"),
      signedHeader(payload, stripe.webhookSecret, tenMinutesAgo),
    ]) {
      const res = await webhook(payload, signature);
      expect(res.statusCode).toBe(400);
      expect(JSON.parse(res.body).error.code).toBe("invalid_signature");
      // The answer never echoes a secret.
      expect(res.body).not.toContain(stripe.webhookSecret);
      expect(res.body).not.toContain(stripe.secretKey);
    }
    expect((await store.credits.balance("stripe-aws-2")).availableMicros).toBe(0);
  });

  it("leaves payments unconfigured while a secret is still empty, as the stack creates them", async () => {
    const emptyArn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:Empty-AbCdEf";
    const settings = (key: string, webhook: string) =>
      awsStripeSettings(
        {
          DMT_STRIPE_SECRET_ARN: key,
          DMT_STRIPE_WEBHOOK_SECRET_ARN: webhook,
          DMT_SECRETS_ENDPOINT: secrets.url,
        },
        silentLogger,
      )();
    expect(await settings(emptyArn, WEBHOOK_ARN)).toBeUndefined();
    expect(await settings(KEY_ARN, emptyArn)).toBeUndefined();
    expect(await awsStripeSettings({}, silentLogger)()).toBeUndefined();
    expect(await settings(KEY_ARN, WEBHOOK_ARN)).toMatchObject({ deployment: "aws" });
  });
});
