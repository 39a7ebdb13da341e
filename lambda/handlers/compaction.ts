import { SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse } from "aws-lambda";
import { DynamoPartitionLeases } from "../adapters/dynamodb/partition-leases";
import { composeCompaction, composeCompactionSteps } from "../compose/compaction";
import type { CompactionReport } from "../core/compaction";
import { newRunId, type PlannedPartition } from "../warehouse/compaction";
import { awsHost, dynamoDeliveryLedger, s3WarehouseFiles } from "./runtime/aws";
import { parseCompactionConfig } from "./runtime/config";
import { isQueueEvent, queueEach, workEach } from "./runtime/planned-work";
import { withTelemetry } from "./runtime/telemetry";

/**
 * Compaction (lambda/compose/compaction.ts), fanned out (lib/compaction.ts). Once a day an EventBridge
 * schedule invokes it to plan: it lists the partitions to do and puts one message per partition on the
 * partition queue, then ends. The same function takes the queue's messages, one partition an
 * invocation, under that partition's lease: a message whose merge failed returns to the queue, and
 * after three tries goes to the dead-letter queue, which an alarm watches (partitions left undone).
 * Without a queue (`DMT_PARTITION_QUEUE_URL` unset) a run does every partition itself, as locally. On
 * demand: `aws lambda invoke`, payload `{"projectId": "..."}` (optional).
 */
const config = parseCompactionConfig(process.env);
const aws = awsHost(process.env, "compaction");
const infra = {
  ...aws,
  ...s3WarehouseFiles(config),
  ...dynamoDeliveryLedger(config),
  leases: new DynamoPartitionLeases(aws.store.db, config.tables.warehouseLeases),
};
const run = composeCompaction(infra);
const steps = composeCompactionSteps(infra);
const sqs = new SQSClient(config.DMT_SQS_ENDPOINT ? { endpoint: config.DMT_SQS_ENDPOINT } : {});

/** Time kept back for the partition in progress: a merge of up to 32 MB of input. */
const LAST_START_BEFORE_TIMEOUT_MS = 3 * 60_000;

export interface PlanReport {
  runId: string;
  /** Partitions put on the queue. */
  planned: number;
}

export const handler = withTelemetry(
  aws.telemetry,
  async (event: unknown, context?: Context): Promise<CompactionReport | PlanReport | SQSBatchResponse> => {
    if (isQueueEvent(event)) {
      // A holder per delivery: a message delivered twice at once cannot share a lease.
      return workEach<PlannedPartition>(event, async (partition) => ({
        failed: (await steps.partition(newRunId(), partition))?.outcome === "failed",
      }));
    }
    const asked = (event ?? {}) as { projectId?: unknown };
    const remaining = context?.getRemainingTimeInMillis() ?? Number.POSITIVE_INFINITY;
    const options = {
      ...(typeof asked.projectId === "string" && { projectId: asked.projectId }),
      stopAt: Date.now() + remaining - LAST_START_BEFORE_TIMEOUT_MS,
    };
    if (config.DMT_PARTITION_QUEUE_URL === undefined) return run(options);
    return plan(config.DMT_PARTITION_QUEUE_URL, options);
  },
);

/** Lists the partitions to do and queues one message each. */
async function plan(queueUrl: string, options: { projectId?: string; stopAt: number }): Promise<PlanReport> {
  const runId = newRunId();
  const planned = await steps.plan(options);
  const notQueued = await queueEach(sqs, queueUrl, planned);
  if (notQueued > 0) {
    // Not queued: tomorrow's run plans them again; the metric tells how many.
    aws.logger.error("compaction: partitions not queued", { runId, count: notQueued });
    aws.metrics.add("PartitionsNotQueued", "Count", notQueued);
  }
  aws.logger.info("compaction: partitions queued", { runId, planned: planned.length });
  return { runId, planned: planned.length };
}
