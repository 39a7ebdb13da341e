import type { Context } from "aws-lambda";
import { DynamoBudgets } from "../adapters/dynamodb/budgets";
import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoCredits } from "../adapters/dynamodb/credits";
import type { SweepReport } from "../core/credits";
import { sweepHolds } from "../metering/budgets";
import { parseStoreConfig } from "./config";
import { lambdaTelemetry, MetricUnit } from "./telemetry";

/**
 * The credit sweeper, run every minute by an EventBridge schedule: releases the holds a crashed or
 * frozen proxy call left open once they expired, and completes settlements and grants a crash left
 * half done (docs/metering.md). Runs may overlap or repeat: the protocol is idempotent.
 */
const config = parseStoreConfig(process.env);
const telemetry = lambdaTelemetry(config, "sweeper");
const db = createDynamoClient(config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {});
const holds = sweepHolds(new DynamoCredits(db, config.tables), new DynamoBudgets(db, config.tables));

export async function handler(
  _event: unknown,
  context?: Context,
): Promise<SweepReport & { budgetHoldsSettled: number }> {
  if (context) telemetry.begin(context);
  try {
    const report = await holds.releaseExpired(Date.now());
    telemetry.metrics.add("HoldsReleased", MetricUnit.Count, report.holdsReleased);
    telemetry.metrics.add("SettlementsCompleted", MetricUnit.Count, report.settlementsCompleted);
    telemetry.metrics.add("GrantsCompleted", MetricUnit.Count, report.grantsCompleted);
    telemetry.metrics.add("BudgetHoldsSettled", MetricUnit.Count, report.budgetHoldsSettled);
    if (Object.values(report).some((count) => count > 0)) {
      telemetry.logger.info("credit sweep", { ...report });
    }
    return report;
  } finally {
    telemetry.end();
  }
}
