import type { Context } from "aws-lambda";
import { DynamoPartitionLeases } from "../adapters/dynamodb/partition-leases";
import { composeCompaction } from "../compose/compaction";
import type { CompactionReport } from "../core/compaction";
import { awsHost, dynamoDeliveryLedger, s3WarehouseFiles } from "./runtime/aws";
import { parseCompactionConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The compaction run (lambda/compose/compaction.ts), once a day by an EventBridge schedule and on
 * demand (`aws lambda invoke`, payload `{"projectId": "..."}`, optional). It starts no partition in
 * its last 3 minutes; what it leaves, or a merge it was killed in, the next run finishes.
 */
const config = parseCompactionConfig(process.env);
const aws = awsHost(process.env, "compaction");
const run = composeCompaction({
  ...aws,
  ...s3WarehouseFiles(config),
  ...dynamoDeliveryLedger(config),
  leases: new DynamoPartitionLeases(aws.store.db, config.tables.warehouseLeases),
});

/** Time kept back for the partition in progress: a merge of up to 32 MB of input. */
const LAST_START_BEFORE_TIMEOUT_MS = 3 * 60_000;

export const handler = withTelemetry(
  aws.telemetry,
  async (event: unknown, context?: Context): Promise<CompactionReport> => {
    const asked = (event ?? {}) as { projectId?: unknown };
    const remaining = context?.getRemainingTimeInMillis() ?? Number.POSITIVE_INFINITY;
    return run({
      ...(typeof asked.projectId === "string" && { projectId: asked.projectId }),
      stopAt: Date.now() + remaining - LAST_START_BEFORE_TIMEOUT_MS,
    });
  },
);
