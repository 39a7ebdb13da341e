import { SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { Context, SQSBatchResponse, SQSEvent } from "aws-lambda";
import { DynamoPartitionLeases } from "../adapters/dynamodb/partition-leases";
import { composeCompaction, composeCompactionSteps } from "../compose/compaction";
import type { CompactionReport } from "../core/compaction";
import { newRunId, type PlannedPartition } from "../warehouse/compaction";
import { awsHost, dynamoDeliveryLedger, s3WarehouseFiles } from "./runtime/aws";
import { parseCompactionConfig } from "./runtime/config";
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

const isQueueEvent = (event: unknown): event is SQSEvent =>
  Array.isArray((event as { Records?: unknown } | null)?.Records);

export const handler = withTelemetry(
  aws.telemetry,
  async (event: unknown, context?: Context): Promise<CompactionReport | PlanReport | SQSBatchResponse> => {
    if (isQueueEvent(event)) return work(event);
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

/** Lists the partitions to do and queues one message each, ten to a request. */
async function plan(queueUrl: string, options: { projectId?: string; stopAt: number }): Promise<PlanReport> {
  const runId = newRunId();
  const planned = await steps.plan(options);
  for (let start = 0; start < planned.length; start += 10) {
    const batch = planned.slice(start, start + 10);
    const sent = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((partition, i) => ({ Id: String(i), MessageBody: JSON.stringify(partition) })),
      }),
    );
    if (sent.Failed && sent.Failed.length > 0) {
      // Not queued: tomorrow's run plans it again; the metric below tells how many.
      aws.logger.error("compaction: partitions not queued", { runId, count: sent.Failed.length });
      aws.metrics.add("PartitionsNotQueued", "Count", sent.Failed.length);
    }
  }
  aws.logger.info("compaction: partitions queued", { runId, planned: planned.length });
  return { runId, planned: planned.length };
}

/** One partition per message; a failed merge is retried (the queue's redrive counts the tries). */
async function work(event: SQSEvent): Promise<SQSBatchResponse> {
  const batchItemFailures: SQSBatchResponse["batchItemFailures"] = [];
  for (const record of event.Records) {
    const partition = JSON.parse(record.body) as PlannedPartition;
    // A holder per delivery: a message delivered twice at once cannot share a lease.
    const done = await steps.partition(newRunId(), partition);
    if (done?.outcome === "failed") batchItemFailures.push({ itemIdentifier: record.messageId });
  }
  return { batchItemFailures };
}
