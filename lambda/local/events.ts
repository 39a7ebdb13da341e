import { join } from "node:path";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoWebhooks } from "../adapters/dynamodb/events";
import type { TableNames } from "../adapters/dynamodb/tables";
import { LocalMasterKey } from "../adapters/fs/master-key";
import { FsObjectStore } from "../adapters/fs/object-store";
import { FolderDeadLetters } from "../adapters/in-process/dead-letters";
import { QueueJournal } from "../adapters/in-process/journal";
import { InProcessQueue } from "../adapters/in-process/queue";
import { undiciWebhookSender } from "../adapters/undici/webhook-sender";
import { composeEvents, type Events } from "../compose/events";
import type { CreditStore } from "../core/credits";
import type { Logger } from "../core/logger";
import type { BatchHandler } from "../core/queue";
import type { DeliveryQueue } from "../core/webhook-delivery";
import { queuePublisher, wantedUsageOnly } from "../events/publisher";

export interface LocalEventsOptions {
  dataDir: string;
  db: DynamoDBClient;
  tables: TableNames;
  credits: Pick<CreditStore, "balance">;
  logger: Logger;
  clock?: () => number;
  /** Waits before webhook retries (tests use short ones). */
  retryDelaysMs?: readonly number[];
  /** How long the receiver may take (default 10 s). */
  webhookTimeoutMs?: number;
}

export interface LocalEvents extends Events {
  queue: InProcessQueue;
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
 * The events of the local stack: the delivery code of the AWS delivery function, over the in-process
 * queue with its journal (`<data dir>/events-queue/`), so events and waiting retries survive a restart.
 * Webhooks may point at loopback here (a receiver on this machine), never at other private addresses.
 */
export async function startLocalEvents(options: LocalEventsOptions): Promise<LocalEvents> {
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
  const sendQueue: DeliveryQueue = { send: (body, delayMs) => queue.enqueue(body, delayMs) };
  const wrapper = LocalMasterKey.inDataDir(options.dataDir);
  const sender = undiciWebhookSender({
    policy: "public-or-loopback",
    timeoutMs: options.webhookTimeoutMs ?? 10_000,
  });
  const events = composeEvents({
    db: options.db,
    tables: options.tables,
    wrapper,
    queue: sendQueue,
    sender,
    // No bus here: a usage event no webhook names would go nowhere (wantedUsageOnly).
    publisher: wantedUsageOnly(
      queuePublisher(sendQueue, clock),
      new DynamoWebhooks(options.db, options.tables, wrapper),
      clock,
      USAGE_WANTED_MS,
    ),
    credits: options.credits,
    logger: options.logger,
    clock,
    ...(options.retryDelaysMs ? { retryDelaysMs: options.retryDelaysMs } : {}),
  });
  handler = events.deliveries.handler;
  queue.start();
  return {
    ...events,
    queue,
    async stop() {
      await queue.stop();
      await sender.close();
    },
  };
}
