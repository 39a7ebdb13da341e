import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoPorts } from "../../lambda/adapters/dynamodb/ports";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { type Billing, composePayments } from "../../lambda/compose/payments";
import type { CloudEvent, NewEvent } from "../../lambda/core/cloudevent";
import { silentLogger } from "../../lambda/core/logger";
import { dashboardToken } from "../support/dashboard-token";
import { startTestHost, type TestHost } from "../support/host";
import { completeCheckout, declineCard, type StripeStandIn, startStripe } from "../support/stripe";

/**
 * Auto-recharge against the Stripe stand-in: one off-session charge per crossing, granted once; a
 * declined card raises credits.recharge_failed and is not retried; Stripe unreachable is retried at
 * the next check with the same idempotency key; never two at once. The crossing checks are called
 * here one by one (the same composition the sweeper runs); the last case lets the sweeper run them.
 */

let stack: TestHost;
let swept: TestHost | undefined;
let stripe: StripeStandIn;
let store: DynamoPorts;
let billing: Billing;
const published: NewEvent[] = [];
const DEPLOYMENT = "recharge-test";

beforeAll(async () => {
  stripe = await startStripe();
  stack = await startTestHost({
    DMT_STRIPE_SECRET_KEY: stripe.secretKey,
    DMT_STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    DMT_STRIPE_API_URL: stripe.url,
    DMT_STRIPE_DEPLOYMENT: DEPLOYMENT,
    DMT_STRIPE_AMOUNTS_USD: "10,25",
  });
  stripe.webhookUrl = `${stack.url}/stripe/webhook`;
  store = new DynamoPorts(stack.db, tableNames(process.env), () => {
    throw new Error("no key wrapper in this test");
  });
  const parts = composePayments(
    { store, logger: silentLogger, clock: Date.now },
    {
      secretKey: stripe.secretKey,
      webhookSecret: stripe.webhookSecret,
      amountsMicros: [10_000_000, 25_000_000],
      deployment: DEPLOYMENT,
      apiUrl: stripe.url,
    },
    {
      publisher: {
        publish: async (event) => {
          published.push(event);
          return event as unknown as CloudEvent;
        },
      },
    },
  );
  if (!parts) throw new Error("no billing");
  billing = parts;
});
afterAll(async () => {
  await swept?.stop();
  await stack?.stop();
  await stripe?.close();
});

let users = 0;
async function api(token: string, method: string, path: string, body?: unknown, host: TestHost = stack) {
  const res = await fetch(`${host.url}/dashboard/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, Origin: host.url },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  return { status: res.status, body: (await res.json()) as any };
}

/** A project that bought $10 through Checkout (its card saved), with a rule: below $15, buy $25. */
async function buyer(host: TestHost = stack): Promise<{ token: string; projectId: string; card: string }> {
  const token = await dashboardToken(host.dataDir, host.url, `recharger-${process.pid}-${++users}`);
  const projectId = (await api(token, "GET", "/me", undefined, host)).body.projects[0].projectId as string;
  const started = await api(
    token,
    "POST",
    `/projects/${projectId}/credits/checkout`,
    { usd: "10", return_url: `${host.url}/dashboard/credits` },
    host,
  );
  const session = await completeCheckout(stripe, started.body.session_id);
  const intent = await stripe.client().paymentIntents.retrieve(String(session.payment_intent));
  return { token, projectId, card: String(intent.payment_method) };
}

const available = async (projectId: string) => (await store.credits.balance(projectId)).availableMicros;
const profile = async (projectId: string) => {
  const found = await store.payments.getProfile(projectId);
  if (!found) throw new Error("no profile");
  return found;
};
const intentsFor = (customer: string | undefined) =>
  stripe.calls.filter((call) => call.path === "/v1/payment_intents" && call.form.customer === customer);

describe("auto-recharge", () => {
  it("charges the saved card once per crossing and grants it; re-arms once the balance is back above", async () => {
    const { token, projectId } = await buyer();
    // The sweeper must not race this case's checks: the rule is written straight to the store.
    await billing.recharges.setRule(projectId, { thresholdMicros: 15_000_000, amountMicros: 25_000_000 });
    const first = await profile(projectId);
    expect(await billing.recharges.check(first)).toBe("succeeded");
    expect(await available(projectId)).toBe(35_000_000);
    const charged = intentsFor(first.customerId);
    expect(charged).toHaveLength(1);
    expect(charged[0]?.form).toMatchObject({ amount: "2500", off_session: "true", confirm: "true" });
    // Above the threshold now: the rule re-arms, no charge.
    expect(await billing.recharges.check(await profile(projectId))).toBe("above");
    // Spent down to $5: a new crossing, one more charge.
    const hold = await store.credits.hold(projectId, "spend-recharge-1", 30_000_000, Date.now() + 60_000);
    if (!hold.ok) throw new Error("hold refused");
    await store.credits.settle(hold.hold, 30_000_000);
    expect(await billing.recharges.check(await profile(projectId))).toBe("succeeded");
    expect(await billing.recharges.check(await profile(projectId))).toBe("above");
    expect(intentsFor(first.customerId)).toHaveLength(2);
    const ledger = await api(token, "GET", `/projects/${projectId}/credits/ledger`);
    expect(
      ledger.body.entries.filter((e: { source?: string }) => e.source === "stripe_recharge"),
    ).toHaveLength(2);
    // Stripe's payment_intent.succeeded for each recharge found them granted: nothing twice.
    expect(await available(projectId)).toBe(30_000_000);
  });

  it("a declined card raises credits.recharge_failed and is not tried again in the crossing", async () => {
    const { projectId, card } = await buyer();
    declineCard(stripe, card);
    await billing.recharges.setRule(projectId, { thresholdMicros: 15_000_000, amountMicros: 25_000_000 });
    expect(await billing.recharges.check(await profile(projectId))).toBe("failed");
    const event = published.findLast(
      (e) => e.type === "credits.recharge_failed" && e.projectId === projectId,
    );
    expect(event?.data).toMatchObject({
      amount_usd: "25.00",
      threshold_usd: "15.00",
      available_usd: "10.00",
      code: "generic_decline",
    });
    expect((await profile(projectId)).lastRecharge).toMatchObject({ outcome: "failed" });
    const attempts = intentsFor((await profile(projectId)).customerId).length;
    expect(await billing.recharges.check(await profile(projectId))).toBe("disarmed");
    expect(await billing.recharges.check(await profile(projectId))).toBe("disarmed");
    expect(intentsFor((await profile(projectId)).customerId)).toHaveLength(attempts);
    expect(await available(projectId)).toBe(10_000_000);
  });

  it("Stripe unreachable: recorded, tried again at the next check, one charge", async () => {
    const { projectId } = await buyer();
    await billing.recharges.setRule(projectId, { thresholdMicros: 15_000_000, amountMicros: 25_000_000 });
    stripe.unreachable = true;
    try {
      expect(await billing.recharges.check(await profile(projectId))).toBe("unreachable");
    } finally {
      stripe.unreachable = false;
    }
    expect((await profile(projectId)).lastRecharge).toMatchObject({ outcome: "unreachable" });
    expect(await available(projectId)).toBe(10_000_000);
    expect(await billing.recharges.check(await profile(projectId))).toBe("succeeded");
    expect(await available(projectId)).toBe(35_000_000);
  });

  it("never runs two recharges of a project at once", async () => {
    const { projectId } = await buyer();
    await billing.recharges.setRule(projectId, { thresholdMicros: 15_000_000, amountMicros: 25_000_000 });
    const seen = await profile(projectId);
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => billing.recharges.check(seen)));
    expect(outcomes.filter((o) => o === "succeeded")).toHaveLength(1);
    expect(outcomes.filter((o) => o !== "succeeded" && o !== "busy" && o !== "disarmed")).toEqual([]);
    expect(intentsFor(seen.customerId)).toHaveLength(1);
    expect(await available(projectId)).toBe(35_000_000);
  });

  it("runs in the credit sweeper: a rule set on the dashboard recharges without a call", {
    timeout: 120_000,
  }, async () => {
    // A stack of its own whose sweeper (metering on starts it) runs the crossing check often.
    swept = await startTestHost({
      DMT_STRIPE_SECRET_KEY: stripe.secretKey,
      DMT_STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
      DMT_STRIPE_API_URL: stripe.url,
      DMT_STRIPE_DEPLOYMENT: DEPLOYMENT,
      DMT_STRIPE_AMOUNTS_USD: "10,25",
      DMT_METERING: "on",
      DMT_SWEEP_INTERVAL_MS: "200",
    });
    const host = swept;
    stripe.webhookUrl = `${host.url}/stripe/webhook`;
    const { token, projectId } = await buyer(host);
    const set = await api(
      token,
      "PUT",
      `/projects/${projectId}/credits/recharge`,
      { threshold_usd: "15", amount_usd: "25" },
      host,
    );
    expect(set).toMatchObject({
      status: 200,
      body: { recharge: { threshold_usd: "15", amount_usd: "25" }, saved_card: true },
    });
    const balance = async () =>
      (await api(token, "GET", `/projects/${projectId}/credits`, undefined, host)).body.balance
        .availableMicros;
    await expect.poll(balance).toBe(35_000_000);
    // The attempt's outcome is written after the grant it paid for: read again until it shows.
    const purchase = () => api(token, "GET", `/projects/${projectId}/credits/purchase`, undefined, host);
    await expect.poll(async () => (await purchase()).body.last_recharge?.outcome).toBe("succeeded");
    const offer = await purchase();
    expect(offer.body).toMatchObject({
      recharge: { threshold_usd: "15.00", amount_usd: "25.00" },
      last_recharge: { outcome: "succeeded" },
    });
    // An amount not offered is refused.
    const odd = await api(
      token,
      "PUT",
      `/projects/${projectId}/credits/recharge`,
      { threshold_usd: "5", amount_usd: "7" },
      host,
    );
    expect(odd).toMatchObject({ status: 400, body: { error: { code: "invalid_field" } } });
  });

  it("Stripe unreachable at zero: calls keep being refused, the sweeper records the attempt and recharges once Stripe answers", {
    timeout: 120_000,
  }, async () => {
    const host = swept;
    if (!host) throw new Error("the sweeper's stack starts in the case before");
    const { token, projectId } = await buyer(host);
    const { key } = await host.newKey({ projectId });
    // Spend the $10 bought: the balance is at zero.
    const credits = new DynamoPorts(host.db, tableNames(process.env), () => {
      throw new Error("no key wrapper in this test");
    }).credits;
    await expect.poll(async () => (await credits.balance(projectId)).availableMicros).toBe(10_000_000);
    const hold = await credits.hold(projectId, `spend-${projectId}`, 10_000_000, Date.now() + 60_000);
    if (!hold.ok) throw new Error("hold refused");
    await credits.settle(hold.hold, 10_000_000);
    const chat = () =>
      fetch(`${host.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "gpt-4o-mini",
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 5,
        }),
      });
    const purchase = async () =>
      (await api(token, "GET", `/projects/${projectId}/credits/purchase`, undefined, host)).body;
    stripe.unreachable = true;
    try {
      const set = await api(
        token,
        "PUT",
        `/projects/${projectId}/credits/recharge`,
        { threshold_usd: "5", amount_usd: "25" },
        host,
      );
      expect(set.status).toBe(200);
      await expect.poll(async () => (await purchase()).last_recharge?.outcome).toBe("unreachable");
      const refused = await chat();
      expect(refused.status).toBe(402);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("insufficient_credits");
      expect((await credits.balance(projectId)).availableMicros).toBe(0);
    } finally {
      stripe.unreachable = false;
    }
    await expect.poll(async () => (await credits.balance(projectId)).availableMicros).toBe(25_000_000);
    await expect.poll(async () => (await purchase()).last_recharge?.outcome).toBe("succeeded");
    // One charge for the crossing, however many checks ran while Stripe did not answer.
    const profileNow = await new DynamoPorts(host.db, tableNames(process.env), () => {
      throw new Error("no key wrapper in this test");
    }).payments.getProfile(projectId);
    const charges = stripe.calls.filter(
      (call) => call.path === "/v1/payment_intents" && call.form.customer === profileNow?.customerId,
    );
    expect(new Set(charges.map((call) => call.form.amount))).toEqual(new Set(["2500"]));
    expect((await credits.balance(projectId)).availableMicros).toBe(25_000_000);
    expect((await chat()).status).toBe(200);
  });
});
