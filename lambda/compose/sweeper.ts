import type { SweepReport } from "../core/credits";
import type { Infrastructure } from "./infrastructure";

/**
 * The credit sweeper's one run: releases the holds a crashed or frozen proxy call left open once they
 * expired, and completes settlements and grants a crash left half done (docs/metering.md). Runs may
 * overlap or repeat: the protocol is idempotent. AWS runs it every minute on a schedule, the local
 * stack on a timer.
 */
export function composeSweeper(
  infra: Pick<Infrastructure, "store" | "clock" | "logger" | "metrics">,
): () => Promise<SweepReport> {
  const { store, clock, logger, metrics } = infra;
  return async () => {
    const report = await store.credits.releaseExpired(clock());
    metrics.add("HoldsReleased", "Count", report.holdsReleased);
    metrics.add("SettlementsCompleted", "Count", report.settlementsCompleted);
    metrics.add("GrantsCompleted", "Count", report.grantsCompleted);
    if (report.holdsReleased + report.settlementsCompleted + report.grantsCompleted > 0) {
      logger.info("credit sweep", { ...report });
    }
    return report;
  };
}
