import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoCredits } from "../adapters/dynamodb/credits";
import { EventBridgePublisher } from "../adapters/eventbridge/bus";
import { SqsDeliveryQueue } from "../adapters/queue/sqs-delivery";
import { createKmsClient, KmsKeyWrapper } from "../adapters/secrets/kms";
import { undiciWebhookSender } from "../adapters/webhooks/undici-sender";
import { composeEvents } from "../compose/events";
import { jsonLogger } from "../core/logger";
import { parseEventsConfig } from "./config";
import { createSqsClient } from "./warehouse";

/**
 * The webhook delivery function behind the delivery queue (ReportBatchItemFailures): events from the
 * bus's rule are fanned out to the project's webhooks, each POST signed per Standard Webhooks; waits
 * between retries ride on the queue's message delay. Webhooks may only reach public addresses.
 */
const config = parseEventsConfig(process.env);
const db = createDynamoClient(config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {});
const events = composeEvents({
  db,
  tables: config.tables,
  wrapper: new KmsKeyWrapper(
    createKmsClient(config.DMT_KMS_ENDPOINT ? { endpoint: config.DMT_KMS_ENDPOINT } : {}),
    config.DMT_BYOK_KEY_ARN,
  ),
  queue: new SqsDeliveryQueue(createSqsClient(config.DMT_SQS_ENDPOINT), config.DMT_WEBHOOK_QUEUE_URL),
  sender: undiciWebhookSender({ policy: "public", timeoutMs: 10_000 }),
  publisher: new EventBridgePublisher(
    new EventBridgeClient(
      config.DMT_EVENTBRIDGE_ENDPOINT ? { endpoint: config.DMT_EVENTBRIDGE_ENDPOINT } : {},
    ),
    config.DMT_EVENT_BUS_NAME,
  ),
  credits: new DynamoCredits(db, config.tables),
  logger: jsonLogger(config.DMT_LOG_LEVEL),
  clock: Date.now,
  ...(config.DMT_WEBHOOK_RETRY_DELAYS_MS
    ? { retryDelaysMs: config.DMT_WEBHOOK_RETRY_DELAYS_MS.split(",").map(Number) }
    : {}),
});

export const handler: (event: SQSEvent) => Promise<SQSBatchResponse> = events.deliveries.handler;
