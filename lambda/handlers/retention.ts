import type { Context } from "aws-lambda";
import * as z from "zod/mini";
import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoInteractionIndex } from "../adapters/dynamodb/interactions";
import { DynamoStore } from "../adapters/dynamodb/store";
import { S3ObjectStore } from "../adapters/objectstore/s3";
import type { RetentionAudit } from "../core/retention";
import { S3WarehouseFiles } from "../deletion/files-s3";
import { decodeRecords } from "../deletion/parquet-read";
import { encodeRecords } from "../warehouse/parquet";
import { runRetention } from "../warehouse/retention";
import { parseStoreConfig } from "./config";
import { lambdaTelemetry, MetricUnit } from "./telemetry";
import { createS3Client } from "./warehouse";

/**
 * The retention run (lambda/warehouse/retention.ts), once a day by an EventBridge schedule and on
 * demand (`aws lambda invoke`, payload `{"projectId": "...", "dryRun": true}` both optional). A run
 * that fails or times out is finished by the next: every step is idempotent.
 */
const config = parseStoreConfig(process.env);
const bucket = z.object({
  DMT_WAREHOUSE_BUCKET: z.string().check(z.minLength(1)),
  DMT_S3_ENDPOINT: z.optional(z.url()),
});
const { DMT_WAREHOUSE_BUCKET, DMT_S3_ENDPOINT } = bucket.parse(process.env);
const telemetry = lambdaTelemetry(config, "retention");
const db = createDynamoClient(config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {});
const s3 = createS3Client(DMT_S3_ENDPOINT);

export async function handler(event: unknown, context?: Context): Promise<RetentionAudit> {
  if (context) telemetry.begin(context);
  const asked = (event ?? {}) as { projectId?: unknown; dryRun?: unknown };
  try {
    const audit = await runRetention(
      {
        projects: new DynamoStore(db, config.tables),
        objects: new S3ObjectStore(s3, DMT_WAREHOUSE_BUCKET),
        files: new S3WarehouseFiles(s3, DMT_WAREHOUSE_BUCKET),
        codec: { decode: decodeRecords, encode: encodeRecords },
        index: new DynamoInteractionIndex(db, config.tables),
        logger: telemetry.logger,
        clock: Date.now,
      },
      {
        ...(typeof asked.projectId === "string" && { projectId: asked.projectId }),
        dryRun: asked.dryRun === true,
      },
    );
    const sum = (pick: (p: RetentionAudit["projects"][number]) => number) =>
      audit.projects.reduce((total, p) => total + pick(p), 0);
    telemetry.metrics.add(
      "PartitionsRemoved",
      MetricUnit.Count,
      sum((p) => p.partitionsRemoved.length),
    );
    telemetry.metrics.add(
      "RowsRemoved",
      MetricUnit.Count,
      sum((p) => p.rowsRemoved),
    );
    telemetry.metrics.add(
      "BodiesDropped",
      MetricUnit.Count,
      sum((p) => p.rowsBlanked),
    );
    return audit;
  } finally {
    telemetry.end();
  }
}
