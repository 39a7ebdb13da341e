import { composeRetention } from "../compose/retention";
import type { RetentionAudit } from "../core/retention";
import { awsHost, s3WarehouseFiles } from "./runtime/aws";
import { parseRetentionConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The retention run (lambda/compose/retention.ts), once a day by an EventBridge schedule and on
 * demand (`aws lambda invoke`, payload `{"projectId": "...", "dryRun": true}`, both optional). A run
 * that fails or times out is finished by the next: every step is idempotent.
 */
const config = parseRetentionConfig(process.env);
const aws = awsHost(process.env, "retention");
const run = composeRetention({ ...aws, ...s3WarehouseFiles(config) });

export const handler = withTelemetry(aws.telemetry, async (event: unknown): Promise<RetentionAudit> => {
  const asked = (event ?? {}) as { projectId?: unknown; dryRun?: unknown };
  return run({
    ...(typeof asked.projectId === "string" && { projectId: asked.projectId }),
    dryRun: asked.dryRun === true,
  });
});
