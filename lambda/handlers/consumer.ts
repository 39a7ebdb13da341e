import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoInteractionIndex } from "../adapters/dynamodb/interactions";
import { DynamoDeliveryLedger } from "../adapters/dynamodb/ledger";
import { DynamoTombstones } from "../adapters/dynamodb/tombstones";
import { S3ObjectStore } from "../adapters/s3/object-store";
import { SqsDeadLetters } from "../adapters/sqs/queue";
import { jsonLogger } from "../core/logger";
import { createWarehouseConsumer } from "../warehouse/consumer";
import { createS3Client, createSqsClient } from "./runtime/aws";
import { parseConsumerConfig } from "./runtime/config";

/**
 * The warehouse consumer behind the queue's event source mapping (ReportBatchItemFailures): the same
 * consumer as locally, over S3 (Parquet under `interactions/`), the DynamoDB delivery ledger and the
 * dead-letter queue. It answers `batchItemFailures`, so only records whose file was not written return.
 * Records a running deletion covers are dropped (tombstones); written ones go on to the dashboard's
 * interactions index and rollups.
 */
const config = parseConsumerConfig(process.env);
const db = createDynamoClient(config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {});
const index = new DynamoInteractionIndex(db, {
  interactions: config.DMT_TABLE_INTERACTIONS,
  usageRollups: config.DMT_TABLE_USAGEROLLUPS,
});

export const handler: (event: SQSEvent) => Promise<SQSBatchResponse> = createWarehouseConsumer({
  objects: new S3ObjectStore(createS3Client(config.DMT_S3_ENDPOINT), config.DMT_WAREHOUSE_BUCKET),
  ledger: new DynamoDeliveryLedger(db, config.DMT_TABLE_WAREHOUSEDELIVERIES),
  tombstones: new DynamoTombstones(db, config.DMT_TABLE_DELETIONTOMBSTONES),
  onWritten: [(records) => index.write(records)],
  deadLetters: new SqsDeadLetters(createSqsClient(config.DMT_SQS_ENDPOINT), config.DMT_DEAD_LETTER_QUEUE_URL),
  logger: jsonLogger(config.DMT_LOG_LEVEL),
});
