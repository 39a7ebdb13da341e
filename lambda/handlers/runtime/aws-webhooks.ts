import { SQSClient } from "@aws-sdk/client-sqs";
import type { DynamoDBClient } from "../../adapters/dynamodb/client";
import { DynamoDeliveryLog, DynamoWebhooks } from "../../adapters/dynamodb/events";
import { SqsDeliveryQueue } from "../../adapters/sqs/delivery-queue";
import { undiciWebhookSender } from "../../adapters/undici/webhook-sender";
import type { Infrastructure } from "../../compose/infrastructure";
import { kmsKeyWrapper } from "./aws";
import type { EventsConfig } from "./config";

/**
 * The webhooks and their delivery (lib/events.ts), for the delivery function and the dashboard: the
 * webhooks in DynamoDB, their secrets under the BYOK key; the delivery log; the delivery queue, whose
 * retries wait on the message's delay; a sender that posts to public addresses only. A module of its
 * own: undici's root module, which the sender imports, would otherwise join the proxy's bundle.
 */
export function awsWebhooks(
  config: EventsConfig,
  db: DynamoDBClient,
): Pick<Infrastructure, "webhooks" | "deliveryLog" | "deliveryQueue" | "webhookSender"> {
  return {
    webhooks: new DynamoWebhooks(db, config.tables, kmsKeyWrapper(config)()),
    deliveryLog: new DynamoDeliveryLog(db, config.tables),
    deliveryQueue: new SqsDeliveryQueue(
      new SQSClient(config.DMT_SQS_ENDPOINT ? { endpoint: config.DMT_SQS_ENDPOINT } : {}),
      config.DMT_WEBHOOK_QUEUE_URL,
    ),
    webhookSender: undiciWebhookSender({ policy: "public", timeoutMs: 10_000 }),
  };
}
