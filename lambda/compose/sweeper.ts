import type { SweepReport } from "../core/credits";
import { sweepHolds } from "../metering/budgets";
import type { Infrastructure } from "./infrastructure";
import type { Billing } from "./payments";

/** What one sweep did: the credits' report and the budget holds it settled. */
export type HoldsSweepReport = SweepReport & { budgetHoldsSettled: number };

/**
 * The credit sweeper's one run: releases the credit holds a crashed or frozen proxy call left open once
 * they expired, settles its expired budget holds at the charges noted on them, and completes settlements
 * and grants a crash left half done (docs/metering.md). Runs may overlap or repeat: the protocol is
 * idempotent. AWS runs it every minute on a schedule, the embedded host on a timer.
 */
export function composeSweeper(
  infra: Pick<Infrastructure, "store" | "clock" | "logger" | "metrics">,
  /** Auto-recharge's crossing check runs after each sweep (docs/billing.md); absent: no payments. */
  billing?: Pick<Billing, "recharges">,
): () => Promise<HoldsSweepReport> {
  const { store, clock, logger, metrics } = infra;
  const holds = sweepHolds(store.credits, store.budgets);
  return async () => {
    const report = await holds.releaseExpired(clock());
    metrics.add("HoldsReleased", "Count", report.holdsReleased);
    metrics.add("SettlementsCompleted", "Count", report.settlementsCompleted);
    metrics.add("GrantsCompleted", "Count", report.grantsCompleted);
    metrics.add("BudgetHoldsSettled", "Count", report.budgetHoldsSettled);
    if (Object.values(report).some((count) => count > 0)) {
      logger.info("credit sweep", { ...report });
    }
    if (billing) {
      const recharged = await billing.recharges.checkAll();
      metrics.add("RechargesFailed", "Count", recharged.failed);
      if (recharged.succeeded + recharged.failed + recharged.unreachable > 0)
        logger.info("recharge check", recharged);
    }
    return report;
  };
}
