import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { composeWarehouseConsumer, storeCopies } from "../compose/consumer";
import { awsHost, s3Warehouse } from "./runtime/aws";
import { parseConsumerConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The warehouse consumer behind the queue's event source mapping (ReportBatchItemFailures): Parquet
 * under `interactions/` of the bucket, the DynamoDB delivery ledger, the dead-letter queue. It answers
 * `batchItemFailures`, so only records whose file was not written return. Records a running deletion
 * covers are dropped (tombstones); written ones go on to the dashboard's interactions index and rollups.
 */
const config = parseConsumerConfig(process.env);
const aws = awsHost(process.env, "consumer");
const infra = { ...aws, ...s3Warehouse(config) };

export const handler: (event: SQSEvent) => Promise<SQSBatchResponse> = withTelemetry(
  aws.telemetry,
  composeWarehouseConsumer(infra, storeCopies(infra)),
);
