import type { WebhookOutcome } from "../../billing/payments";
import { errors } from "../../core/errors";
import { readBody } from "../body";
import type { RouteTable } from "../routing";

/** Stripe's events are small (a Checkout session, a charge); anything larger is not one. */
const WEBHOOK_BODY_LIMIT = 256 * 1024;
export const STRIPE_WEBHOOK_PATH = "/stripe/webhook";

/** What the route calls; absent: the deployment has no Stripe settings. */
export type StripeWebhookHandler = (
  payload: string,
  signature: string | undefined,
) => Promise<WebhookOutcome>;

/**
 * `POST /stripe/webhook`: Stripe's events. Outside `/api/*`, so no API key: the `Stripe-Signature`
 * header, checked against the raw body by the SDK, is the only credential. 200 for an event acted on
 * or ignored (Stripe stops sending it), 400 for a signature that fails, 409 while the same payment is
 * being applied by another delivery (Stripe sends it again later).
 */
export function stripeWebhookRoutes(handler: StripeWebhookHandler | undefined): RouteTable {
  return {
    [STRIPE_WEBHOOK_PATH]: {
      POST: async (c) => {
        if (!handler) throw errors.paymentsNotConfigured();
        // The signature covers the exact bytes: read raw, never re-serialised.
        const payload = new TextDecoder().decode(await readBody(c, WEBHOOK_BODY_LIMIT));
        return c.json({ received: true, ...(await handler(payload, c.req.header("stripe-signature"))) });
      },
    },
  };
}
