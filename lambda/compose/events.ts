import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoDeliveryLog, DynamoWebhooks } from "../adapters/dynamodb/events";
import type { TableNames } from "../adapters/dynamodb/tables";
import type { EventPublisher } from "../core/cloudevent";
import type { CreditStore } from "../core/credits";
import type { KeyWrapper } from "../core/crypto";
import type { Logger } from "../core/logger";
import type { DeliveryQueue, WebhookSender } from "../core/webhook-delivery";
import { createDeliveries, type Deliveries } from "../events/delivery";
import { type Alerts, composeAlerts } from "./alerts";

/** What a host gives the events: the store, the secrets' key wrapper, a queue, a sender and a publisher. */
export interface EventsInfrastructure {
  db: DynamoDBClient;
  tables: Pick<TableNames, "webhooks" | "webhookDeliveries" | "alertRules">;
  wrapper: KeyWrapper;
  queue: DeliveryQueue;
  sender: WebhookSender;
  publisher: EventPublisher;
  credits: Pick<CreditStore, "balance">;
  logger: Logger;
  clock: () => number;
  /** Waits before webhook retries; the default schedule spans more than an hour. */
  retryDelaysMs?: readonly number[];
}

export interface Events extends Alerts {
  webhooks: DynamoWebhooks;
  log: DynamoDeliveryLog;
  deliveries: Deliveries;
}

/** The events, assembled once for every host: the delivery function, the proxy, the dashboard, the CLI. */
export function composeEvents(infra: EventsInfrastructure): Events {
  const webhooks = new DynamoWebhooks(infra.db, infra.tables, infra.wrapper);
  const log = new DynamoDeliveryLog(infra.db, infra.tables);
  const deliveries = createDeliveries({
    webhooks,
    log,
    queue: infra.queue,
    sender: infra.sender,
    logger: infra.logger,
    clock: infra.clock,
    ...(infra.retryDelaysMs ? { retryDelaysMs: infra.retryDelaysMs } : {}),
  });
  return { ...composeAlerts(infra), webhooks, log, deliveries };
}
