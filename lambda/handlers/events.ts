import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { composeEvents } from "../compose/events";
import { awsHost, eventBridgePublisher } from "./runtime/aws";
import { awsWebhooks } from "./runtime/aws-webhooks";
import { parseEventsConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The webhook delivery function behind the delivery queue (ReportBatchItemFailures): events from the
 * bus's rule are fanned out to the project's webhooks, each POST signed per Standard Webhooks; waits
 * between retries ride on the queue's message delay. Webhooks may only reach public addresses.
 */
const config = parseEventsConfig(process.env);
const aws = awsHost(process.env, "events");
const events = composeEvents(
  { ...aws, ...awsWebhooks(config, aws.store.db), events: eventBridgePublisher(config) },
  config.DMT_WEBHOOK_RETRY_DELAYS_MS
    ? { retryDelaysMs: config.DMT_WEBHOOK_RETRY_DELAYS_MS.split(",").map(Number) }
    : {},
);

export const handler: (event: SQSEvent) => Promise<SQSBatchResponse> = withTelemetry(
  aws.telemetry,
  events.deliveries.handler,
);
