import type { EventPublisher } from "../core/cloudevent";
import { type CreditStore, decimalUsd, type LedgerEntry } from "../core/credits";
import { errors } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";
import {
  type BillingProfile,
  centsToMicros,
  checkOffered,
  METADATA,
  type PaymentEvent,
  type PaymentProvider,
  type PaymentRecord,
  type PaymentStore,
  type StripeSettings,
} from "../core/payments";
import type { Store } from "../core/ports";
import { creditsDebited, creditsGranted, publishAfter } from "../events/account-events";

/**
 * Credits bought through Stripe (docs/billing.md), over the ports of core/payments.ts.
 *
 * Exactly once. A payment's grant is one ledger adjustment named by the payment (the Checkout session
 * id, or the recharge's PaymentIntent id) at the payment's own time, applied by whoever claims the
 * payment's record: a delivery claims it (a lease of LEASE_MS, far above any request's life), applies
 * the adjustment unless the record says granted, marks it granted and releases it. A duplicate
 * delivered meanwhile finds it claimed and gets 409 (Stripe delivers it again later and then finds it
 * granted: 200); one delivered after finds it granted. A delivery that died holding the claim is taken
 * over when the lease runs out, and the adjustment, named as before, is found applied or applied now.
 *
 * Refunds and lost disputes take back the credits in proportion to the money returned, up to what the
 * payment granted and never below zero: what was spent already is reported, not taken.
 */
export const LEASE_MS = 5 * 60_000;

export interface PaymentsDeps {
  provider: PaymentProvider;
  payments: PaymentStore;
  credits: CreditStore;
  projects: Pick<Store, "getProject">;
  settings: Pick<StripeSettings, "amountsMicros" | "deployment">;
  /** Where `credits.granted`, `credits.debited` and `credits.recharge_failed` go; absent: no events. */
  events?: EventPublisher;
  /** Re-checks the project's alert rules after its balance rose (re-arms balance.low). */
  afterGrant?: (projectId: string) => Promise<void>;
  logger: Logger;
  clock: () => number;
}

/** What a webhook delivery did: the data API answers 200 with it. */
export type WebhookOutcome =
  | { outcome: "granted" | "duplicate"; project: string; grant: string }
  | { outcome: "reversed"; project: string; taken_usd: string; not_taken_usd: string }
  | { outcome: "ignored"; reason: string };

export class Payments {
  constructor(private readonly deps: PaymentsDeps) {}

  get amountsMicros(): readonly number[] {
    return this.deps.settings.amountsMicros;
  }

  /** A Checkout session for one of the offered amounts; the admin is sent to its URL. */
  async startCheckout(
    projectId: string,
    amountMicros: number,
    returnUrl: string,
  ): Promise<{ sessionId: string; url: string }> {
    checkOffered(this.deps.settings.amountsMicros, amountMicros, "usd");
    const profile = await this.deps.payments.getProfile(projectId);
    const back = new URL(returnUrl);
    back.searchParams.set("checkout", "done");
    const success = `${back.toString()}&session={CHECKOUT_SESSION_ID}`;
    back.searchParams.set("checkout", "cancelled");
    return this.deps.provider.createCheckout({
      projectId,
      amountMicros,
      customerId: profile?.customerId ?? null,
      successUrl: success,
      cancelUrl: back.toString(),
      deployment: this.deps.settings.deployment,
    });
  }

  /** A webhook delivery: verified by signature, then acted on once (see the class comment). */
  async handleWebhook(payload: string, signature: string | undefined): Promise<WebhookOutcome> {
    const event = this.deps.provider.readEvent(payload, signature);
    const { logger } = this.deps;
    const outcome = await this.act(event);
    logger.info("stripe webhook", { event_id: event.eventId, kind: event.kind, ...outcome });
    return outcome;
  }

  private async act(event: PaymentEvent): Promise<WebhookOutcome> {
    switch (event.kind) {
      case "ignored":
        return { outcome: "ignored", reason: `event type ${event.type} is not one dmt acts on` };
      case "checkout_completed": {
        const projectId = await this.ours(event.metadata);
        if (typeof projectId !== "string") return projectId;
        if (!event.paid) return { outcome: "ignored", reason: "the session is not paid" };
        if (event.currency !== "usd")
          return { outcome: "ignored", reason: `currency ${event.currency} is not usd` };
        if (event.paymentIntentId === null)
          return { outcome: "ignored", reason: "the session has no payment" };
        const outcome = await this.grant({
          ...newRecord(
            projectId,
            event.paymentIntentId,
            "checkout",
            event.sessionId,
            event.amountCents,
            event.at,
          ),
        });
        if (event.customerId !== null)
          await this.rememberCustomer(projectId, event.customerId, event.paymentIntentId);
        return outcome;
      }
      case "recharge_succeeded": {
        const projectId = await this.ours(event.metadata);
        if (typeof projectId !== "string") return projectId;
        return this.grant(
          newRecord(
            projectId,
            event.paymentIntentId,
            "recharge",
            event.paymentIntentId,
            event.amountCents,
            event.at,
          ),
        );
      }
      case "refunded":
        return this.reverse(event.paymentIntentId, event.metadata, event.at, (record) => {
          record.refundedCents = Math.max(record.refundedCents, event.refundedCents);
          return "stripe_refund";
        });
      case "dispute_lost":
        return this.reverse(event.paymentIntentId, {}, event.at, (record) => {
          record.disputes = { ...record.disputes, [event.disputeId]: event.amountCents };
          return "stripe_dispute";
        });
    }
  }

  /** The project the payment's metadata names, when it is this deployment's and the project exists. */
  private async ours(metadata: Record<string, string>): Promise<string | WebhookOutcome> {
    if (metadata[METADATA.deployment] !== this.deps.settings.deployment) {
      return { outcome: "ignored", reason: "the payment belongs to another deployment" };
    }
    const projectId = metadata[METADATA.project] ?? "";
    if (!(await this.deps.projects.getProject(projectId))) {
      this.deps.logger.warn("stripe payment for an unknown project", { project: projectId });
      return { outcome: "ignored", reason: "no such project" };
    }
    return projectId;
  }

  /** Grants a payment once: claim, adjust unless granted, mark granted, release. */
  async grant(init: PaymentRecord): Promise<WebhookOutcome> {
    const { payments, credits, clock } = this.deps;
    const claim = await payments.claimPayment(init, clock(), LEASE_MS);
    if (!claim.ok) throw errors.paymentInProgress();
    const record = claim.value;
    const result = { project: record.projectId, grant: record.grantRef };
    if (record.granted) {
      await payments.releasePayment(record, claim.token);
      return { outcome: "duplicate", ...result };
    }
    const adjusted = await credits.adjust(record.projectId, {
      ref: record.grantRef,
      at: record.at,
      micros: record.grantedMicros,
      source: record.kind === "checkout" ? "stripe_checkout" : "stripe_recharge",
      note: `Stripe payment ${record.paymentId}`,
    });
    await payments.releasePayment({ ...record, granted: true }, claim.token);
    if (adjusted.applied) await this.granted(adjusted.entry);
    return { outcome: "granted", ...result };
  }

  private async granted(entry: LedgerEntry): Promise<void> {
    const balance = await this.deps.credits.balance(entry.projectId);
    await publishAfter(this.deps.events, creditsGranted(entry, balance), this.deps.logger);
    await this.deps
      .afterGrant?.(entry.projectId)
      .catch((err: unknown) => this.deps.logger.warn("alert check after a payment failed", errorFields(err)));
  }

  /** The Checkout's customer becomes the project's, and the card it saved the one recharges use. */
  private async rememberCustomer(
    projectId: string,
    customerId: string,
    paymentIntentId: string,
  ): Promise<void> {
    try {
      const profile = await this.deps.payments.getProfile(projectId);
      if (profile?.customerId !== customerId)
        await this.deps.payments.updateProfile(projectId, { customerId });
      await this.deps.provider.saveDefaultMethod(customerId, paymentIntentId);
    } catch (err) {
      // The credits are granted; only a later auto-recharge needs this, and the next purchase retries it.
      this.deps.logger.warn("saving the customer's card for recharges failed", errorFields(err));
    }
  }

  /**
   * A refund or lost dispute: the payment's share of money returned becomes a debit, written ahead in
   * the record (`pending`) so a delivery that dies between the two finishes it at the next claim.
   */
  private async reverse(
    paymentIntentId: string | null,
    metadata: Record<string, string>,
    at: number,
    update: (record: PaymentRecord) => string,
  ): Promise<WebhookOutcome> {
    if (paymentIntentId === null) return { outcome: "ignored", reason: "the charge has no PaymentIntent" };
    let meta = metadata;
    if (meta[METADATA.project] === undefined)
      meta = await this.deps.provider.paymentMetadata(paymentIntentId);
    const projectId = await this.ours(meta);
    if (typeof projectId !== "string") return projectId;
    const { payments, clock } = this.deps;
    const known = await payments.getPayment(projectId, paymentIntentId);
    if (!known) return { outcome: "ignored", reason: "no credits were granted for this payment" };
    const claim = await payments.claimPayment(known, clock(), LEASE_MS);
    if (!claim.ok) throw errors.paymentInProgress();
    const record = claim.value;
    await this.finishPending(record);
    const source = update(record);
    const returned = Math.min(
      record.amountCents,
      record.refundedCents + Object.values(record.disputes).reduce((sum, cents) => sum + cents, 0),
    );
    const target = Math.floor((record.grantedMicros * returned) / Math.max(record.amountCents, 1));
    let taken = 0;
    let notTaken = 0;
    if (target > record.reversedMicros) {
      record.pending = {
        ref: `${record.paymentId}-rev-${target}`,
        at,
        micros: -(target - record.reversedMicros),
        source,
        note: `Stripe ${source === "stripe_refund" ? "refund" : "lost dispute"} of ${record.paymentId}`,
      };
      if (!(await payments.releasePayment(record, claim.token))) throw errors.paymentInProgress();
      const again = await payments.claimPayment(record, clock(), LEASE_MS);
      if (!again.ok) throw errors.paymentInProgress();
      const done = await this.finishPending(again.value);
      taken = done.taken;
      notTaken = done.notTaken;
      await payments.releasePayment(again.value, again.token);
      if (done.entry) {
        const balance = await this.deps.credits.balance(projectId);
        await publishAfter(
          this.deps.events,
          creditsDebited(done.entry, paymentIntentId, balance),
          this.deps.logger,
        );
      }
    } else {
      await payments.releasePayment(record, claim.token);
    }
    if (notTaken > 0) {
      this.deps.logger.warn("credits refunded or disputed were spent already", {
        project: projectId,
        payment: paymentIntentId,
        not_taken_usd: decimalUsd(notTaken),
        metric: "payments.reversal_uncollected",
      });
    }
    return {
      outcome: "reversed",
      project: projectId,
      taken_usd: decimalUsd(taken),
      not_taken_usd: decimalUsd(notTaken),
    };
  }

  /** Applies the record's written-ahead debit (once: the adjustment is named) and clears it. */
  private async finishPending(
    record: PaymentRecord,
  ): Promise<{ taken: number; notTaken: number; entry?: LedgerEntry }> {
    const pending = record.pending;
    if (!pending) return { taken: 0, notTaken: 0 };
    const result = await this.deps.credits.adjust(record.projectId, pending);
    const notTaken = result.entry.uncollectedMicros ?? 0;
    record.reversedMicros += -pending.micros;
    record.uncollectedMicros += notTaken;
    delete record.pending;
    // The event once: a repeat found the debit applied by an earlier delivery, which raised it.
    return { taken: -result.entry.deltaMicros, notTaken, ...(result.applied && { entry: result.entry }) };
  }

  /** The project's billing profile (customer, recharge rule, last recharge), for the dashboard and CLI. */
  profile(projectId: string): Promise<BillingProfile | undefined> {
    return this.deps.payments.getProfile(projectId);
  }
}

export function newRecord(
  projectId: string,
  paymentId: string,
  kind: PaymentRecord["kind"],
  grantRef: string,
  amountCents: number,
  at: number,
): PaymentRecord {
  return {
    projectId,
    paymentId,
    kind,
    grantRef,
    amountCents,
    grantedMicros: centsToMicros(amountCents),
    at,
    granted: false,
    refundedCents: 0,
    disputes: {},
    reversedMicros: 0,
    uncollectedMicros: 0,
  };
}
