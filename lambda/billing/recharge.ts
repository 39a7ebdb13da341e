import type { EventPublisher, NewEvent } from "../core/cloudevent";
import { type CreditStore, decimalUsd } from "../core/credits";
import { ApiError } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";
import {
  type BillingProfile,
  type PaymentProvider,
  type PaymentStore,
  type RechargeSettings,
  saveRechargeRule,
} from "../core/payments";
import { publishAfter } from "../events/account-events";
import { LEASE_MS, newRecord, type Payments } from "./payments";

/**
 * Auto-recharge (docs/billing.md): a project's rule says "below this, buy that much". The crossing
 * check reads the charged balance (available plus what open holds still reserve: what is left once
 * every call in flight settled at its hold); below the threshold and armed, it charges the project's
 * saved card off-session and grants on success, under the profile's lock (one recharge at a time per
 * project). Once tried, the rule is disarmed until the balance is seen at or above the threshold
 * again: one charge per crossing. A declined card raises `credits.recharge_failed` (and an error log
 * line with its metric, for the operator's alarm) and is not tried again in this crossing; Stripe not
 * answering leaves the rule armed, so the next check tries again, with the same idempotency key, so
 * a charge whose answer was lost is found instead of made twice.
 *
 * Where the check runs: the credit sweeper's run (every minute in AWS, DMT_SWEEP_INTERVAL_MS locally),
 * off every call's path; calls keep being refused at zero meanwhile, as without a rule.
 */
export interface RechargeDeps {
  payments: Payments;
  store: PaymentStore;
  credits: Pick<CreditStore, "balance">;
  provider: PaymentProvider;
  deployment: string;
  events?: EventPublisher;
  logger: Logger;
  clock: () => number;
}

export type RechargeOutcome =
  | "above"
  | "disarmed"
  | "busy"
  | "no_card"
  | "succeeded"
  | "failed"
  | "unreachable";

export class Recharges {
  constructor(private readonly deps: RechargeDeps) {}

  /** Sets (or with null removes) the project's rule, its amount one of those offered; a new rule starts armed. */
  setRule(projectId: string, rule: RechargeSettings | null): Promise<BillingProfile> {
    return saveRechargeRule(this.deps.store, projectId, rule, this.deps.payments.amountsMicros);
  }

  /** The sweeper's crossing check of every project with a rule. */
  async checkAll(): Promise<Record<RechargeOutcome, number>> {
    const counts = { above: 0, disarmed: 0, busy: 0, no_card: 0, succeeded: 0, failed: 0, unreachable: 0 };
    for await (const profile of this.deps.store.rechargeProfiles()) {
      try {
        counts[await this.check(profile)]++;
      } catch (err) {
        this.deps.logger.error("recharge check failed", { ...errorFields(err), project: profile.projectId });
      }
    }
    return counts;
  }

  async check(profile: BillingProfile): Promise<RechargeOutcome> {
    const { store, clock } = this.deps;
    const rule = profile.recharge;
    if (!rule) return "above";
    const { projectId } = profile;
    if ((await this.charged(projectId)) >= rule.thresholdMicros) {
      // Back above: the next fall is a new crossing.
      if (profile.armed === false) await store.updateProfile(projectId, { armed: true });
      return "above";
    }
    if (profile.armed === false) return "disarmed";
    if (profile.customerId === undefined) return "no_card";
    const claim = await store.claimProfile(projectId, clock(), LEASE_MS);
    if (!claim.ok) return "busy";
    const held = claim.value;
    // Another check may have recharged between the read and the lock.
    if (held.armed === false || (await this.charged(projectId)) >= rule.thresholdMicros) {
      await store.releaseProfile(projectId, claim.token, {});
      return "disarmed";
    }
    const at = clock();
    let outcome: Awaited<ReturnType<PaymentProvider["chargeSaved"]>>;
    try {
      outcome = await this.deps.provider.chargeSaved({
        projectId,
        customerId: held.customerId ?? profile.customerId,
        amountMicros: rule.amountMicros,
        deployment: this.deps.deployment,
        // One key per crossing: a retry after Stripe did not answer finds the charge it may have made.
        idempotencyKey: `dmt-recharge-${projectId}-${held.lastRecharge?.outcome === "unreachable" ? held.lastRecharge.at : at}`,
      });
    } catch (err) {
      if (!(err instanceof ApiError && err.code === "payment_provider_unreachable")) {
        await store.releaseProfile(projectId, claim.token, {});
        throw err;
      }
      const firstTry = held.lastRecharge?.outcome === "unreachable" ? held.lastRecharge.at : at;
      await store.releaseProfile(projectId, claim.token, {
        lastRecharge: { at: firstTry, outcome: "unreachable" },
      });
      this.deps.logger.warn("auto-recharge: Stripe did not answer; the next check tries again", {
        project: projectId,
      });
      return "unreachable";
    }
    if (outcome.ok) {
      await this.deps.payments.grant(
        newRecord(
          projectId,
          outcome.paymentIntentId,
          "recharge",
          outcome.paymentIntentId,
          outcome.amountCents,
          outcome.at,
        ),
      );
      await store.releaseProfile(projectId, claim.token, {
        armed: false,
        lastRecharge: { at, outcome: "succeeded", paymentId: outcome.paymentIntentId },
      });
      return "succeeded";
    }
    await store.releaseProfile(projectId, claim.token, {
      armed: false,
      lastRecharge: {
        at,
        outcome: "failed",
        message: outcome.message,
        ...(outcome.paymentIntentId !== null && { paymentId: outcome.paymentIntentId }),
      },
    });
    const balance = await this.deps.credits.balance(projectId);
    this.deps.logger.error("auto-recharge failed", {
      project: projectId,
      code: outcome.code,
      metric: "payments.recharge_failed",
    });
    await publishAfter(
      this.deps.events,
      rechargeFailed(projectId, rule, balance.availableMicros, outcome),
      this.deps.logger,
    );
    return outcome.code === "no_saved_card" ? "no_card" : "failed";
  }

  private async charged(projectId: string): Promise<number> {
    const balance = await this.deps.credits.balance(projectId);
    return balance.availableMicros + balance.heldMicros;
  }
}

/** `credits.recharge_failed`: the rule, the balance, and Stripe's reason; never a card's details. */
export function rechargeFailed(
  projectId: string,
  rule: RechargeSettings,
  availableMicros: number,
  outcome: { code: string; message: string; paymentIntentId: string | null },
): NewEvent {
  return {
    type: "credits.recharge_failed",
    projectId,
    subject: outcome.paymentIntentId ?? projectId,
    data: {
      amount_usd: decimalUsd(rule.amountMicros),
      threshold_usd: decimalUsd(rule.thresholdMicros),
      available_usd: decimalUsd(availableMicros),
      code: outcome.code,
      message: outcome.message,
      payment_intent_id: outcome.paymentIntentId,
    },
  };
}
