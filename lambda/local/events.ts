import { join } from "node:path";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoDeliveryLog, DynamoWebhooks } from "../adapters/dynamodb/events";
import type { TableNames } from "../adapters/dynamodb/tables";
import { LocalMasterKey } from "../adapters/fs/master-key";
import { FsObjectStore } from "../adapters/fs/object-store";
import { FolderDeadLetters } from "../adapters/in-process/dead-letters";
import { QueueJournal } from "../adapters/in-process/journal";
import { InProcessQueue } from "../adapters/in-process/queue";
import { undiciWebhookSender } from "../adapters/undici/webhook-sender";
import type { Infrastructure } from "../compose/infrastructure";
import type { Logger } from "../core/logger";
import type { BatchHandler } from "../core/queue";
import type { DeliveryQueue } from "../core/webhook-delivery";
import { queuePublisher, wantedUsageOnly } from "../events/publisher";

export interface LocalEventsOptions {
  dataDir: string;
  db: DynamoDBClient;
  tables: TableNames;
  logger: Logger;
  clock?: () => number;
  /** How long the receiver may take (default 10 s). */
  webhookTimeoutMs?: number;
}

/** The embedded host's event parts, for `composeEvents`: what the delivery function has in AWS. */
export interface LocalEventParts
  extends Pick<Infrastructure, "events" | "webhooks" | "deliveryLog" | "deliveryQueue" | "webhookSender"> {
  /** The in-process delivery queue, with its journal. */
  queue: InProcessQueue;
  /** Starts delivering, with the composed events' delivery handler. */
  start(handler: BatchHandler): void;
  /** Stops delivering; what is undelivered (retries waiting) stays in the journal for the next start. */
  stop(): Promise<void>;
}

export const eventsJournalDir = (dataDir: string) => join(dataDir, "events-queue");

/**
 * The delivery queue of a short-lived process (the CLI): each message is appended to a journal
 * segment of its own, which the server on the data dir takes over within a tick of its delivery queue
 * once this process has exited (or the next server to start does).
 */
export async function journalQueue(
  dataDir: string,
  logger: Logger,
): Promise<{ queue: DeliveryQueue; close(): Promise<void> }> {
  // Segments of gone processes stay for the server: this process only appends.
  const journal = await QueueJournal.forAppending(eventsJournalDir(dataDir), logger);
  return {
    // A delay is not kept: the server's delivery waits out a retry's `notBefore` itself.
    queue: { send: async (body) => void (await journal.append(body)) },
    /** Closes the segment file; it stays on disk for the server. */
    close: () => journal.close(),
  };
}

/** How often the local delivery queue looks for due messages. */
const DELIVERY_TICK_MS = 250;
/** How long a project's webhooks are taken as listed when deciding whether a call's usage event is wanted. */
const USAGE_WANTED_MS = 1_000;

/**
 * The events' parts on the embedded host: the delivery code of the AWS delivery function runs over the
 * in-process queue with its journal (`<data dir>/events-queue/`), so events and waiting retries survive
 * a restart. Webhooks may point at loopback here (a receiver on this machine), never at other private
 * addresses.
 */
export async function openLocalEvents(options: LocalEventsOptions): Promise<LocalEventParts> {
  const clock = options.clock ?? Date.now;
  let handler: BatchHandler | undefined;
  const queue = new InProcessQueue({
    handler: (batch) => (handler as BatchHandler)(batch),
    deadLetters: new FolderDeadLetters(new FsObjectStore(join(options.dataDir, "events"))),
    logger: options.logger,
    flushIntervalMs: DELIVERY_TICK_MS,
    batchSize: 100,
    visibilityTimeoutMs: 30_000,
    maxReceives: 5,
    clock,
    journal: await QueueJournal.open(eventsJournalDir(options.dataDir), options.logger),
    // CLI commands (`credits grant`, `keys create`...) leave their events in the journal.
    adoptOthers: true,
  });
  const deliveryQueue: DeliveryQueue = { send: (body, delayMs) => queue.enqueue(body, delayMs) };
  const webhooks = new DynamoWebhooks(options.db, options.tables, LocalMasterKey.inDataDir(options.dataDir));
  const webhookSender = undiciWebhookSender({
    policy: "public-or-loopback",
    timeoutMs: options.webhookTimeoutMs ?? 10_000,
  });
  return {
    // No bus here: a usage event no webhook names would go nowhere (wantedUsageOnly).
    events: wantedUsageOnly(queuePublisher(deliveryQueue, clock), webhooks, clock, USAGE_WANTED_MS),
    webhooks,
    deliveryLog: new DynamoDeliveryLog(options.db, options.tables),
    deliveryQueue,
    webhookSender,
    queue,
    start(deliveries) {
      handler = deliveries;
      queue.start();
    },
    async stop() {
      await queue.stop();
      await webhookSender.close();
    },
  };
}
