import { SQSClient } from "@aws-sdk/client-sqs";
import type { SQSBatchResponse } from "aws-lambda";
import { composeRetention, composeRetentionSteps } from "../compose/retention";
import type { RetentionAudit } from "../core/retention";
import { newRetentionRunId, type PlannedProject } from "../warehouse/retention";
import { awsHost, s3WarehouseFiles } from "./runtime/aws";
import { parseRetentionConfig } from "./runtime/config";
import { isQueueEvent, queueEach, workEach } from "./runtime/planned-work";
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

export const handler = withTelemetry(
  aws.telemetry,
  async (event: unknown): Promise<RetentionAudit | PlanReport | SQSBatchResponse> => {
    if (isQueueEvent(event)) {
      return workEach<PlannedProject>(event, async (project) => ({
        failed: (await steps.project(project))?.status === "failed",
      }));
    }
    const asked = (event ?? {}) as { projectId?: unknown; dryRun?: unknown };
    const options = {
      ...(typeof asked.projectId === "string" && { projectId: asked.projectId }),
      dryRun: asked.dryRun === true,
    };
    if (config.DMT_PROJECT_QUEUE_URL === undefined || options.dryRun) return run(options);
    return plan(config.DMT_PROJECT_QUEUE_URL, options);
  },
);

/** Lists the projects to do and queues one message each. */
async function plan(queueUrl: string, options: { projectId?: string }): Promise<PlanReport> {
  const runId = newRetentionRunId();
  const planned = await steps.plan(options);
  const notQueued = await queueEach(sqs, queueUrl, planned);
  if (notQueued > 0) {
    // Not queued: tomorrow's run plans them again; the metric tells how many.
    aws.logger.error("retention: projects not queued", { runId, count: notQueued });
    aws.metrics.add("ProjectsNotQueued", "Count", notQueued);
  }
  aws.logger.info("retention: projects queued", { runId, planned: planned.length });
  return { runId, planned: planned.length };
}
