import type { InteractionRecord } from "./record";

/** The producer side: where the proxy hands each interaction record. SQS in AWS, in-process locally. */
export interface RecordQueue {
  /**
   * Hands a record over. Resolves once the record is on the queue or, failing that after retries, in
   * the spool for a later re-send; it does not reject, so a caller cannot drop a record by mistake.
   */
  send(record: InteractionRecord): Promise<void>;
  /** Delivers everything handed over so far; the local stack calls it on shutdown. */
  close(): Promise<void>;
}

/** One message as an SQS event source hands it to Lambda (the fields the consumer reads). */
export interface QueueMessage {
  messageId: string;
  body: string;
  attributes: { ApproximateReceiveCount: string };
}

/** An SQS event: a real `SQSEvent` is assignable to it. */
export interface QueueBatch {
  Records: QueueMessage[];
}

/** The partial batch response: only these messages are retried; the rest are deleted. */
export interface BatchResult {
  batchItemFailures: { itemIdentifier: string }[];
}

export type BatchHandler = (batch: QueueBatch) => Promise<BatchResult>;

/** A message that will never be processed, kept with the reason for a person to look at. */
export interface DeadLetter {
  messageId: string;
  body: string;
  error: string;
  receiveCount: number;
  /** Epoch ms. */
  at: number;
}

/** Where dead letters go: an SQS dead-letter queue in AWS, a folder locally. */
export interface DeadLetterSink {
  put(letters: DeadLetter[]): Promise<void>;
}

/** Where dead letters kept as objects go (`dead-letter/<day>/<messageId>.json`): locally, and what deletion purges. */
export const DEAD_LETTER_PREFIX = "dead-letter/";
