import { newCustomer } from "./checkout";
import { type FormObject, object, text } from "./form";
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
 * Customers, PaymentIntents, Refunds (API reference: "Create a customer", "Update a customer",
 * "Create a PaymentIntent" with `confirm` and `off_session`, "Create a refund"), and the test
 * controls for what no API call makes: a card that declines, a dispute lost.
 */
export function paymentRoutes(router: StripeRouter, standIn: StripeStandIn): void {
  router.add("POST", "/v1/customers", ({ form }) => {
    const id = standIn.newId("cus");
    const customer = newCustomer(id, form);
    standIn.objects.set(id, customer);
    return { status: 200, body: customer };
  });
  router.add("GET", "/v1/customers/:customer", ({ params }) => found(standIn, "customer", params.customer));
  router.add("POST", "/v1/customers/:customer", ({ params, form }) => {
    const customer = standIn.objects.get(params.customer ?? "");
    if (customer?.object !== "customer") return missing("customer", params.customer ?? "", "customer");
    const settings = object(form, "invoice_settings");
    const method = text(settings, "default_payment_method");
    if (method !== undefined) {
      const pm = standIn.objects.get(method);
      if (pm?.object !== "payment_method" || pm.customer !== customer.id) {
        return stripeError(
          400,
          "invalid_request_error",
          `No such PaymentMethod: '${method}'; it must be attached to the customer first.`,
          { code: "resource_missing", param: "invoice_settings[default_payment_method]" },
        );
      }
      (customer.invoice_settings as Record<string, unknown>).default_payment_method = method;
    }
    Object.assign(customer.metadata as object, object(form, "metadata"));
    return { status: 200, body: customer };
  });
  router.add("POST", "/v1/payment_intents", ({ form }) => createIntent(standIn, form));
  router.add("GET", "/v1/payment_intents/:intent", ({ params }) =>
    found(standIn, "payment_intent", params.intent),
  );
  router.add("GET", "/v1/charges/:charge", ({ params }) => found(standIn, "charge", params.charge));
  router.add("POST", "/v1/refunds", ({ form }) => refund(standIn, form));
}

function found(standIn: StripeStandIn, kind: string, id = ""): StripeReply {
  const value = standIn.objects.get(id);
  return value?.object === kind ? { status: 200, body: value } : missing(kind, id);
}

/** Makes the card of `paymentMethod` decline from now on (Stripe's test card 4000 0000 0000 0341). */
export function declineCard(standIn: StripeStandIn, paymentMethod: string): void {
  const pm = standIn.objects.get(paymentMethod);
  if (!pm) throw new Error(`No such payment method ${paymentMethod}`);
  pm.declines = true;
}

interface ChargeRequest {
  amount: number;
  currency: string;
  customer: string | null;
  paymentMethod: string;
  metadata: FormObject;
  setupFutureUsage: string | null;
}

/** A PaymentIntent confirmed at once: succeeded with its Charge, or declined (requires_payment_method). */
export function chargeCard(standIn: StripeStandIn, request: ChargeRequest): Record<string, unknown> {
  const id = standIn.newId("pi");
  const declined = standIn.objects.get(request.paymentMethod)?.declines === true;
  const intent: Record<string, unknown> = {
    id,
    object: "payment_intent",
    amount: request.amount,
    amount_received: declined ? 0 : request.amount,
    capture_method: "automatic",
    confirmation_method: "automatic",
    created: nowSeconds(),
    currency: request.currency,
    customer: request.customer,
    last_payment_error: null,
    latest_charge: null,
    livemode: false,
    metadata: request.metadata,
    payment_method: request.paymentMethod,
    payment_method_types: ["card"],
    setup_future_usage: request.setupFutureUsage,
    status: "succeeded",
  };
  if (declined) {
    Object.assign(intent, {
      status: "requires_payment_method",
      payment_method: null,
      last_payment_error: {
        type: "card_error",
        code: "card_declined",
        decline_code: "generic_decline",
        message: "Your card was declined.",
      },
    });
  } else {
    const charge = standIn.newId("ch");
    standIn.objects.set(charge, {
      id: charge,
      object: "charge",
      amount: request.amount,
      amount_captured: request.amount,
      amount_refunded: 0,
      captured: true,
      created: nowSeconds(),
      currency: request.currency,
      customer: request.customer,
      disputed: false,
      livemode: false,
      metadata: request.metadata,
      paid: true,
      payment_intent: id,
      payment_method: request.paymentMethod,
      refunded: false,
      status: "succeeded",
    });
    intent.latest_charge = charge;
  }
  standIn.objects.set(id, intent);
  return intent;
}

async function createIntent(standIn: StripeStandIn, form: FormObject): Promise<StripeReply> {
  const amount = Number(text(form, "amount"));
  if (text(form, "amount") === undefined) return requiredParam("amount");
  if (!Number.isSafeInteger(amount) || amount < 50) {
    return stripeError(400, "invalid_request_error", "Amount must be at least $0.50 usd", {
      code: "amount_too_small",
      param: "amount",
    });
  }
  const currency = text(form, "currency");
  if (currency === undefined) return requiredParam("currency");
  const customer = text(form, "customer") ?? null;
  if (customer !== null && standIn.objects.get(customer)?.object !== "customer") {
    return missing("customer", customer, "customer");
  }
  if (text(form, "confirm") !== "true") {
    return stripeError(400, "invalid_request_error", "The stand-in makes confirmed PaymentIntents only.", {
      param: "confirm",
    });
  }
  const paymentMethod = text(form, "payment_method");
  if (paymentMethod === undefined) return requiredParam("payment_method");
  const pm = standIn.objects.get(paymentMethod);
  if (pm?.object !== "payment_method") return missing("payment_method", paymentMethod, "payment_method");
  if (pm.customer !== customer) {
    return stripeError(
      400,
      "invalid_request_error",
      `The provided PaymentMethod ${paymentMethod} does not belong to the customer.`,
      { param: "payment_method" },
    );
  }
  const intent = chargeCard(standIn, {
    amount,
    currency,
    customer,
    paymentMethod,
    metadata: object(form, "metadata"),
    setupFutureUsage: null,
  });
  if (intent.status !== "succeeded") {
    await standIn.emit("payment_intent.payment_failed", intent);
    const error = intent.last_payment_error as Record<string, unknown>;
    // A declined confirmation answers 402 with the error, which names the PaymentIntent.
    return stripeError(402, "card_error", String(error.message), {
      code: error.code,
      decline_code: error.decline_code,
      payment_intent: intent,
    });
  }
  await standIn.emit("payment_intent.succeeded", intent);
  return { status: 200, body: intent };
}

async function refund(standIn: StripeStandIn, form: FormObject): Promise<StripeReply> {
  let chargeId = text(form, "charge");
  const intentId = text(form, "payment_intent");
  if (chargeId === undefined && intentId !== undefined) {
    chargeId = standIn.objects.get(intentId)?.latest_charge as string | undefined;
  }
  if (chargeId === undefined) return requiredParam("charge");
  const charge = standIn.objects.get(chargeId);
  if (charge?.object !== "charge") return missing("charge", chargeId, "charge");
  const left = Number(charge.amount) - Number(charge.amount_refunded);
  const amount = text(form, "amount") === undefined ? left : Number(text(form, "amount"));
  if (!Number.isSafeInteger(amount) || amount <= 0 || amount > left) {
    return stripeError(
      400,
      "invalid_request_error",
      `Refund amount ($${(amount / 100).toFixed(2)}) is greater than unrefunded amount on charge ($${(left / 100).toFixed(2)})`,
      { param: "amount" },
    );
  }
  charge.amount_refunded = Number(charge.amount_refunded) + amount;
  charge.refunded = charge.amount_refunded === charge.amount;
  const id = standIn.newId("re");
  const body = {
    id,
    object: "refund",
    amount,
    charge: chargeId,
    created: nowSeconds(),
    currency: charge.currency,
    metadata: object(form, "metadata"),
    payment_intent: charge.payment_intent,
    reason: text(form, "reason") ?? null,
    status: "succeeded",
  };
  standIn.objects.set(id, body);
  await standIn.emit("charge.refunded", { ...charge });
  return { status: 200, body };
}

/** The card's bank decides a dispute against the merchant: `charge.dispute.closed`, status lost. */
export async function loseDispute(
  standIn: StripeStandIn,
  chargeId: string,
  amount?: number,
): Promise<Record<string, unknown>> {
  const charge = standIn.objects.get(chargeId);
  if (charge?.object !== "charge") throw new Error(`No such charge ${chargeId}`);
  charge.disputed = true;
  const dispute = {
    id: standIn.newId("dp"),
    object: "dispute",
    amount: amount ?? charge.amount,
    charge: chargeId,
    created: nowSeconds(),
    currency: charge.currency,
    is_charge_refundable: false,
    livemode: false,
    metadata: {},
    payment_intent: charge.payment_intent,
    reason: "fraudulent",
    status: "lost",
  };
  standIn.objects.set(dispute.id, dispute);
  await standIn.emit("charge.dispute.closed", dispute);
  return dispute;
}
