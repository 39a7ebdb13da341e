import type { FormObject } from "./form";
import { object, text } from "./form";
import { chargeCard } from "./payments";
import {
  missing,
  nowSeconds,
  requiredParam,
  type StripeReply,
  type StripeRouter,
  type StripeStandIn,
  stripeError,
} from "./server";

/**
 * Checkout Sessions (API reference: "Create a Checkout Session", "Retrieve a Checkout Session") and
 * a hosted payment page standing in for checkout.stripe.com: `GET /c/pay/<id>` shows the amount and a
 * Pay button; paying completes the session as Stripe does (a Customer when asked for, a succeeded
 * PaymentIntent and Charge, the card saved for off-session use when `setup_future_usage` says so),
 * posts `checkout.session.completed`, and redirects to `success_url`.
 */
export function checkoutRoutes(router: StripeRouter, standIn: StripeStandIn): void {
  router.add("POST", "/v1/checkout/sessions", ({ form }) => createSession(standIn, form));
  router.add("GET", "/v1/checkout/sessions/:session", ({ params }) => {
    const session = standIn.objects.get(params.session ?? "");
    return session?.object === "checkout.session"
      ? { status: 200, body: session }
      : missing("checkout.session", params.session ?? "", "session");
  });
  router.add("GET", "/c/pay/:session", ({ params }) => payPage(standIn, params.session ?? ""), {
    public: true,
  });
  router.add(
    "POST",
    "/c/pay/:session",
    async ({ params }) => {
      const session = await completeCheckout(standIn, params.session ?? "");
      const target = String(session.success_url).replace("{CHECKOUT_SESSION_ID}", String(session.id));
      return { status: 303, body: "", contentType: "text/plain", headers: { location: target } };
    },
    { public: true },
  );
}

function createSession(standIn: StripeStandIn, form: FormObject): StripeReply {
  const mode = text(form, "mode");
  if (mode === undefined) return requiredParam("mode");
  if (mode !== "payment") {
    return stripeError(400, "invalid_request_error", "The stand-in supports mode=payment only.", {
      param: "mode",
    });
  }
  const successUrl = text(form, "success_url");
  if (successUrl === undefined) return requiredParam("success_url");
  const items = form.line_items;
  if (!Array.isArray(items) || items.length === 0) return requiredParam("line_items");
  let amountTotal = 0;
  let currency: string | undefined;
  for (const [i, raw] of items.entries()) {
    const item = raw as FormObject;
    const price = object(item, "price_data");
    const unitAmount = Number(text(price, "unit_amount"));
    const quantity = Number(text(item, "quantity") ?? "1");
    currency = text(price, "currency");
    if (currency === undefined) return requiredParam(`line_items[${i}][price_data][currency]`);
    if (!Number.isSafeInteger(unitAmount) || unitAmount < 0) {
      return stripeError(400, "invalid_request_error", "Invalid integer: unit_amount", {
        param: `line_items[${i}][price_data][unit_amount]`,
      });
    }
    if (text(object(price, "product_data"), "name") === undefined) {
      return requiredParam(`line_items[${i}][price_data][product_data][name]`);
    }
    amountTotal += unitAmount * quantity;
  }
  const customer = text(form, "customer") ?? null;
  if (customer !== null && standIn.objects.get(customer)?.object !== "customer") {
    return missing("customer", customer, "customer");
  }
  const id = standIn.newId("cs_test");
  const created = nowSeconds();
  const session = {
    id,
    object: "checkout.session",
    amount_subtotal: amountTotal,
    amount_total: amountTotal,
    cancel_url: text(form, "cancel_url") ?? null,
    client_reference_id: text(form, "client_reference_id") ?? null,
    created,
    currency,
    customer,
    customer_creation: customer === null ? (text(form, "customer_creation") ?? "if_required") : null,
    customer_details: null,
    customer_email: text(form, "customer_email") ?? null,
    expires_at: created + 24 * 3600,
    livemode: false,
    metadata: object(form, "metadata"),
    mode,
    // Since API version 2022-08-01 the PaymentIntent is made when the customer pays, not before.
    payment_intent: null,
    payment_intent_data: object(form, "payment_intent_data"),
    payment_method_types: ["card"],
    payment_status: "unpaid",
    status: "open",
    success_url: successUrl,
    ui_mode: "hosted",
    url: `${standIn.url}/c/pay/${id}`,
  };
  standIn.objects.set(id, session);
  // Not a field of the session object: kept apart for the hosted page.
  return { status: 200, body: withoutPrivate(session) };
}

function withoutPrivate(session: Record<string, unknown>): Record<string, unknown> {
  const { payment_intent_data: _, ...visible } = session;
  return visible;
}

/** What the customer does on the hosted page: pays with a test card that succeeds. */
export async function completeCheckout(
  standIn: StripeStandIn,
  sessionId: string,
): Promise<Record<string, unknown>> {
  const session = standIn.objects.get(sessionId);
  if (session?.object !== "checkout.session") throw new Error(`No such checkout.session: ${sessionId}`);
  if (session.status !== "open") return withoutPrivate(session);
  let customer = session.customer as string | null;
  if (customer === null && session.customer_creation === "always") {
    customer = standIn.newId("cus");
    standIn.objects.set(customer, newCustomer(customer, {}));
  }
  const data = session.payment_intent_data as FormObject;
  const saveCard = text(data, "setup_future_usage") === "off_session" && customer !== null;
  const paymentMethod = standIn.newId("pm");
  standIn.objects.set(paymentMethod, {
    id: paymentMethod,
    object: "payment_method",
    type: "card",
    card: { brand: "visa", last4: "4242", exp_month: 12, exp_year: 2034 },
    customer: saveCard ? customer : null,
  });
  const intent = chargeCard(standIn, {
    amount: Number(session.amount_total),
    currency: String(session.currency),
    customer,
    paymentMethod,
    metadata: object(data, "metadata"),
    setupFutureUsage: saveCard ? "off_session" : null,
  });
  Object.assign(session, {
    status: "complete",
    payment_status: "paid",
    payment_intent: intent.id,
    customer,
    customer_details: { email: session.customer_email ?? "buyer@example.com", name: null },
  });
  const visible = withoutPrivate(session);
  await standIn.emit("checkout.session.completed", visible);
  return visible;
}

export function newCustomer(id: string, form: FormObject): Record<string, unknown> {
  return {
    id,
    object: "customer",
    created: nowSeconds(),
    description: text(form, "description") ?? null,
    email: text(form, "email") ?? null,
    invoice_settings: { custom_fields: null, default_payment_method: null, footer: null },
    livemode: false,
    metadata: object(form, "metadata"),
    name: text(form, "name") ?? null,
  };
}

function payPage(standIn: StripeStandIn, id: string): StripeReply {
  const session = standIn.objects.get(id);
  if (session?.object !== "checkout.session")
    return { status: 404, body: "No such session", contentType: "text/plain" };
  const amount = (Number(session.amount_total) / 100).toFixed(2);
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>Checkout (test stand-in)</title></head>
<body style="font-family:sans-serif;max-width:28rem;margin:3rem auto">
<h1>Pay ${String(session.currency).toUpperCase()} ${amount}</h1>
<p>Test mode stand-in of Stripe Checkout. Card 4242 4242 4242 4242.</p>
${session.status === "open" ? `<form method="post" action="/c/pay/${id}"><button type="submit">Pay</button></form>` : "<p>This session is complete.</p>"}
</body></html>`;
  return { status: 200, body: html, contentType: "text/html; charset=utf-8" };
}
