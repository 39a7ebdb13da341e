import { type Adjustment, decimalUsd, MAX_GRANT_MICROS, validateMicros } from "./credits";
import { errors } from "./errors";

/**
 * Credits bought with money, through Stripe (docs/billing.md): a Checkout purchase, an auto-recharge
 * charged off-session, and the refunds and lost disputes that take them back. Here are the ports; the
 * use case is billing/payments.ts, Stripe's SDK is adapters/stripe/, the store adapters/dynamodb/payments.ts.
 *
 * Money: Stripe counts cents of USD; credits count micro-USD (1 cent = 10,000 micros).
 */
export const MICROS_PER_CENT = 10_000;

/** What a deployment needs to sell credits; absent, dmt runs without payments and their routes say so. */
export interface StripeSettings {
  secretKey: string;
  webhookSecret: string;
  /** The amounts an admin may buy, in micros, smallest first. */
  amountsMicros: number[];
  /** Names this deployment in each payment's metadata: events of another deployment's payments are ignored. */
  deployment: string;
  /** Where the SDK connects (a test's stand-in); absent: api.stripe.com. */
  apiUrl?: string;
}

/** The Checkout session's and PaymentIntent's metadata dmt writes and reads back. */
export const METADATA = { project: "dmt_project", deployment: "dmt_deployment", kind: "dmt_kind" } as const;

/** Whole dollars, comma separated (`10,25,100`): the amounts offered on Buy credits. */
export function parseAmounts(text: string): number[] {
  const amounts = text.split(",").map((part) => part.trim());
  const micros = amounts.map((usd) => {
    if (!/^\d{1,5}$/.test(usd) || Number(usd) < 1) {
      throw errors.invalidField(
        "DMT_STRIPE_AMOUNTS_USD",
        `'${usd}' is not a whole number of dollars from 1 to 99999`,
      );
    }
    return Number(usd) * 1_000_000;
  });
  return [...new Set(micros)].sort((a, b) => a - b);
}

/** Refuses an amount the operator does not offer, naming the field and the amounts that are. */
export function checkOffered(amountsMicros: readonly number[], micros: number, field: string): void {
  if (!amountsMicros.includes(micros)) {
    throw errors.invalidField(field, `must be one of ${amountsMicros.map((m) => decimalUsd(m)).join(", ")}`);
  }
}

/**
 * Sets (or with null removes) a project's auto-recharge rule: the dashboard's and the CLI's one way.
 * The amount must be one the operator offers; a new rule starts armed.
 */
export function saveRechargeRule(
  store: Pick<PaymentStore, "updateProfile">,
  projectId: string,
  rule: RechargeSettings | null,
  amountsMicros: readonly number[],
): Promise<BillingProfile> {
  if (rule) {
    validateMicros("threshold_usd", rule.thresholdMicros, MAX_GRANT_MICROS);
    validateMicros("amount_usd", rule.amountMicros, MAX_GRANT_MICROS);
    checkOffered(amountsMicros, rule.amountMicros, "amount_usd");
  }
  return store.updateProfile(projectId, { recharge: rule, ...(rule && { armed: true }) });
}

/** One Stripe event as dmt reads it, after its signature was checked. */
export type PaymentEvent =
  | {
      kind: "checkout_completed";
      eventId: string;
      sessionId: string;
      paymentIntentId: string | null;
      customerId: string | null;
      metadata: Record<string, string>;
      amountCents: number;
      currency: string;
      paid: boolean;
      /** The event's time in ms: the grant's ledger time, the same on every retry of the event. */
      at: number;
    }
  | {
      kind: "recharge_succeeded";
      eventId: string;
      paymentIntentId: string;
      metadata: Record<string, string>;
      amountCents: number;
      currency: string;
      at: number;
    }
  | {
      kind: "refunded";
      eventId: string;
      chargeId: string;
      paymentIntentId: string | null;
      metadata: Record<string, string>;
      /** Everything refunded on the charge so far (Stripe's `amount_refunded`). */
      refundedCents: number;
      at: number;
    }
  | {
      kind: "dispute_lost";
      eventId: string;
      disputeId: string;
      chargeId: string;
      paymentIntentId: string | null;
      amountCents: number;
      at: number;
    }
  | { kind: "ignored"; eventId: string; type: string };

export interface CheckoutRequest {
  projectId: string;
  amountMicros: number;
  customerId: string | null;
  successUrl: string;
  cancelUrl: string;
  deployment: string;
}

export type ChargeOutcome =
  | { ok: true; paymentIntentId: string; amountCents: number; at: number }
  /** Declined, or no saved card: Stripe answered, and retrying now would fail again. */
  | { ok: false; code: string; message: string; paymentIntentId: string | null };

/** Stripe, through its official SDK (adapters/stripe/provider.ts). Unreachable: throws `paymentProviderUnreachable`. */
export interface PaymentProvider {
  /** Verifies `Stripe-Signature` (HMAC and a 5-minute timestamp tolerance) and reads the event; 400 when it fails. */
  readEvent(payload: string, signature: string | undefined): PaymentEvent;
  createCheckout(request: CheckoutRequest): Promise<{ sessionId: string; url: string }>;
  /** Makes the card this PaymentIntent saved the customer's default, for off-session recharges. */
  saveDefaultMethod(customerId: string, paymentIntentId: string): Promise<void>;
  /** Charges the customer's default card off-session; `idempotencyKey` makes a retried request one charge. */
  chargeSaved(input: {
    projectId: string;
    customerId: string;
    amountMicros: number;
    deployment: string;
    idempotencyKey: string;
  }): Promise<ChargeOutcome>;
  /** The metadata of the charge's PaymentIntent (a dispute names only the charge). */
  paymentMetadata(paymentIntentId: string): Promise<Record<string, string>>;
}

/** One payment that granted credits, keyed by its PaymentIntent. */
export interface PaymentRecord {
  projectId: string;
  paymentId: string;
  kind: "checkout" | "recharge";
  /** The grant's ledger ref: the Checkout session id, or the recharge's PaymentIntent id. */
  grantRef: string;
  amountCents: number;
  grantedMicros: number;
  /** The grant's ledger time. */
  at: number;
  granted: boolean;
  /** Refunded so far, in cents (Stripe's cumulative `amount_refunded`). */
  refundedCents: number;
  /** Lost disputes: id -> cents. */
  disputes: Record<string, number>;
  /** Credits taken back so far, and what could not be (already spent). */
  reversedMicros: number;
  uncollectedMicros: number;
  /** A reversal written ahead of its ledger adjustment, finished by whoever claims the payment next. */
  pending?: Adjustment;
}

/** A project's standing with Stripe: its customer, the card recharges use, the recharge rule and state. */
export interface BillingProfile {
  projectId: string;
  customerId?: string;
  recharge?: RechargeSettings;
  /** False once a recharge was tried for the current crossing; true again when the balance is back above. */
  armed?: boolean;
  lastRecharge?: {
    at: number;
    outcome: "succeeded" | "failed" | "unreachable";
    message?: string;
    paymentId?: string;
  };
}

export interface RechargeSettings {
  thresholdMicros: number;
  amountMicros: number;
}

export type Claim<T> = { ok: true; value: T; token: string } | { ok: false };

/** Payments and billing profiles (the `payments` table). Claims are leases: one holder at a time. */
export interface PaymentStore {
  /** Takes the payment (created from `init` when new) for `leaseMs`; `ok: false` while another holds it. */
  claimPayment(init: PaymentRecord, now: number, leaseMs: number): Promise<Claim<PaymentRecord>>;
  /** Stores `record` and ends the claim, if `token` still holds it; false when it was taken over. */
  releasePayment(record: PaymentRecord, token: string): Promise<boolean>;
  getPayment(projectId: string, paymentId: string): Promise<PaymentRecord | undefined>;
  listPayments(projectId: string): Promise<PaymentRecord[]>;
  getProfile(projectId: string): Promise<BillingProfile | undefined>;
  /** Sets fields of the profile (created when absent); `null` removes one. */
  updateProfile(
    projectId: string,
    fields: { customerId?: string; recharge?: RechargeSettings | null; armed?: boolean },
  ): Promise<BillingProfile>;
  /** Takes the profile's recharge lock: one recharge at a time per project. */
  claimProfile(projectId: string, now: number, leaseMs: number): Promise<Claim<BillingProfile>>;
  /** Stores the recharge's outcome and arming, and ends the lock if `token` still holds it. */
  releaseProfile(
    projectId: string,
    token: string,
    fields: { armed?: boolean; lastRecharge?: BillingProfile["lastRecharge"] },
  ): Promise<boolean>;
  /** Projects with a recharge rule (the sweeper's crossing check). */
  rechargeProfiles(): AsyncIterable<BillingProfile>;
}

/** Credits for cents paid. */
export function centsToMicros(cents: number): number {
  return cents * MICROS_PER_CENT;
}
