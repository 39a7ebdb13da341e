import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dashboardToken } from "../support/dashboard-token";
import { startTestHost, type TestHost } from "../support/host";
import {
  completeCheckout,
  loseDispute,
  type StripeEvent,
  type StripeStandIn,
  startStripe,
} from "../support/stripe";

/**
 * Credits bought through Stripe Checkout on the real local stack, with the official SDK pointed at the
 * stand-in: Buy credits makes a session, the signed `checkout.session.completed` grants once however
 * often it comes, and every delivery dmt must not act on is refused or ignored with nothing granted.
 */

let stack: TestHost;
let stripe: StripeStandIn;
const DEPLOYMENT = "test-deployment";

beforeAll(async () => {
  stripe = await startStripe();
  stack = await startTestHost({
    DMT_STRIPE_SECRET_KEY: stripe.secretKey,
    DMT_STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    DMT_STRIPE_API_URL: stripe.url,
    DMT_STRIPE_DEPLOYMENT: DEPLOYMENT,
    DMT_STRIPE_AMOUNTS_USD: "10,25",
    // Stripe delivers from many addresses; here one address sends the 1,000 duplicates.
    DMT_MAX_CONNECTIONS_PER_CLIENT: "5000",
  });
  stripe.webhookUrl = `${stack.url}/stripe/webhook`;
});
afterAll(async () => {
  await stack?.stop();
  await stripe?.close();
});

let users = 0;
async function newAdmin(): Promise<{ token: string; projectId: string }> {
  const token = await dashboardToken(stack.dataDir, stack.url, `buyer-${process.pid}-${++users}`);
  const me = await api(token, "GET", "/me");
  return { token, projectId: me.body.projects[0].projectId };
}

async function api(token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${stack.url}/dashboard/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, Origin: stack.url },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  return { status: res.status, body: (await res.json()) as any };
}

async function balance(token: string, projectId: string): Promise<number> {
  return (await api(token, "GET", `/projects/${projectId}/credits`)).body.balance.availableMicros;
}

/** Buys `usd` on the project through the dashboard and pays on the stand-in; the completion event. */
async function buy(admin: { token: string; projectId: string }, usd: string): Promise<StripeEvent> {
  const started = await api(admin.token, "POST", `/projects/${admin.projectId}/credits/checkout`, {
    usd,
    return_url: `${stack.url}/dashboard/credits`,
  });
  expect(started.status).toBe(201);
  await completeCheckout(stripe, started.body.session_id);
  const event = stripe.events.findLast((e) => e.event.type === "checkout.session.completed")?.event;
  if (!event) throw new Error("no checkout.session.completed");
  return event;
}

async function post(
  payload: string,
  signature?: string,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${stack.url}/stripe/webhook`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(signature !== undefined && { "stripe-signature": signature }),
    },
    body: payload,
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("Buy credits through Stripe Checkout", () => {
  it("offers the operator's amounts, sends the admin to Checkout, and grants the paid amount once", async () => {
    const admin = await newAdmin();
    const offer = await api(admin.token, "GET", `/projects/${admin.projectId}/credits/purchase`);
    expect(offer.body).toMatchObject({ configured: true, amounts_usd: ["10.00", "25.00"], recharge: null });

    const started = await api(admin.token, "POST", `/projects/${admin.projectId}/credits/checkout`, {
      usd: "25",
      return_url: `${stack.url}/dashboard/credits`,
    });
    expect(started.status).toBe(201);
    expect(started.body.url).toBe(`${stripe.url}/c/pay/${started.body.session_id}`);
    const created = stripe.calls.find((call) => call.path === "/v1/checkout/sessions");
    expect(created?.form).toMatchObject({
      mode: "payment",
      line_items: [{ quantity: "1", price_data: { currency: "usd", unit_amount: "2500" } }],
      metadata: { dmt_project: admin.projectId, dmt_deployment: DEPLOYMENT },
      payment_intent_data: { setup_future_usage: "off_session" },
    });

    await completeCheckout(stripe, started.body.session_id);
    const delivered = stripe.events.findLast((e) => e.event.type === "checkout.session.completed");
    expect(delivered?.status).toBe(200);
    expect(await balance(admin.token, admin.projectId)).toBe(25_000_000);

    // Stripe's retry of the same event later: 200, nothing more granted.
    if (!delivered) throw new Error("no event");
    expect(await stripe.deliver(delivered.event)).toBe(200);
    expect(await balance(admin.token, admin.projectId)).toBe(25_000_000);

    const ledger = await api(admin.token, "GET", `/projects/${admin.projectId}/credits/ledger`);
    expect(ledger.body.entries).toEqual([
      expect.objectContaining({
        type: "grant",
        deltaMicros: 25_000_000,
        ref: started.body.session_id,
        source: "stripe_checkout",
      }),
    ]);
    // The Checkout's customer and card are the project's now, for auto-recharge.
    expect(
      (await api(admin.token, "GET", `/projects/${admin.projectId}/credits/purchase`)).body.saved_card,
    ).toBe(true);
  });

  it("grants exactly once when the same event is delivered 1,000 times at once", {
    timeout: 300_000,
  }, async () => {
    const admin = await newAdmin();
    const event = await buy(admin, "10");
    expect(await balance(admin.token, admin.projectId)).toBe(10_000_000);
    const statuses = await Promise.all(Array.from({ length: 1000 }, () => stripe.deliver(event)));
    // Each answers 200 (granted already) or 409 (another delivery holds the payment: Stripe retries).
    expect(statuses.filter((s) => s !== 200 && s !== 409)).toEqual([]);
    expect(await balance(admin.token, admin.projectId)).toBe(10_000_000);
    const ledger = await api(admin.token, "GET", `/projects/${admin.projectId}/credits/ledger`);
    expect(ledger.body.entries).toHaveLength(1);
  });

  it("grants exactly once when the first delivery itself races 1,000 duplicates", {
    timeout: 300_000,
  }, async () => {
    const admin = await newAdmin();
    const webhookUrl = stripe.webhookUrl;
    delete stripe.webhookUrl;
    let event: StripeEvent;
    try {
      const started = await api(admin.token, "POST", `/projects/${admin.projectId}/credits/checkout`, {
        usd: "25",
        return_url: `${stack.url}/dashboard/credits`,
      });
      await completeCheckout(stripe, started.body.session_id);
      event = stripe.events.findLast((e) => e.event.type === "checkout.session.completed")
        ?.event as StripeEvent;
    } finally {
      stripe.webhookUrl = webhookUrl;
    }
    const statuses = await Promise.all(Array.from({ length: 1000 }, () => stripe.deliver(event)));
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s !== 200 && s !== 409)).toEqual([]);
    expect(await balance(admin.token, admin.projectId)).toBe(25_000_000);
    expect(
      (await api(admin.token, "GET", `/projects/${admin.projectId}/credits/ledger`)).body.entries,
    ).toHaveLength(1);
  });

  it("refuses amounts the operator does not offer and return pages off this dashboard", async () => {
    const admin = await newAdmin();
    const base = `/projects/${admin.projectId}/credits/checkout`;
    const odd = await api(admin.token, "POST", base, {
      usd: "7",
      return_url: `${stack.url}/dashboard/credits`,
    });
    expect(odd).toMatchObject({ status: 400, body: { error: { code: "invalid_field" } } });
    expect(odd.body.error.message).toContain("10.00, 25.00");
    const away = await api(admin.token, "POST", base, {
      usd: "10",
      return_url: "https://evil.example/dashboard",
    });
    expect(away).toMatchObject({ status: 400, body: { error: { code: "invalid_field" } } });
  });
});

describe("Stripe webhook: what is refused or ignored, with nothing granted", () => {
  let admin: { token: string; projectId: string };
  let payload: string;

  beforeAll(async () => {
    admin = await newAdmin();
    // A paid session whose event never reached dmt: each case below sends it some other way.
    const webhookUrl = stripe.webhookUrl;
    delete stripe.webhookUrl;
    try {
      const started = await api(admin.token, "POST", `/projects/${admin.projectId}/credits/checkout`, {
        usd: "10",
        return_url: `${stack.url}/dashboard/credits`,
      });
      await completeCheckout(stripe, started.body.session_id);
    } finally {
      stripe.webhookUrl = webhookUrl;
    }
    const event = stripe.events.findLast((e) => e.event.type === "checkout.session.completed")?.event;
    payload = JSON.stringify(event);
  });

  it("refuses a missing or bad signature and one made with another secret (400)", async () => {
    const missing = await post(payload);
    expect(missing).toMatchObject({ status: 400, body: { error: { code: "invalid_signature" } } });
    const forged = await post(payload, `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}`);
    expect(forged).toMatchObject({ status: 400, body: { error: { code: "invalid_signature" } } });
    const { signedHeader } = await import("../support/stripe");
    const other = await post(payload, signedHeader(payload, "whsec_another_deployment"));
    expect(other.status).toBe(400);
    // A body changed after signing: the signature no longer matches it.
    const signature = signedHeader(payload, stripe.webhookSecret);
    const altered = payload.replace('"amount_total":1000', '"amount_total":100000');
    expect(altered).not.toBe(payload);
    expect((await post(altered, signature)).status).toBe(400);
    expect(await balance(admin.token, admin.projectId)).toBe(0);
  });

  it("refuses a delivery whose signed timestamp is more than 5 minutes old (a replay)", async () => {
    const { signedHeader } = await import("../support/stripe");
    const old = signedHeader(payload, stripe.webhookSecret, Math.floor(Date.now() / 1000) - 600);
    const replayed = await post(payload, old);
    expect(replayed.status).toBe(400);
    expect(replayed.body.error).toMatchObject({ code: "invalid_signature" });
    expect(String((replayed.body.error as { message: string }).message)).toContain("5 minutes");
    expect(await balance(admin.token, admin.projectId)).toBe(0);
  });

  it("ignores event types it does not act on, and sessions of another deployment (200)", async () => {
    const unknown = await stripe.emit("customer.subscription.created", {
      id: "sub_1",
      object: "subscription",
    });
    expect(stripe.events.find((e) => e.event.id === unknown.id)?.status).toBe(200);
    const event = JSON.parse(payload) as StripeEvent;
    const foreign = structuredClone(event);
    foreign.id = "evt_foreign";
    (foreign.data.object.metadata as Record<string, string>).dmt_deployment = "another-deployment";
    const { signedHeader } = await import("../support/stripe");
    const body = JSON.stringify(foreign);
    const ignored = await post(body, signedHeader(body, stripe.webhookSecret));
    expect(ignored).toMatchObject({
      status: 200,
      body: { outcome: "ignored", reason: "the payment belongs to another deployment" },
    });
    const unpaid = structuredClone(event);
    unpaid.data.object.payment_status = "unpaid";
    const unpaidBody = JSON.stringify(unpaid);
    expect((await post(unpaidBody, signedHeader(unpaidBody, stripe.webhookSecret))).body).toMatchObject({
      outcome: "ignored",
    });
    expect(await balance(admin.token, admin.projectId)).toBe(0);
    // The genuine event still grants: nothing above spent it.
    expect((await post(payload, signedHeader(payload, stripe.webhookSecret))).body).toMatchObject({
      outcome: "granted",
    });
    expect(await balance(admin.token, admin.projectId)).toBe(10_000_000);
  });
});

describe("refunds and lost disputes take the credits back", () => {
  it("debits a refund's share, never below zero, and reports what was spent", async () => {
    const admin = await newAdmin();
    await buy(admin, "10");
    const session = stripe.events.findLast((e) => e.event.type === "checkout.session.completed")?.event.data
      .object;
    const intent = String(session?.payment_intent);
    const client = stripe.client();
    // Half refunded: $5 of credits taken back.
    await client.refunds.create({ payment_intent: intent, amount: 500 });
    expect(stripe.events.at(-1)?.status).toBe(200);
    expect(await balance(admin.token, admin.projectId)).toBe(5_000_000);
    // Then a lost dispute over the whole charge: the other $5.
    const charge = String((await client.paymentIntents.retrieve(intent)).latest_charge);
    await loseDispute(stripe, charge);
    expect(stripe.events.at(-1)?.status).toBe(200);
    expect(await balance(admin.token, admin.projectId)).toBe(0);
    // Delivered again: nothing more.
    const last = stripe.events.at(-1)?.event as StripeEvent;
    expect(await stripe.deliver(last)).toBe(200);
    const ledger = await api(admin.token, "GET", `/projects/${admin.projectId}/credits/ledger`);
    expect(
      ledger.body.entries.map((e: { type: string; deltaMicros: number }) => [e.type, e.deltaMicros]),
    ).toEqual([
      ["debit", -5_000_000],
      ["debit", -5_000_000],
      ["grant", 10_000_000],
    ]);
  });

  it("takes back only what is left when the credits were spent, reporting the rest", async () => {
    const admin = await newAdmin();
    await buy(admin, "25");
    const session = stripe.events.findLast((e) => e.event.type === "checkout.session.completed")?.event.data
      .object;
    // Spend $20 of it as calls would: a hold settled at $20.
    const { DynamoCredits } = await import("../../lambda/adapters/dynamodb/credits");
    const { tableNames } = await import("../../lambda/adapters/dynamodb/tables");
    const ledger = new DynamoCredits(stack.db, tableNames(process.env));
    const held = await ledger.hold(admin.projectId, "spend-hold-0001", 20_000_000, Date.now() + 60_000);
    if (!held.ok) throw new Error("hold refused");
    await ledger.settle(held.hold, 20_000_000);
    const res = await stripe.client().refunds.create({ payment_intent: String(session?.payment_intent) });
    expect(res.status).toBe("succeeded");
    expect(await balance(admin.token, admin.projectId)).toBe(0);
    const entries = (await api(admin.token, "GET", `/projects/${admin.projectId}/credits/ledger`)).body
      .entries;
    expect(entries.filter((e: { type: string }) => e.type === "debit")).toEqual([
      expect.objectContaining({
        deltaMicros: -5_000_000,
        uncollectedMicros: 20_000_000,
        source: "stripe_refund",
      }),
    ]);
  });
});

describe("without Stripe settings", () => {
  it("runs, and its Stripe routes say payments are not configured", async () => {
    const plain = await startTestHost();
    try {
      const res = await fetch(`${plain.url}/stripe/webhook`, { method: "POST", body: "{}" });
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ error: { code: "payments_not_configured" } });
      const token = await dashboardToken(plain.dataDir, plain.url, "no-stripe-user");
      const me = await (
        await fetch(`${plain.url}/dashboard/api/me`, { headers: { Authorization: `Bearer ${token}` } })
      ).json();
      const projectId = (me as { projects: { projectId: string }[] }).projects[0]?.projectId;
      const offer = await fetch(`${plain.url}/dashboard/api/projects/${projectId}/credits/purchase`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      expect(await offer.json()).toEqual({ configured: false, amounts_usd: [] });
    } finally {
      await plain.stop();
    }
  });
});
