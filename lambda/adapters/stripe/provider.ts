import Stripe from "stripe";
import { errors } from "../../core/errors";
import {
  type ChargeOutcome,
  type CheckoutRequest,
  METADATA,
  MICROS_PER_CENT,
  type PaymentEvent,
  type PaymentProvider,
  type StripeSettings,
} from "../../core/payments";

/** A Stripe call that has not answered by then failed (the SDK retries one network error once). */
const TIMEOUT_MS = 20_000;

/**
 * Stripe through its official SDK (stripe-node, which pins API version 2026-11-18.endive). The
 * webhook check is the SDK's own (`webhooks.constructEvent`: HMAC-SHA256 of the raw body under the
 * endpoint's secret, refused when the timestamp is over 5 minutes old). `apiUrl` points the SDK's own
 * host, port and protocol settings elsewhere (the tests' stand-in).
 */
export class StripeProvider implements PaymentProvider {
  private readonly stripe: Stripe;

  constructor(private readonly settings: Pick<StripeSettings, "secretKey" | "webhookSecret" | "apiUrl">) {
    const api = settings.apiUrl === undefined ? undefined : new URL(settings.apiUrl);
    this.stripe = new Stripe(settings.secretKey, {
      maxNetworkRetries: 1,
      timeout: TIMEOUT_MS,
      ...(api && {
        host: api.hostname,
        port: api.port || (api.protocol === "https:" ? 443 : 80),
        protocol: api.protocol === "https:" ? "https" : "http",
      }),
    });
  }

  readEvent(payload: string, signature: string | undefined): PaymentEvent {
    if (signature === undefined || signature === "") throw errors.invalidSignature("the header is missing.");
    let event: Stripe.Event;
    try {
      event = this.stripe.webhooks.constructEvent(payload, signature, this.settings.webhookSecret);
    } catch (err) {
      if (!(err instanceof Stripe.errors.StripeSignatureVerificationError)) throw err;
      // The SDK's messages name no secret; ours say which check failed.
      throw errors.invalidSignature(
        /timestamp/i.test(err.message)
          ? "its timestamp is more than 5 minutes old (a replayed delivery?)."
          : "it does not match the payload under this deployment's webhook secret.",
      );
    }
    return readEvent(event);
  }

  async createCheckout(request: CheckoutRequest): Promise<{ sessionId: string; url: string }> {
    const metadata = {
      [METADATA.project]: request.projectId,
      [METADATA.deployment]: request.deployment,
      [METADATA.kind]: "checkout",
    };
    const session = await this.call(() =>
      this.stripe.checkout.sessions.create({
        mode: "payment",
        client_reference_id: request.projectId,
        line_items: [
          {
            quantity: 1,
            price_data: {
              currency: "usd",
              unit_amount: request.amountMicros / MICROS_PER_CENT,
              product_data: { name: `dmt credits for ${request.projectId}` },
            },
          },
        ],
        metadata,
        // The card is saved for auto-recharge, and the charge carries the project (refunds, disputes).
        payment_intent_data: { metadata, setup_future_usage: "off_session" },
        ...(request.customerId !== null ? { customer: request.customerId } : { customer_creation: "always" }),
        success_url: request.successUrl,
        cancel_url: request.cancelUrl,
      }),
    );
    if (!session.url) throw new Error(`Checkout session ${session.id} has no URL.`);
    return { sessionId: session.id, url: session.url };
  }

  async saveDefaultMethod(customerId: string, paymentIntentId: string): Promise<void> {
    const intent = await this.call(() => this.stripe.paymentIntents.retrieve(paymentIntentId));
    const method =
      typeof intent.payment_method === "string" ? intent.payment_method : intent.payment_method?.id;
    if (!method) return;
    await this.call(() =>
      this.stripe.customers.update(customerId, { invoice_settings: { default_payment_method: method } }),
    );
  }

  async chargeSaved(input: {
    projectId: string;
    customerId: string;
    amountMicros: number;
    deployment: string;
    idempotencyKey: string;
  }): Promise<ChargeOutcome> {
    const customer = await this.call(() => this.stripe.customers.retrieve(input.customerId));
    const method = customer.deleted ? undefined : customer.invoice_settings.default_payment_method;
    const methodId = typeof method === "string" ? method : method?.id;
    if (!methodId) {
      return {
        ok: false,
        code: "no_saved_card",
        message: "The customer has no default card.",
        paymentIntentId: null,
      };
    }
    const metadata = {
      [METADATA.project]: input.projectId,
      [METADATA.deployment]: input.deployment,
      [METADATA.kind]: "recharge",
    };
    try {
      const intent = await this.call(() =>
        this.stripe.paymentIntents.create(
          {
            amount: input.amountMicros / MICROS_PER_CENT,
            currency: "usd",
            customer: input.customerId,
            payment_method: methodId,
            off_session: true,
            confirm: true,
            metadata,
            description: `dmt auto-recharge for ${input.projectId}`,
          },
          { idempotencyKey: input.idempotencyKey },
        ),
      );
      if (intent.status !== "succeeded") {
        return {
          ok: false,
          code: intent.status,
          message: `The charge is ${intent.status}.`,
          paymentIntentId: intent.id,
        };
      }
      return { ok: true, paymentIntentId: intent.id, amountCents: intent.amount, at: intent.created * 1000 };
    } catch (err) {
      if (err instanceof Stripe.errors.StripeCardError) {
        const intent = (err.raw as { payment_intent?: { id?: string } }).payment_intent;
        return {
          ok: false,
          code: err.decline_code ?? err.code ?? "card_error",
          message: err.message,
          paymentIntentId: intent?.id ?? null,
        };
      }
      throw err;
    }
  }

  async paymentMetadata(paymentIntentId: string): Promise<Record<string, string>> {
    return (await this.call(() => this.stripe.paymentIntents.retrieve(paymentIntentId))).metadata;
  }

  /** Stripe not answering (network, timeout, 5xx, rate limit) becomes 502; its refusals stay errors. */
  private async call<T>(request: () => Promise<T>): Promise<T> {
    try {
      return await request();
    } catch (err) {
      if (
        err instanceof Stripe.errors.StripeConnectionError ||
        err instanceof Stripe.errors.StripeAPIError ||
        err instanceof Stripe.errors.StripeRateLimitError
      ) {
        throw errors.paymentProviderUnreachable();
      }
      throw err;
    }
  }
}

/** The events dmt acts on, read from Stripe's objects; every other type is ignored. */
function readEvent(event: Stripe.Event): PaymentEvent {
  const at = event.created * 1000;
  switch (event.type) {
    case "checkout.session.completed": {
      const session = event.data.object;
      return {
        kind: "checkout_completed",
        eventId: event.id,
        sessionId: session.id,
        paymentIntentId: idOf(session.payment_intent),
        customerId: idOf(session.customer),
        metadata: session.metadata ?? {},
        amountCents: session.amount_total ?? 0,
        currency: session.currency ?? "",
        paid: session.payment_status === "paid",
        at,
      };
    }
    case "payment_intent.succeeded": {
      const intent = event.data.object;
      if (intent.metadata[METADATA.kind] !== "recharge") break;
      return {
        kind: "recharge_succeeded",
        eventId: event.id,
        paymentIntentId: intent.id,
        metadata: intent.metadata,
        amountCents: intent.amount_received,
        currency: intent.currency,
        at: intent.created * 1000,
      };
    }
    case "charge.refunded": {
      const charge = event.data.object;
      return {
        kind: "refunded",
        eventId: event.id,
        chargeId: charge.id,
        paymentIntentId: idOf(charge.payment_intent),
        metadata: charge.metadata,
        refundedCents: charge.amount_refunded,
        at,
      };
    }
    case "charge.dispute.closed": {
      const dispute = event.data.object;
      if (dispute.status !== "lost") break;
      return {
        kind: "dispute_lost",
        eventId: event.id,
        disputeId: dispute.id,
        chargeId: idOf(dispute.charge) ?? "",
        paymentIntentId: idOf(dispute.payment_intent),
        amountCents: dispute.amount,
        at,
      };
    }
  }
  return { kind: "ignored", eventId: event.id, type: event.type };
}

function idOf(value: string | { id: string } | null | undefined): string | null {
  return value == null ? null : typeof value === "string" ? value : value.id;
}
