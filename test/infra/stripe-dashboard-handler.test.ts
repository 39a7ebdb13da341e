/**
 * Buy credits and auto-recharge in AWS, through the Lambda handlers as API Gateway and the schedule
 * invoke them: the dashboard API (HTTP API payload 2.0, a Cognito-style access token checked against
 * a JWKS served here) creates the Checkout session at the Stripe stand-in and sets the recharge rule;
 * the webhook's handler grants the purchase; the sweeper's handler runs the crossing check. The Stripe
 * secrets come from a Secrets Manager stand-in by ARN, events go to an EventBridge stand-in, the
 * store is DynamoDB (dynalite). Every handler reads its configuration at import, as at a cold start.
 */
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {
  APIGatewayProxyEvent,
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  Context,
} from "aws-lambda";
import { exportJWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoPorts } from "../../lambda/adapters/dynamodb/ports";
import { TABLES, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { personalProjectId } from "../../lambda/core/members";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { DASHBOARD_API_SCOPE } from "../../lib/dashboard";
import {
  completeCheckout,
  declineCard,
  type StripeStandIn,
  signedHeader,
  startStripe,
} from "../support/stripe";
import {
  gatewayProxyEvent,
  lambdaContext,
  type SecretsEndpoint,
  startSecretsEndpoint,
} from "./lambda-runtime";
import { type EventBridgeStandIn, startEventBridgeStandIn } from "./metering-stand-ins";

const CLIENT_ID = "dashboard-spa-client";
const KID = "pool-key-1";
const KEY_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:BillingStripeSecretKey-AbCdEf";
const WEBHOOK_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:PaymentsWebhookSecret-AbCdEf";
/** The distribution's dashboard (DMT_DASHBOARD_URL, as the stack sets it): Checkout returns below it. */
const DASHBOARD_URL = "https://d111111abcdef8.cloudfront.net/dashboard/";
const DEPLOYMENT = "DmtDashboardStripeTest";
const dataDir = mkdtempSync(join(tmpdir(), "dmt-stripe-dashboard-"));
const poolKey = generateKeyPairSync("rsa", { modulusLength: 2048 });

let dynamo: EmbeddedDynamo;
let jwks: Server;
let secrets: SecretsEndpoint;
let stripe: StripeStandIn;
let bus: EventBridgeStandIn;
let store: DynamoPorts;
let issuer: string;
type Answer = APIGatewayProxyStructuredResultV2;
let dashboard: (event: APIGatewayProxyEventV2) => Promise<Answer>;
let webhook: (event: APIGatewayProxyEvent) => Promise<{ statusCode: number; body: string }>;
let sweep: (event: unknown, context: Context) => Promise<unknown>;

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(dataDir);
  const publicJwk = { ...(await exportJWK(poolKey.publicKey)), kid: KID, alg: "RS256", use: "sig" };
  jwks = createServer((req, res) => {
    if (req.url !== "/us-east-1_pool/.well-known/jwks.json") return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [publicJwk] }));
  });
  await new Promise<void>((resolve) => jwks.listen(0, "127.0.0.1", resolve));
  issuer = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/us-east-1_pool`;
  secrets = await startSecretsEndpoint();
  stripe = await startStripe();
  bus = await startEventBridgeStandIn();
  secrets.secrets.set(KEY_ARN, { AWSCURRENT: stripe.secretKey });
  secrets.secrets.set(WEBHOOK_ARN, { AWSCURRENT: stripe.webhookSecret });
  // What the stack gives the dashboard API, the webhook and the sweeper (lib/payments.ts, lib/events.ts).
  Object.assign(process.env, {
    DMT_LOG_LEVEL: "silent",
    DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
    DMT_DASHBOARD_ISSUER: issuer,
    DMT_DASHBOARD_CLIENT_ID: CLIENT_ID,
    DMT_DASHBOARD_URL: DASHBOARD_URL,
    DMT_BYOK_KEY_ARN: "arn:aws:kms:us-east-1:123456789012:key/byok-test",
    DMT_ATHENA_WORKGROUP: "dmt-warehouse",
    DMT_ATHENA_RESULTS_BUCKET: "dmt-athena-results",
    DMT_WAREHOUSE_DATABASE: "dmt_warehouse",
    DMT_WAREHOUSE_TABLE: "interactions",
    DMT_WEBHOOK_QUEUE_URL: "http://127.0.0.1:9/123456789012/deliveries",
    DMT_EVENT_BUS_NAME: "dmt-events",
    DMT_EVENTBRIDGE_ENDPOINT: bus.url,
    DMT_SECRETS_ENDPOINT: secrets.url,
    DMT_STRIPE_SECRET_ARN: KEY_ARN,
    DMT_STRIPE_WEBHOOK_SECRET_ARN: WEBHOOK_ARN,
    DMT_STRIPE_DEPLOYMENT: DEPLOYMENT,
    DMT_STRIPE_AMOUNTS_USD: "10,25",
    DMT_STRIPE_API_URL: stripe.url,
    DMT_METRICS_NAMESPACE: "dmt/StripeDashboardTest",
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    AWS_REGION: "us-east-1",
  });
  for (const name of Object.keys(TABLES)) process.env[`DMT_TABLE_${name.toUpperCase()}`] = `pay-${name}`;
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  const names = tableNames(process.env);
  await ensureTables(db, names);
  store = new DynamoPorts(db, names, () => {
    throw new Error("no BYOK keys here");
  });
  // hono/aws-lambda declares its own event types; these are the events API Gateway sends.
  const dashboardHandler = (await import("../../lambda/handlers/dashboard")).handler;
  dashboard = (event) => dashboardHandler(event as never, {} as Context) as Promise<Answer>;
  const webhookHandler = (await import("../../lambda/handlers/stripe-webhook")).handler;
  webhook = (event) => (webhookHandler as unknown as typeof webhook)(event);
  sweep = (await import("../../lambda/handlers/sweeper")).handler as typeof sweep;
}, 120_000);

afterAll(async () => {
  await new Promise((resolve) => jwks?.close(resolve));
  await stripe?.close();
  await bus?.close();
  await secrets?.close();
  await dynamo?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** An access token as Cognito issues them: `client_id` and `scope`, no `aud`. */
function accessToken(sub: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: CLIENT_ID, token_use: "access", scope: `openid ${DASHBOARD_API_SCOPE}` })
    .setProtectedHeader({ alg: "RS256", kid: KID })
    .setSubject(sub)
    .setIssuer(issuer)
    .setIssuedAt(now - 60)
    .setExpirationTime(now + 600)
    .sign(poolKey.privateKey);
}

/** `ANY /dashboard/api/{proxy+}` through the distribution: the browser's Origin is the distribution's. */
async function call(sub: string, method: string, path: string, body?: unknown, origin?: string) {
  const domainName = "abc123.execute-api.us-east-1.amazonaws.com";
  const event: APIGatewayProxyEventV2 = {
    version: "2.0",
    routeKey: "ANY /dashboard/api/{proxy+}",
    rawPath: path,
    rawQueryString: "",
    headers: {
      host: domainName,
      authorization: `Bearer ${await accessToken(sub)}`,
      origin: origin ?? new URL(DASHBOARD_URL).origin,
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    isBase64Encoded: false,
    ...(body !== undefined && { body: JSON.stringify(body) }),
    requestContext: {
      accountId: "123456789012",
      apiId: "abc123",
      domainName,
      domainPrefix: "abc123",
      http: { method, path, protocol: "HTTP/1.1", sourceIp: "203.0.113.7", userAgent: "test" },
      requestId: `req-${Date.now()}`,
      routeKey: "ANY /dashboard/api/{proxy+}",
      stage: "$default",
      time: "01/Jan/2026:00:00:00 +0000",
      timeEpoch: Date.now(),
    },
  };
  const answer = await dashboard(event);
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  return { status: answer.statusCode, body: JSON.parse(answer.body ?? "null") as any };
}

/** Stripe posting its last event of `type` to the webhook's route, signed. */
async function deliverLast(type: string): Promise<number> {
  const event = stripe.events.findLast((e) => e.event.type === type)?.event;
  if (!event) throw new Error(`no ${type}`);
  const payload = JSON.stringify(event);
  const answer = await webhook(
    gatewayProxyEvent(
      {
        method: "POST",
        path: "/stripe/webhook",
        headers: {
          "content-type": "application/json",
          "stripe-signature": signedHeader(payload, stripe.webhookSecret),
        },
        body: payload,
      },
      {},
    ),
  );
  return answer.statusCode;
}

const eventsOf = (type: string, projectId: string) =>
  bus.entries
    .filter((entry) => entry.DetailType === type)
    .map((entry) => JSON.parse(entry.Detail))
    .filter((event) => event.projectid === projectId);

/** A signed-in user's personal project (owner: may buy) after buying $10 on Checkout. */
async function bought(sub: string): Promise<{ projectId: string; card: string }> {
  const projectId = personalProjectId(sub);
  expect((await call(sub, "GET", "/dashboard/api/me")).status).toBe(200);
  const started = await call(sub, "POST", `/dashboard/api/projects/${projectId}/credits/checkout`, {
    usd: "10",
    return_url: `${DASHBOARD_URL}credits`,
  });
  expect(started.status).toBe(201);
  const session = await completeCheckout(stripe, started.body.session_id);
  expect(await deliverLast("checkout.session.completed")).toBe(200);
  const intent = await stripe.client().paymentIntents.retrieve(String(session.payment_intent));
  return { projectId, card: String(intent.payment_method) };
}

describe("Buy credits and auto-recharge through the AWS handlers", () => {
  it("offers the stack's amounts and creates the Checkout session at Stripe, returning to the dashboard", async () => {
    const projectId = personalProjectId("buyer-1");
    await call("buyer-1", "GET", "/dashboard/api/me");
    const offer = await call("buyer-1", "GET", `/dashboard/api/projects/${projectId}/credits/purchase`);
    expect(offer.status).toBe(200);
    expect(offer.body).toMatchObject({ configured: true, amounts_usd: ["10.00", "25.00"], recharge: null });

    const started = await call("buyer-1", "POST", `/dashboard/api/projects/${projectId}/credits/checkout`, {
      usd: "25",
      return_url: `${DASHBOARD_URL}credits`,
    });
    expect(started.status).toBe(201);
    expect(started.body.url).toContain(stripe.url);
    const created = stripe.calls.findLast((c) => c.method === "POST" && c.path === "/v1/checkout/sessions");
    expect(created?.form).toMatchObject({
      mode: "payment",
      success_url: expect.stringMatching(
        /^https:\/\/d111111abcdef8\.cloudfront\.net\/dashboard\/credits\?checkout=done/,
      ),
      cancel_url: `${DASHBOARD_URL}credits?checkout=cancelled`,
    });
    expect(JSON.stringify(created?.form)).toContain(DEPLOYMENT);
    // The key came from Secrets Manager by ARN; the answer never holds it.
    expect(secrets.reads.map((r) => r.secretId)).toEqual(expect.arrayContaining([KEY_ARN, WEBHOOK_ARN]));
    expect(JSON.stringify(started.body)).not.toContain(stripe.secretKey);
  });

  it("sends the admin back only to the stack's dashboard, whatever Origin the request claims", async () => {
    const projectId = personalProjectId("buyer-2");
    await call("buyer-2", "GET", "/dashboard/api/me");
    const before = stripe.calls.length;
    for (const [returnUrl, origin] of [
      ["https://evil.example.com/dashboard/credits", "https://evil.example.com"],
      [`${new URL(DASHBOARD_URL).origin}/elsewhere`, undefined],
    ] as const) {
      const refused = await call(
        "buyer-2",
        "POST",
        `/dashboard/api/projects/${projectId}/credits/checkout`,
        { usd: "10", return_url: returnUrl },
        origin,
      );
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_field" });
      expect(refused.body.error.message).toContain("return_url");
    }
    const notOffered = await call(
      "buyer-2",
      "POST",
      `/dashboard/api/projects/${projectId}/credits/checkout`,
      {
        usd: "15",
        return_url: `${DASHBOARD_URL}credits`,
      },
    );
    expect(notOffered.status).toBe(400);
    expect(notOffered.body.error.message).toContain("10.00, 25.00");
    expect(stripe.calls).toHaveLength(before);
  });

  it("grants the purchase in the webhook and puts credits.granted on the bus", async () => {
    const { projectId } = await bought("buyer-3");
    expect((await store.credits.balance(projectId)).availableMicros).toBe(10_000_000);
    expect(eventsOf("credits.granted", projectId)).toEqual([
      expect.objectContaining({
        data: expect.objectContaining({ amount_usd: "10.00", source: "stripe_checkout" }),
      }),
    ]);
  });

  it("sets the recharge rule; the sweeper's check raises credits.recharge_failed on the bus for a declined card", async () => {
    const { projectId, card } = await bought("buyer-4");
    const path = `/dashboard/api/projects/${projectId}/credits/recharge`;
    const notOffered = await call("buyer-4", "PUT", path, { threshold_usd: "15", amount_usd: "30" });
    expect(notOffered.status).toBe(400);
    expect(notOffered.body.error).toMatchObject({
      code: "invalid_field",
      message: "Invalid field 'amount_usd': must be one of 10.00, 25.00",
    });
    const set = await call("buyer-4", "PUT", path, { threshold_usd: "15", amount_usd: "25" });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ recharge: { threshold_usd: "15", amount_usd: "25" }, saved_card: true });
    const shown = await call("buyer-4", "GET", `/dashboard/api/projects/${projectId}/credits/purchase`);
    expect(shown.body.recharge).toEqual({ threshold_usd: "15.00", amount_usd: "25.00" });

    declineCard(stripe, card);
    await sweep({}, lambdaContext());
    const failed = eventsOf("credits.recharge_failed", projectId);
    expect(failed).toHaveLength(1);
    expect(failed[0].data).toMatchObject({
      amount_usd: "25.00",
      threshold_usd: "15.00",
      available_usd: "10.00",
    });
    expect(JSON.stringify(failed)).not.toContain(stripe.secretKey);
    // Once per crossing: the next sweep does not charge the card again.
    const intents = stripe.calls.filter((c) => c.path === "/v1/payment_intents").length;
    await sweep({}, lambdaContext());
    expect(stripe.calls.filter((c) => c.path === "/v1/payment_intents")).toHaveLength(intents);
    expect(eventsOf("credits.recharge_failed", projectId)).toHaveLength(1);

    const removed = await call("buyer-4", "DELETE", path);
    expect(removed.body).toEqual({ recharge: null });
  });

  it("recharges a saved card in the sweeper and puts credits.granted on the bus", async () => {
    const { projectId } = await bought("buyer-5");
    const path = `/dashboard/api/projects/${projectId}/credits/recharge`;
    expect((await call("buyer-5", "PUT", path, { threshold_usd: "15", amount_usd: "25" })).status).toBe(200);
    await sweep({}, lambdaContext());
    expect((await store.credits.balance(projectId)).availableMicros).toBe(35_000_000);
    expect(eventsOf("credits.granted", projectId).map((e) => e.data.source)).toEqual([
      "stripe_checkout",
      "stripe_recharge",
    ]);
  });
});
