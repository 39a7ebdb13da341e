import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoAlertRules } from "../lambda/adapters/dynamodb/alert-rules";
import { DynamoDeliveryLog, DynamoWebhooks } from "../lambda/adapters/dynamodb/events";
import type { TableNames } from "../lambda/adapters/dynamodb/tables";
import { LocalMasterKey } from "../lambda/adapters/fs/master-key";
import { undiciWebhookSender } from "../lambda/adapters/undici/webhook-sender";
import { composeEvents, type Events } from "../lambda/compose/events";
import type { EventPublisher, NewEvent } from "../lambda/core/cloudevent";
import type { CreditStore } from "../lambda/core/credits";
import type { KeyWrapper } from "../lambda/core/crypto";
import { jsonLogger } from "../lambda/core/logger";
import type { DeliveryQueue, WebhookSender } from "../lambda/core/webhook-delivery";
import { publishAfter } from "../lambda/events/account-events";
import { queuePublisher } from "../lambda/events/publisher";
import type { AddressPolicy } from "../lambda/events/webhooks";
import { journalQueue } from "../lambda/local/events";

/**
 * What the CLI's event commands open, loaded only when one runs (the delivery code, the HTTP client):
 * every other command starts without it.
 */

/** The events side of the CLI: alert rules, webhooks, and the events its own commands publish. */
export interface CliEvents extends Omit<Events, "hooks"> {
  /** Where webhook URLs may point: public addresses in AWS, loopback too locally. */
  policy: AddressPolicy;
  /** Publishes an event about something done; a failure is reported on stderr, the deed stands. */
  published(event: NewEvent): Promise<void>;
}

/** The CLI's events over any host's parts; `close` ends what they hold open. */
export function cliEvents(
  parts: {
    db: DynamoDBClient;
    tables: TableNames;
    wrapper: KeyWrapper;
    queue: DeliveryQueue;
    publisher: EventPublisher;
    credits: Pick<CreditStore, "balance">;
    policy: AddressPolicy;
  },
  close: () => Promise<void>,
): CliEvents & { close(): Promise<void> } {
  const logger = jsonLogger("error");
  const sender: WebhookSender & { close(): Promise<void> } = undiciWebhookSender({
    policy: parts.policy,
    timeoutMs: 10_000,
  });
  const { hooks: _proxyOnly, ...events } = composeEvents({
    store: { alertRules: new DynamoAlertRules(parts.db, parts.tables), credits: parts.credits },
    events: parts.publisher,
    webhooks: new DynamoWebhooks(parts.db, parts.tables, parts.wrapper),
    deliveryLog: new DynamoDeliveryLog(parts.db, parts.tables),
    deliveryQueue: parts.queue,
    webhookSender: sender,
    logger,
    clock: Date.now,
  });
  return {
    ...events,
    policy: parts.policy,
    published: (event) => publishAfter(parts.publisher, event, logger),
    async close() {
      await sender.close();
      await close();
    },
  };
}

/** Locally, the CLI's events go to the data dir's delivery journal, which the server takes over. */
export async function localEvents(
  db: DynamoDBClient,
  tables: TableNames,
  credits: Pick<CreditStore, "balance">,
  dataDir: string,
): Promise<CliEvents & { close(): Promise<void> }> {
  const journal = await journalQueue(dataDir, jsonLogger("error"));
  return cliEvents(
    {
      db,
      tables,
      wrapper: LocalMasterKey.inDataDir(dataDir),
      queue: journal.queue,
      publisher: queuePublisher(journal.queue, Date.now),
      credits,
      policy: "public-or-loopback",
    },
    () => journal.close(),
  );
}
