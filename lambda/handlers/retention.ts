import { SendMessageBatchCommand, SQSClient } from "@aws-sdk/client-sqs";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { composeRetention, composeRetentionSteps } from "../compose/retention";
import type { RetentionAudit } from "../core/retention";
import { newRetentionRunId, type PlannedProject } from "../warehouse/retention";
import { awsHost, s3WarehouseFiles } from "./runtime/aws";
import { parseRetentionConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * Retention (lambda/compose/retention.ts), fanned out (lib/retention.ts), as compaction is. Once a day
 * an EventBridge schedule invokes it to plan: it lists the projects with a limit and puts one message
 * per project on the project queue, then ends. The same function takes the queue's messages, one
 * project an invocation, each leaving an audit entry of its own: a message whose run failed returns to
 * the queue, and after three tries goes to the dead-letter queue, which an alarm watches (projects
 * left undone). Every step is idempotent, so a retry or a message delivered twice does no harm.
 * Without a queue (`DMT_PROJECT_QUEUE_URL` unset), or for a dry run (whose answer is the report), one
 * invocation does every project itself, as locally. On demand: `aws lambda invoke`, payload
 * `{"projectId": "...", "dryRun": true}` (both optional).
 */
const config = parseRetentionConfig(process.env);
const aws = awsHost(process.env, "retention");
const infra = { ...aws, ...s3WarehouseFiles(config) };
const run = composeRetention(infra);
const steps = composeRetentionSteps(infra);
const sqs = new SQSClient(config.DMT_SQS_ENDPOINT ? { endpoint: config.DMT_SQS_ENDPOINT } : {});

export interface PlanReport {
  runId: string;
  /** Projects put on the queue. */
  planned: number;
}

const isQueueEvent = (event: unknown): event is SQSEvent =>
  Array.isArray((event as { Records?: unknown } | null)?.Records);

export const handler = withTelemetry(
  aws.telemetry,
  async (event: unknown): Promise<RetentionAudit | PlanReport | SQSBatchResponse> => {
    if (isQueueEvent(event)) return work(event);
    const asked = (event ?? {}) as { projectId?: unknown; dryRun?: unknown };
    const options = {
      ...(typeof asked.projectId === "string" && { projectId: asked.projectId }),
      dryRun: asked.dryRun === true,
    };
    if (config.DMT_PROJECT_QUEUE_URL === undefined || options.dryRun) return run(options);
    return plan(config.DMT_PROJECT_QUEUE_URL, options);
  },
);

/** Lists the projects to do and queues one message each, ten to a request. */
async function plan(queueUrl: string, options: { projectId?: string }): Promise<PlanReport> {
  const runId = newRetentionRunId();
  const planned = await steps.plan(options);
  for (let start = 0; start < planned.length; start += 10) {
    const batch = planned.slice(start, start + 10);
    const sent = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((project, i) => ({ Id: String(i), MessageBody: JSON.stringify(project) })),
      }),
    );
    if (sent.Failed && sent.Failed.length > 0) {
      // Not queued: tomorrow's run plans it again; the metric below tells how many.
      aws.logger.error("retention: projects not queued", { runId, count: sent.Failed.length });
      aws.metrics.add("ProjectsNotQueued", "Count", sent.Failed.length);
    }
  }
  aws.logger.info("retention: projects queued", { runId, planned: planned.length });
  return { runId, planned: planned.length };
}

/** One project per message; a failed run is retried (the queue's redrive counts the tries). */
async function work(event: SQSEvent): Promise<SQSBatchResponse> {
  const batchItemFailures: SQSBatchResponse["batchItemFailures"] = [];
  for (const record of event.Records) {
    const audit = await steps.project(JSON.parse(record.body) as PlannedProject);
    if (audit?.status === "failed") batchItemFailures.push({ itemIdentifier: record.messageId });
  }
  return { batchItemFailures };
}
