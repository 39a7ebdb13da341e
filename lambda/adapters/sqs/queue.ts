import {
  type MessageAttributeValue,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from "@aws-sdk/client-sqs";
import { errorFields, type Logger } from "../../core/logger";
import type { DeadLetter, DeadLetterSink, RecordQueue } from "../../core/queue";
import type { InteractionRecord } from "../../core/record";
import type { RecordSpool } from "./spool";

/** SQS limits: 10 entries per batch, and the batch's total size at most the queue's maximum message size. */
const MAX_ENTRIES = 10;
export const SQS_MAX_BATCH_BYTES = 1024 * 1024;

const byteLength = (s: string) => Buffer.byteLength(s, "utf8");

/** Splits entries into SendMessageBatch-sized groups by count and by bytes. */
function batches<T>(items: T[], size: (item: T) => number, maxBytes: number): T[][] {
  const out: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const n = size(item);
    if (current.length > 0 && (current.length === MAX_ENTRIES || bytes + n > maxBytes)) {
      out.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += n;
  }
  if (current.length > 0) out.push(current);
  return out;
}

export interface SqsQueueOptions {
  queueUrl: string;
  spool: RecordSpool;
  logger: Logger;
  /** Our attempts per batch on top of the SDK's own retries, for entries SQS reports as failed. */
  maxAttempts?: number;
  baseDelayMs?: number;
  /** The queue's maximum message size (SQS allows up to 1 MiB; set the queue to it). */
  maxBatchBytes?: number;
  sleep?: (ms: number) => Promise<void>;
}

interface Pending {
  body: string;
  done: () => void;
}

/**
 * The producer in AWS: records handed over in the same tick go out together in SendMessageBatch calls;
 * entries SQS refuses are retried with backoff, and what still fails is spooled, never dropped.
 * `send` resolves when its record is on the queue or in the spool: a Lambda must await it before
 * returning, as a frozen sandbox sends nothing.
 */
export class SqsRecordQueue implements RecordQueue {
  private pending: Pending[] = [];
  private scheduled = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(
    private readonly client: SQSClient,
    private readonly options: SqsQueueOptions,
  ) {
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  send(record: InteractionRecord): Promise<void> {
    return new Promise((done) => {
      this.pending.push({ body: JSON.stringify(record), done });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        const items = this.pending;
        this.pending = [];
        const work = this.deliver(items).finally(() => this.inFlight.delete(work));
        this.inFlight.add(work);
      });
    });
  }

  private async deliver(items: Pending[]): Promise<void> {
    const left = await this.sendBodies(items.map((i) => i.body));
    await this.options.spool.put(left);
    for (const item of items) item.done();
  }

  /** Sends bodies with retries; returns the ones that could not be delivered. */
  async sendBodies(bodies: string[]): Promise<string[]> {
    const groups = batches(bodies, byteLength, this.options.maxBatchBytes ?? SQS_MAX_BATCH_BYTES);
    const left = await Promise.all(groups.map((group) => this.sendGroup(group)));
    return left.flat();
  }

  private async sendGroup(bodies: string[]): Promise<string[]> {
    const maxAttempts = this.options.maxAttempts ?? 3;
    const baseDelay = this.options.baseDelayMs ?? 100;
    const undeliverable: string[] = [];
    let remaining = bodies;
    for (let attempt = 1; remaining.length > 0; attempt++) {
      // Full jitter: concurrent senders do not retry in step.
      if (attempt > 1) await this.sleep(Math.random() * baseDelay * 2 ** attempt);
      try {
        const out = await this.client.send(
          new SendMessageBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: remaining.map((MessageBody, i) => ({ Id: String(i), MessageBody })),
          }),
        );
        const failed = out.Failed ?? [];
        if (failed.length > 0) {
          this.options.logger.warn("SQS refused entries", {
            codes: [...new Set(failed.map((f) => f.Code))],
            count: failed.length,
          });
        }
        const bodyOf = (id: string | undefined) => remaining[Number(id)] as string;
        // A sender fault (a malformed entry) fails the same way every time: no retry.
        undeliverable.push(...failed.filter((f) => f.SenderFault).map((f) => bodyOf(f.Id)));
        remaining = failed.filter((f) => !f.SenderFault).map((f) => bodyOf(f.Id));
      } catch (err) {
        this.options.logger.warn("SQS send failed", {
          ...errorFields(err),
          attempt,
          count: remaining.length,
        });
      }
      if (attempt >= maxAttempts) {
        undeliverable.push(...remaining);
        break;
      }
    }
    return undeliverable;
  }

  /** Offers spooled records to the queue again (a scheduled job, or a cold start, calls this). */
  resendSpooled(): Promise<void> {
    return this.options.spool.resend((bodies) => this.sendBodies(bodies));
  }

  async close(): Promise<void> {
    while (this.scheduled || this.inFlight.size > 0) {
      await Promise.all(this.inFlight);
      if (this.scheduled) await new Promise((resolve) => setImmediate(resolve));
    }
  }
}

/** The consumer's dead letters in AWS: the dead-letter queue, with the error as a message attribute. */
export class SqsDeadLetters implements DeadLetterSink {
  constructor(
    private readonly client: SQSClient,
    private readonly queueUrl: string,
    private readonly maxBatchBytes = SQS_MAX_BATCH_BYTES,
  ) {}

  async put(letters: DeadLetter[]): Promise<void> {
    const entries = letters.map((letter, i): SendMessageBatchRequestEntry => {
      const attribute = (value: string): MessageAttributeValue => ({
        DataType: "String",
        StringValue: value,
      });
      return {
        Id: String(i),
        MessageBody: letter.body,
        MessageAttributes: {
          error: attribute(letter.error.slice(0, 1024)),
          source_message_id: attribute(letter.messageId),
          receive_count: attribute(String(letter.receiveCount)),
        },
      };
    });
    // Attributes count towards the size limit: leave them room.
    const size = (e: SendMessageBatchRequestEntry) => byteLength(e.MessageBody ?? "") + 2048;
    for (const group of batches(entries, size, this.maxBatchBytes)) {
      const out = await this.client.send(
        new SendMessageBatchCommand({ QueueUrl: this.queueUrl, Entries: group }),
      );
      if (out.Failed && out.Failed.length > 0) {
        throw new Error(
          `the dead-letter queue refused ${out.Failed.length} messages (${out.Failed[0]?.Code})`,
        );
      }
    }
  }
}
