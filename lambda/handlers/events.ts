import { EventBridgeClient } from "@aws-sdk/client-eventbridge";
import { SQSClient } from "@aws-sdk/client-sqs";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { EventBridgePublisher } from "../adapters/eventbridge/bus";
import { SqsDeliveryQueue } from "../adapters/sqs/delivery-queue";
import { undiciWebhookSender } from "../adapters/undici/webhook-sender";
import { composeEvents } from "../compose/events";
import { awsHost, kmsKeyWrapper } from "./runtime/aws";
import { parseEventsConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The webhook delivery function behind the delivery queue (ReportBatchItemFailures): events from the
 * bus's rule are fanned out to the project's webhooks, each POST signed per Standard Webhooks; waits
 * between retries ride on the queue's message delay. Webhooks may only reach public addresses.
 */
const config = parseEventsConfig(process.env);
const aws = awsHost(process.env, "events");
const events = composeEvents({
  db: aws.store.db,
  tables: config.tables,
  wrapper: kmsKeyWrapper(config)(),
  queue: new SqsDeliveryQueue(
    new SQSClient(config.DMT_SQS_ENDPOINT ? { endpoint: config.DMT_SQS_ENDPOINT } : {}),
    config.DMT_WEBHOOK_QUEUE_URL,
  ),
  sender: undiciWebhookSender({ policy: "public", timeoutMs: 10_000 }),
  publisher: new EventBridgePublisher(
    new EventBridgeClient(
      config.DMT_EVENTBRIDGE_ENDPOINT ? { endpoint: config.DMT_EVENTBRIDGE_ENDPOINT } : {},
    ),
    config.DMT_EVENT_BUS_NAME,
  ),
  credits: aws.store.credits,
  logger: aws.logger,
  clock: aws.clock,
  ...(config.DMT_WEBHOOK_RETRY_DELAYS_MS
    ? { retryDelaysMs: config.DMT_WEBHOOK_RETRY_DELAYS_MS.split(",").map(Number) }
    : {}),
});

export const handler: (event: SQSEvent) => Promise<SQSBatchResponse> = withTelemetry(
  aws.telemetry,
  events.deliveries.handler,
);
