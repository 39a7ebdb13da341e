import { createHash } from "node:crypto";
import type { ObjectStore } from "../adapters/objectstore/port";
import type { DeliveryLedger } from "../adapters/queue/ledger";
import type {
  BatchHandler,
  BatchResult,
  DeadLetter,
  DeadLetterSink,
  QueueMessage,
} from "../adapters/queue/port";
import { type TombstoneReader, tombstoneMatcher } from "../core/deletion";
import { errorFields, type Logger } from "../core/logger";
import { type InteractionRecord, parseRecord, partitionPrefix, RecordError, recordDay } from "../core/record";
import { encodeRecords } from "./parquet";

export interface ConsumerDeps {
  objects: ObjectStore;
  ledger: DeliveryLedger;
  deadLetters: DeadLetterSink;
  logger: Logger;
  clock?: () => number;
  /**
   * Told of records once they are in the warehouse (the dashboard's index and rollups). Also told of
   * records already written when they come again, so a listener that failed gets them once more: a
   * listener must treat a repeat as a no-op. A listener's failure fails those records' messages.
   */
  onWritten?: WrittenListener[];
  /**
   * Deletion tombstones (core/deletion.ts): records a running deletion covers are dropped, neither
   * written nor told to listeners. Absent: nothing is dropped.
   */
  tombstones?: TombstoneReader;
}

export type WrittenListener = (records: InteractionRecord[]) => Promise<void>;

interface Accepted {
  messageId: string;
  record: InteractionRecord;
}

/** Partitions written at once; a batch usually touches a few projects. */
const WRITE_CONCURRENCY = 4;

/**
 * A file's name depends only on its records (first timestamp, hash of the sorted ids): if a crash after
 * the write makes the same records come back together, the rewrite replaces the file instead of adding
 * a second copy of its rows.
 */
function fileName(records: readonly InteractionRecord[]): string {
  const ids = records.map((r) => r.transaction_id).sort();
  const hash = createHash("sha256").update(ids.join("\n")).digest("hex").slice(0, 20);
  const first = new Date(records[0]?.started_at ?? 0).toISOString().replace(/[-:.]/g, "");
  return `${first}-${hash}.parquet`;
}

function parseMessage(message: QueueMessage): InteractionRecord {
  let json: unknown;
  try {
    json = JSON.parse(message.body);
  } catch {
    // The parser's message would quote the body; the dead letter keeps the body itself.
    throw new RecordError("the message body is not JSON");
  }
  return parseRecord(json);
}

/**
 * The warehouse consumer, the same in Lambda (SQS event source with ReportBatchItemFailures) and
 * locally (the in-process queue): parses each message, dead-letters poison ones with their error, drops
 * records already written (by transaction id), writes one Parquet file per project and day, and reports
 * only the messages whose file could not be written as failures, so only those come back.
 */
export function createWarehouseConsumer(deps: ConsumerDeps): BatchHandler {
  const clock = deps.clock ?? Date.now;
  return async (batch): Promise<BatchResult> => {
    const failures: string[] = [];
    const poison: DeadLetter[] = [];
    const byTransaction = new Map<string, Accepted>();
    for (const message of batch.Records) {
      let record: InteractionRecord;
      try {
        record = parseMessage(message);
      } catch (err) {
        if (!(err instanceof RecordError)) throw err;
        poison.push({
          messageId: message.messageId,
          body: message.body,
          error: err.message,
          receiveCount: Number(message.attributes.ApproximateReceiveCount) || 1,
          at: clock(),
        });
        continue;
      }
      // A duplicate within the batch is acknowledged with the first copy.
      if (!byTransaction.has(record.transaction_id)) {
        byTransaction.set(record.transaction_id, { messageId: message.messageId, record });
      }
    }

    if (poison.length > 0) {
      try {
        await deps.deadLetters.put(poison);
        deps.logger.warn("poison records dead-lettered", {
          metric: "warehouse.poison",
          count: poison.length,
        });
      } catch (err) {
        deps.logger.error("dead-lettering failed", { ...errorFields(err), count: poison.length });
        failures.push(...poison.map((p) => p.messageId));
      }
    }

    // Read before anything is written: a deletion waits out batches that read them before its tombstone.
    const projects = new Set([...byTransaction.values()].map((a) => a.record.project_id));
    const tombstoned = deps.tombstones && tombstoneMatcher(await deps.tombstones.forProjects([...projects]));
    let dropped = 0;
    const written = await deps.ledger.committed([...byTransaction.keys()]);
    const partitions = new Map<string, Accepted[]>();
    const again: Accepted[] = [];
    for (const [transactionId, accepted] of byTransaction) {
      if (tombstoned?.(accepted.record)) {
        dropped++;
        continue;
      }
      if (written.has(transactionId)) {
        again.push(accepted);
        continue;
      }
      const prefix = partitionPrefix(accepted.record.project_id, recordDay(accepted.record));
      const group = partitions.get(prefix);
      if (group) group.push(accepted);
      else partitions.set(prefix, [accepted]);
    }

    if (dropped > 0) {
      deps.logger.info("records dropped: a deletion request covers them", {
        metric: "warehouse.tombstoned",
        count: dropped,
      });
    }

    const notify = async (accepted: Accepted[]): Promise<void> => {
      const records = accepted.map((a) => a.record);
      try {
        for (const listener of deps.onWritten ?? []) await listener(records);
      } catch (err) {
        deps.logger.error("a listener of written records failed; its records will be retried", {
          ...errorFields(err),
          count: accepted.length,
        });
        failures.push(...accepted.map((a) => a.messageId));
      }
    };

    const groups = [...partitions];
    const writeNext = async (): Promise<void> => {
      for (let entry = groups.shift(); entry; entry = groups.shift()) {
        const [prefix, accepted] = entry;
        try {
          const records = accepted.map((a) => a.record).sort((a, b) => a.started_at - b.started_at);
          await deps.objects.put(prefix + fileName(records), encodeRecords(records));
          await deps.ledger.commit(records.map((r) => r.transaction_id));
        } catch (err) {
          deps.logger.error("writing a warehouse file failed; its records will be retried", {
            ...errorFields(err),
            partition: prefix,
            count: accepted.length,
          });
          failures.push(...accepted.map((a) => a.messageId));
          continue;
        }
        await notify(accepted);
      }
    };
    await Promise.all(Array.from({ length: Math.min(WRITE_CONCURRENCY, groups.length) }, writeNext));
    if (again.length > 0) await notify(again);
    return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })) };
  };
}
