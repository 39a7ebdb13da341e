import Stripe from "stripe";

/** An event as Stripe posts it to a webhook endpoint (a snapshot event). */
export interface StripeEvent {
  id: string;
  object: "event";
  api_version: string;
  created: number;
  data: { object: Record<string, unknown>; previous_attributes?: Record<string, unknown> };
  livemode: boolean;
  pending_webhooks: number;
  request: { id: string | null; idempotency_key: string | null };
  type: string;
}

const signer = new Stripe("sk_test_signer").webhooks;

/**
 * The `Stripe-Signature` header Stripe sends with `payload` (`t=<seconds>,v1=<HMAC-SHA256>`), made by
 * the official SDK's own test signer. `timestamp` in seconds, default now: an old one makes a
 * delivery the SDK's check refuses as a replay.
 */
export function signedHeader(payload: string, secret: string, timestamp?: number): string {
  return signer.generateTestHeaderString({
    payload,
    secret,
    ...(timestamp !== undefined ? { timestamp } : {}),
  });
}
