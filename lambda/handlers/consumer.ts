import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { meterListener } from "../compose/billing-listener";
import { composeWarehouseConsumer, storeCopies } from "../compose/consumer";
import { awsHost, awsMeterOutbox, s3Warehouse } from "./runtime/aws";
import { parseConsumerConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The warehouse consumer behind the queue's event source mapping (ReportBatchItemFailures): Parquet
 * under `interactions/` of the bucket, the DynamoDB delivery ledger, the dead-letter queue. It answers
 * `batchItemFailures`, so only records whose file was not written return. Records a running deletion
 * covers are dropped (tombstones); written ones go on to the dashboard's interactions index and rollups,
 * and the billable calls of projects with a billing connection to the meter queue (lib/billing.ts).
 */
const config = parseConsumerConfig(process.env);
const aws = awsHost(process.env, "consumer");
const infra = { ...aws, ...s3Warehouse(config) };
const copies = storeCopies(infra);
const { DMT_METER_QUEUE_URL, DMT_TABLE_BILLINGMETER } = config;
const meter =
  DMT_METER_QUEUE_URL && DMT_TABLE_BILLINGMETER
    ? [
        meterListener({
          ...aws,
          ...awsMeterOutbox({ ...config, DMT_METER_QUEUE_URL, DMT_TABLE_BILLINGMETER }, aws.store),
        }),
      ]
    : [];

export const handler: (event: SQSEvent) => Promise<SQSBatchResponse> = withTelemetry(
  aws.telemetry,
  composeWarehouseConsumer(infra, { ...copies, onWritten: [...copies.onWritten, ...meter] }),
);
