import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import Stripe from "stripe";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  completeCheckout,
  declineCard,
  loseDispute,
  type StripeStandIn,
  startStripe,
} from "../support/stripe";

// The stand-in answers the official SDK as Stripe's API reference says, so dmt's tests can rely on it.
describe("Stripe stand-in", () => {
  let stripe: StripeStandIn;
  let client: Stripe;
  const received: { body: string; signature: string }[] = [];
  let hooks: ReturnType<typeof createServer>;

  beforeAll(async () => {
    hooks = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString("utf8");
      });
      req.on("end", () => {
        received.push({ body, signature: String(req.headers["stripe-signature"]) });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => hooks.listen(0, "127.0.0.1", r));
    stripe = await startStripe({ webhookUrl: `http://127.0.0.1:${(hooks.address() as AddressInfo).port}/` });
    client = stripe.client();
  });
  afterAll(async () => {
    await stripe.close();
    hooks.close();
  });

  it("creates a Checkout Session, completes it on the hosted page, and signs the event as Stripe does", async () => {
    const session = await client.checkout.sessions.create({
      mode: "payment",
      success_url: "https://dmt.example/credits?paid={CHECKOUT_SESSION_ID}",
      customer_creation: "always",
      line_items: [
        {
          quantity: 1,
          price_data: { currency: "usd", unit_amount: 2500, product_data: { name: "Credits" } },
        },
      ],
      metadata: { project_id: "demo" },
      payment_intent_data: { setup_future_usage: "off_session" },
    });
    expect(session).toMatchObject({
      object: "checkout.session",
      status: "open",
      amount_total: 2500,
      payment_intent: null,
    });
    expect(session.metadata).toEqual({ project_id: "demo" });
    const page = await fetch(session.url ?? "");
    expect(await page.text()).toContain("USD 25.00");
    const paid = await fetch(session.url ?? "", { method: "POST", redirect: "manual" });
    expect(paid.status).toBe(303);
    expect(paid.headers.get("location")).toBe(`https://dmt.example/credits?paid=${session.id}`);

    const delivery = received.at(-1);
    if (!delivery) throw new Error("no delivery");
    const event = client.webhooks.constructEvent(delivery.body, delivery.signature, stripe.webhookSecret);
    expect(event.type).toBe("checkout.session.completed");
    const completed = event.data.object as Stripe.Checkout.Session;
    expect(completed).toMatchObject({ id: session.id, status: "complete", payment_status: "paid" });
    expect(() => client.webhooks.constructEvent(delivery.body, delivery.signature, "whsec_other")).toThrow(
      Stripe.errors.StripeSignatureVerificationError,
    );
    expect((await client.checkout.sessions.retrieve(session.id)).status).toBe("complete");
  });

  it("charges a saved card off-session, declines with a card error, refunds and loses disputes", async () => {
    const session = await client.checkout.sessions.create({
      mode: "payment",
      success_url: "https://dmt.example/ok",
      customer_creation: "always",
      line_items: [
        {
          quantity: 1,
          price_data: { currency: "usd", unit_amount: 1000, product_data: { name: "Credits" } },
        },
      ],
      payment_intent_data: { setup_future_usage: "off_session" },
    });
    const done = await completeCheckout(stripe, session.id);
    const intent = await client.paymentIntents.retrieve(String(done.payment_intent));
    const customer = String(done.customer);
    const method = String(intent.payment_method);
    await client.customers.update(customer, { invoice_settings: { default_payment_method: method } });
    const found = (await client.customers.retrieve(customer)) as Stripe.Customer;
    expect(found.invoice_settings.default_payment_method).toBe(method);

    const recharge = await client.paymentIntents.create({
      amount: 2000,
      currency: "usd",
      customer,
      payment_method: method,
      off_session: true,
      confirm: true,
    });
    expect(recharge.status).toBe("succeeded");

    declineCard(stripe, method);
    const declined = await client.paymentIntents
      .create({
        amount: 2000,
        currency: "usd",
        customer,
        payment_method: method,
        off_session: true,
        confirm: true,
      })
      .catch((err: unknown) => err);
    expect(declined).toBeInstanceOf(Stripe.errors.StripeCardError);
    expect((declined as Stripe.errors.StripeCardError).code).toBe("card_declined");

    const refund = await client.refunds.create({ payment_intent: recharge.id, amount: 500 });
    expect(refund).toMatchObject({ object: "refund", amount: 500, status: "succeeded" });
    expect(stripe.events.at(-1)?.event.type).toBe("charge.refunded");
    expect(stripe.events.at(-1)?.event.data.object).toMatchObject({ amount: 2000, amount_refunded: 500 });
    await loseDispute(stripe, String(recharge.latest_charge));
    expect(stripe.events.at(-1)?.event).toMatchObject({
      type: "charge.dispute.closed",
      data: { object: { status: "lost" } },
    });
  });

  it("refuses a wrong key, replays an idempotency key, 404s unknown objects, and can be unreachable", async () => {
    const wrong = new Stripe("sk_test_wrong", { ...stripe.sdkSettings, maxNetworkRetries: 0 });
    await expect(wrong.customers.create({})).rejects.toBeInstanceOf(Stripe.errors.StripeAuthenticationError);
    const first = await client.customers.create({ email: "a@example.com" }, { idempotencyKey: "k1" });
    const again = await client.customers.create({ email: "a@example.com" }, { idempotencyKey: "k1" });
    expect(again.id).toBe(first.id);
    await expect(client.customers.retrieve("cus_missing")).rejects.toMatchObject({
      code: "resource_missing",
      statusCode: 404,
    });
    stripe.unreachable = true;
    try {
      await expect(client.customers.create({})).rejects.toBeInstanceOf(Stripe.errors.StripeConnectionError);
    } finally {
      stripe.unreachable = false;
    }
  });
});
