import { join } from "node:path";
import { DynamoMeterStore } from "../adapters/dynamodb/billing-meter";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import type { TableNames } from "../adapters/dynamodb/tables";
import { FsObjectStore } from "../adapters/fs/object-store";
import { FolderDeadLetters } from "../adapters/in-process/dead-letters";
import { QueueJournal } from "../adapters/in-process/journal";
import { InProcessQueue } from "../adapters/in-process/queue";
import { composeMeterSender, type MeterConfig } from "../compose/billing";
import { meterListener } from "../compose/billing-listener";
import type { MeterQueue } from "../core/billing-meter";
import type { Logger } from "../core/logger";
import type { WrittenListener } from "../warehouse/consumer";

/** Where the local meter queue keeps its messages; a CLI resend appends a segment of its own here. */
export const meterJournalDir = (dataDir: string) => join(dataDir, "meter-queue");

/** How often the local meter queue sends what waits: a call's meter event follows its record by this. */
const METER_TICK_MS = 1000;

export interface LocalMeter {
  /** The warehouse consumer's listener. */
  listener: WrittenListener;
  queue: InProcessQueue;
}

/**
 * The billing exports on the embedded host, beside the warehouse consumer (its worker thread): the
 * in-process meter queue with its journal (`<data dir>/meter-queue/`), dead letters under
 * `<data dir>/meter/dead-letter/`, and the sender AWS runs behind SQS.
 */
export async function startLocalMeter(options: {
  dataDir: string;
  db: DynamoDBClient;
  tables: TableNames;
  logger: Logger;
  config: MeterConfig;
  clock?: () => number;
}): Promise<LocalMeter> {
  const clock = options.clock ?? Date.now;
  const infra = {
    meterStore: new DynamoMeterStore(options.db, options.tables),
    logger: options.logger,
    clock,
  };
  const queue = new InProcessQueue({
    handler: composeMeterSender(infra, options.config),
    deadLetters: new FolderDeadLetters(new FsObjectStore(join(options.dataDir, "meter"))),
    logger: options.logger,
    flushIntervalMs: METER_TICK_MS,
    batchSize: 10,
    visibilityTimeoutMs: 30_000,
    maxReceives: 5,
    clock,
    journal: await QueueJournal.open(meterJournalDir(options.dataDir), options.logger),
    adoptOthers: true,
  }).start();
  const meterQueue: MeterQueue = {
    send: async (bodies) => void (await Promise.all(bodies.map((b) => queue.enqueue(b)))),
  };
  return { listener: meterListener({ ...infra, meterQueue }), queue };
}

/** The meter queue of a short-lived process (the CLI's resend): the server's queue takes the segment over. */
export async function meterJournalQueue(
  dataDir: string,
  logger: Logger,
): Promise<{ queue: MeterQueue; close(): Promise<void> }> {
  const journal = await QueueJournal.forAppending(meterJournalDir(dataDir), logger);
  return {
    queue: { send: async (bodies) => void (await Promise.all(bodies.map((b) => journal.append(b)))) },
    close: () => journal.close(),
  };
}
