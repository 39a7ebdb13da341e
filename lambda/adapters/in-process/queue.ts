import { randomUUID } from "node:crypto";
import { errorFields, type Logger } from "../../core/logger";
import type { BatchHandler, DeadLetter, DeadLetterSink, QueueMessage, RecordQueue } from "../../core/queue";
import type { InteractionRecord } from "../../core/record";
import type { JournalSegment, QueueJournal, RecoveredRecord } from "./journal";

export interface InProcessQueueOptions {
  handler: BatchHandler;
  deadLetters: DeadLetterSink;
  logger: Logger;
  /** How often waiting records go to the consumer: the bound on "queryable after the response". */
  flushIntervalMs: number;
  /** Most messages per batch; a batch this large is delivered without waiting for the interval. */
  batchSize: number;
  /** A failed message is hidden this long before it is delivered again (SQS visibility timeout). */
  visibilityTimeoutMs: number;
  /** After this many failed deliveries a message goes to the dead letters (SQS maxReceiveCount). */
  maxReceives: number;
  clock?: () => number;
  /**
   * Keeps every record on disk until it is delivered, so a process killed before a flush loses none;
   * the records a previous process left there are queued at once.
   */
  journal?: QueueJournal;
  /**
   * At each delivery, also take over journal segments other processes left meanwhile: where a
   * short-lived process (a CLI command) hands messages to this one.
   */
  adoptOthers?: boolean;
}

interface Held {
  messageId: string;
  body: string;
  receiveCount: number;
  visibleAt: number;
  lastError?: string;
  segment?: JournalSegment;
}

/**
 * The local stand-in for SQS plus its Lambda event source: holds records in memory and hands
 * SQS-shaped batches to the same consumer handler Lambda runs, with the same semantics for partial
 * batch failures, visibility timeouts and a dead-letter place after `maxReceives`. With a journal, records
 * also wait on disk (lambda/adapters/in-process/journal.ts).
 */
export class InProcessQueue implements RecordQueue {
  private readonly held = new Map<string, Held>();
  private readonly clock: () => number;
  private timer: NodeJS.Timeout | undefined;
  /** The delivery in progress. */
  private delivering: Promise<void> | undefined;
  /** The one that follows it, for the records handed over since it began; shared by its callers. */
  private nextDelivery: Promise<void> | undefined;
  private closed = false;
  private stopped = false;

  constructor(private readonly options: InProcessQueueOptions) {
    this.clock = options.clock ?? Date.now;
    this.hold(options.journal?.takeRecovered() ?? []);
  }

  private hold(recovered: RecoveredRecord[]): void {
    for (const { body, segment } of recovered) {
      const messageId = randomUUID();
      this.held.set(messageId, { messageId, body, receiveCount: 0, visibleAt: 0, segment });
    }
  }

  /** Starts the periodic delivery. */
  start(): this {
    this.timer ??= setInterval(() => void this.deliver(), this.options.flushIntervalMs);
    this.timer.unref();
    return this;
  }

  send(record: InteractionRecord): Promise<void> {
    return this.enqueue(JSON.stringify(record));
  }

  /**
   * `send` of a message already serialised (the local stack's warehouse worker receives them so).
   * `delayMs` hides it that long first, as SQS's `DelaySeconds` does; a restart delivers it at once.
   */
  async enqueue(body: string, delayMs = 0): Promise<void> {
    const segment = await this.journaled(body);
    const messageId = randomUUID();
    const visibleAt = delayMs > 0 ? this.clock() + delayMs : 0;
    this.held.set(messageId, { messageId, body, receiveCount: 0, visibleAt, segment });
    // After close there is no timer: a late record is delivered at once.
    if (this.closed) await this.deliver();
    else if (this.held.size >= this.options.batchSize) void this.deliver();
  }

  /** Messages not yet delivered successfully (waiting, in flight or hidden after a failure). */
  get depth(): number {
    return this.held.size;
  }

  /**
   * Delivers every message handed over until now that is visible, batch after batch. A delivery takes
   * the messages held when it begins: those handed over meanwhile wait for the next one (the next tick,
   * or the one a call made meanwhile queues), as SQS's batching window gathers them, rather than
   * following one by one in batches of whatever arrived during the last write.
   */
  deliver(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (!this.delivering) return this.startDelivery();
    this.nextDelivery ??= this.delivering.then(() => {
      this.nextDelivery = undefined;
      return this.startDelivery();
    });
    return this.nextDelivery;
  }

  private startDelivery(): Promise<void> {
    this.delivering = this.deliverHeld().finally(() => {
      this.delivering = undefined;
    });
    return this.delivering;
  }

  /** Resolves once no delivery is in progress or queued. */
  private async settled(): Promise<void> {
    await (this.nextDelivery ?? this.delivering);
  }

  /**
   * Stops the timer and delivers everything, not waiting out visibility timeouts: a message still failing
   * after `maxReceives` goes to the dead letters, so nothing is left behind silently.
   */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    for (let pass = 0; pass <= this.options.maxReceives && this.held.size > 0; pass++) {
      await this.settled();
      for (const message of this.held.values()) message.visibleAt = 0;
      await this.deliver();
    }
    if (this.held.size > 0) {
      this.options.logger.error("warehouse queue closed with undelivered records", {
        metric: "warehouse.undelivered",
        count: this.held.size,
      });
    }
    await this.options.journal?.close();
  }

  /**
   * Stops delivering and leaves what is undelivered in the journal for the next start, where it is
   * delivered at once: for messages that wait on purpose (a webhook's retries), which `close` would
   * send early.
   */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    this.stopped = true;
    await this.settled();
    await this.options.journal?.close();
  }

  /** The record on disk; when the journal fails, it is kept in memory only (and that is logged). */
  private async journaled(body: string): Promise<JournalSegment | undefined> {
    if (!this.options.journal) return undefined;
    try {
      return await this.options.journal.append(body);
    } catch (err) {
      this.options.logger.error("the queue journal refused a record; it is held in memory only", {
        ...errorFields(err),
        metric: "warehouse.journal_failed",
      });
      return undefined;
    }
  }

  private forget(message: Held): void {
    this.held.delete(message.messageId);
    if (message.segment) this.options.journal?.delivered(message.segment);
  }

  private async deliverHeld(): Promise<void> {
    // Records handed over from now on go to a new journal segment: this one empties as they land.
    this.options.journal?.seal();
    if (this.options.adoptOthers && this.options.journal) {
      try {
        this.hold(await this.options.journal.adopt());
      } catch (err) {
        this.options.logger.warn("journal segments of other processes could not be read", errorFields(err));
      }
    }
    // Those held now; a message that fails and is visible again (no visibility timeout) comes again.
    const due = new Set(this.held.keys());
    for (;;) {
      const now = this.clock();
      const batch: Held[] = [];
      for (const messageId of due) {
        const message = this.held.get(messageId);
        if (!message) {
          due.delete(messageId);
          continue;
        }
        if (message.visibleAt > now) continue;
        batch.push(message);
        if (batch.length >= this.options.batchSize) break;
      }
      if (batch.length === 0) return;
      await this.deliverBatch(batch, now);
    }
  }

  private async deliverBatch(batch: Held[], now: number): Promise<void> {
    const records: QueueMessage[] = batch.map((m) => {
      m.receiveCount++;
      m.visibleAt = now + this.options.visibilityTimeoutMs;
      return {
        messageId: m.messageId,
        body: m.body,
        attributes: { ApproximateReceiveCount: String(m.receiveCount) },
      };
    });
    let failed: Set<string>;
    try {
      const result = await this.options.handler({ Records: records });
      failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
    } catch (err) {
      // A crashed invocation: SQS would redeliver the whole batch after the visibility timeout.
      this.options.logger.warn("warehouse consumer failed a batch", {
        ...errorFields(err),
        size: batch.length,
      });
      failed = new Set(batch.map((m) => m.messageId));
      for (const m of batch) m.lastError = (err as Error).message;
    }
    const exhausted: Held[] = [];
    for (const m of batch) {
      if (!failed.has(m.messageId)) this.forget(m);
      else if (m.receiveCount >= this.options.maxReceives) exhausted.push(m);
    }
    if (exhausted.length > 0) await this.deadLetter(exhausted);
  }

  private async deadLetter(messages: Held[]): Promise<void> {
    const at = this.clock();
    const letters: DeadLetter[] = messages.map((m) => ({
      messageId: m.messageId,
      body: m.body,
      error: `not processed after ${m.receiveCount} deliveries${m.lastError ? `: ${m.lastError}` : ""}`,
      receiveCount: m.receiveCount,
      at,
    }));
    try {
      await this.options.deadLetters.put(letters);
      for (const m of messages) this.forget(m);
      this.options.logger.warn("records dead-lettered", {
        metric: "warehouse.dead_lettered",
        count: letters.length,
      });
    } catch (err) {
      this.options.logger.error("dead-lettering failed; records kept for another try", {
        ...errorFields(err),
        count: letters.length,
      });
    }
  }
}
