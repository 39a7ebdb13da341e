import { SendMessageBatchCommand, type SQSClient } from "@aws-sdk/client-sqs";
import type { SQSBatchResponse, SQSEvent } from "aws-lambda";

/**
 * Daily work fanned out over a queue (compaction, retention): the schedule's invocation plans and
 * queues one message per unit of work; the queue's invocations do one unit each (lib/daily-run.ts).
 */

/** Whether the invocation is the work queue's (an SQS event) rather than the schedule's or a person's. */
export const isQueueEvent = (event: unknown): event is SQSEvent =>
  Array.isArray((event as { Records?: unknown } | null)?.Records);

/** Puts one message per unit on the queue, ten to a request; answers how many were not queued. */
export async function queueEach(
  sqs: SQSClient,
  queueUrl: string,
  units: readonly unknown[],
): Promise<number> {
  let failed = 0;
  for (let start = 0; start < units.length; start += 10) {
    const batch = units.slice(start, start + 10);
    const sent = await sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: batch.map((unit, i) => ({ Id: String(i), MessageBody: JSON.stringify(unit) })),
      }),
    );
    failed += sent.Failed?.length ?? 0;
  }
  return failed;
}

/** One unit per message; a message whose unit failed goes back for a retry (the redrive counts tries). */
export async function workEach<T>(
  event: SQSEvent,
  run: (unit: T) => Promise<{ failed: boolean }>,
): Promise<SQSBatchResponse> {
  const batchItemFailures: SQSBatchResponse["batchItemFailures"] = [];
  for (const record of event.Records) {
    if ((await run(JSON.parse(record.body) as T)).failed) {
      batchItemFailures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures };
}
