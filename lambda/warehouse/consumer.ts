import { randomBytes } from "node:crypto";
import { type TombstoneReader, tombstoneMatcher } from "../core/deletion";
import type { Delivery, DeliveryLedger } from "../core/delivery-ledger";
import { type ErasedUsageCodec, erasedUsageOf, erasedUsagePartition } from "../core/erased-usage";
import { errorFields, type Logger } from "../core/logger";
import type { ObjectStore } from "../core/object-store";
import type { BatchHandler, BatchResult, DeadLetter, DeadLetterSink, QueueMessage } from "../core/queue";
import { type InteractionRecord, parseRecord, partitionPrefix, RecordError, recordDay } from "../core/record";
import type { RecordCodec } from "../core/record-codec";

export interface ConsumerDeps {
  objects: ObjectStore;
  /** The file format (Parquet: `adapters/parquet/codec.ts`). */
  codec: RecordCodec;
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
  /**
   * Dropped records that were never written keep their money as erased usage (core/erased-usage.ts),
   * claimed in the ledger like a warehouse file so that a redelivery counts them once. Absent: they are
   * dropped whole.
   */
  erasedUsage?: ErasedUsageCodec;
}

export type WrittenListener = (records: InteractionRecord[]) => Promise<void>;

interface Accepted {
  messageId: string;
  record: InteractionRecord;
}

/** A record to write, and the file it was claimed on before, if any (a writer that ended). */
interface ToWrite extends Accepted {
  replaces?: string;
}

/** Partitions written at once; a batch usually touches a few projects. */
const WRITE_CONCURRENCY = 4;

/**
 * A new name for every attempt (first timestamp, random part), so that no two writers ever put the
 * same key: a file holds exactly the ids claimed on it (the ledger's protocol, adapters/fs/ledger.ts).
 */
function fileName(records: readonly InteractionRecord[]): string {
  const first = new Date(records[0]?.started_at ?? 0).toISOString().replace(/[-:.]/g, "");
  return `${first}-${randomBytes(10).toString("hex")}.parquet`;
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
 * records already written (by transaction id, the two-phase delivery of adapters/fs/ledger.ts),
 * writes one Parquet file per project and day, and reports as failures only the messages whose file
 * could not be written or whose record another writer holds, so only those come back.
 */
export function createWarehouseConsumer(deps: ConsumerDeps): BatchHandler {
  const clock = deps.clock ?? Date.now;

  /**
   * The files among those ids are claimed on that are in the object store: their writer put them but
   * did not commit them (it died, its commit failed, or it is about to). Each is committed now: its
   * ids count as written.
   */
  const landedFiles = async (deliveries: Map<string, Delivery>): Promise<Set<string>> => {
    const open = new Set<string>();
    for (const delivery of deliveries.values()) if (delivery.state === "claimed") open.add(delivery.file);
    const landed = new Set<string>();
    await Promise.all(
      [...open].map(async (file) => {
        if (!(await deps.objects.exists(file))) return;
        await deps.ledger.commit(file);
        landed.add(file);
      }),
    );
    return landed;
  };

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
    const deliveries = await deps.ledger.lookup([...byTransaction.keys()]);
    const landed = await landedFiles(deliveries);
    // A claim on a file found gone: compaction moves a file's rows and commits the file before it
    // removes it, so a commit made after our lookup is read again now that the file was seen gone.
    const gone = [...deliveries]
      .filter(([, d]) => d.state === "claimed" && !d.live && !landed.has(d.file))
      .map(([id]) => id);
    if (gone.length > 0)
      for (const [id, delivery] of await deps.ledger.lookup(gone)) deliveries.set(id, delivery);
    const partitions = new Map<string, ToWrite[]>();
    const again: Accepted[] = [];
    const claimedElsewhere: string[] = [];
    const erasedPartitions = new Map<string, ToWrite[]>();
    for (const [transactionId, accepted] of byTransaction) {
      const delivery = deliveries.get(transactionId);
      const written = delivery?.state === "written" || (delivery !== undefined && landed.has(delivery.file));
      if (tombstoned?.(accepted.record)) {
        dropped++;
        // Never written: the call's money stays, as erased usage. Written: it is in a file the deletion
        // rewrites (which keeps its money) or already in erased usage; either way counted once.
        if (!deps.erasedUsage || written) continue;
        if (delivery?.live) {
          claimedElsewhere.push(accepted.messageId);
          continue;
        }
        const prefix = erasedUsagePartition(accepted.record.project_id, recordDay(accepted.record));
        const group = erasedPartitions.get(prefix) ?? [];
        group.push(delivery ? { ...accepted, replaces: delivery.file } : accepted);
        erasedPartitions.set(prefix, group);
        continue;
      }
      if (written) {
        again.push(accepted);
        continue;
      }
      if (delivery?.live) {
        claimedElsewhere.push(accepted.messageId);
        continue;
      }
      const prefix = partitionPrefix(accepted.record.project_id, recordDay(accepted.record));
      const toWrite: ToWrite = delivery ? { ...accepted, replaces: delivery.file } : accepted;
      const group = partitions.get(prefix);
      if (group) group.push(toWrite);
      else partitions.set(prefix, [toWrite]);
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

    const abandon = (key: string) =>
      deps.ledger.abandon(key).catch((err: unknown) => {
        deps.logger.error("abandoning a warehouse file's claims failed; they end with their lease", {
          ...errorFields(err),
        });
      });

    /**
     * Claims the records for a new file, puts the file with those claimed, and commits it. `erased`: the
     * file is the records' erased usage (their sums), and no listener is told of them.
     */
    const write = async (prefix: string, group: ToWrite[], erased = false): Promise<void> => {
      group.sort((a, b) => a.record.started_at - b.record.started_at);
      const key = prefix + fileName(group.map((a) => a.record));
      const failed = (err: unknown, accepted: Accepted[]) => {
        deps.logger.error("writing a warehouse file failed; its records will be retried", {
          ...errorFields(err),
          partition: prefix,
          count: accepted.length,
        });
        failures.push(...accepted.map((a) => a.messageId));
      };
      let won: Set<string>;
      try {
        won = await deps.ledger.claim(
          key,
          group.map((a) => ({
            id: a.record.transaction_id,
            ...(a.replaces !== undefined && { replaces: a.replaces }),
          })),
        );
      } catch (err) {
        failed(err, group);
        await abandon(key);
        return;
      }
      const claimed = group.filter((a) => won.has(a.record.transaction_id));
      claimedElsewhere.push(
        ...group.filter((a) => !won.has(a.record.transaction_id)).map((a) => a.messageId),
      );
      if (claimed.length === 0) return;
      try {
        const records = claimed.map((a) => a.record);
        const body =
          erased && deps.erasedUsage
            ? deps.erasedUsage.encode(
                erasedUsageOf(records, recordDay).get(recordDay(records[0] as InteractionRecord)) ?? [],
              )
            : deps.codec.encode(records);
        await deps.objects.put(key, body);
      } catch (err) {
        failed(err, claimed);
        // An error may still have written the file: then its claims stand, and the records' next
        // delivery finds it.
        if (!(await deps.objects.exists(key).catch(() => true))) await abandon(key);
        return;
      }
      try {
        await deps.ledger.commit(key);
      } catch (err) {
        deps.logger.warn("committing a warehouse file failed; its records' next delivery finds the file", {
          ...errorFields(err),
          partition: prefix,
          count: claimed.length,
        });
      }
      if (!erased) await notify(claimed);
    };

    const groups: [string, ToWrite[], boolean][] = [
      ...[...partitions].map(([prefix, group]): [string, ToWrite[], boolean] => [prefix, group, false]),
      ...[...erasedPartitions].map(([prefix, group]): [string, ToWrite[], boolean] => [prefix, group, true]),
    ];
    const writeNext = async (): Promise<void> => {
      for (let entry = groups.shift(); entry; entry = groups.shift()) await write(...entry);
    };
    await Promise.all(Array.from({ length: Math.min(WRITE_CONCURRENCY, groups.length) }, writeNext));
    if (claimedElsewhere.length > 0) {
      // Another consumer holds them (a message delivered twice at once, or a writer that died within
      // its lease): they come back after the visibility timeout and find its file, or its claim ended.
      deps.logger.info("records claimed by another writer; they will be retried", {
        metric: "warehouse.claimed_elsewhere",
        count: claimedElsewhere.length,
      });
      failures.push(...claimedElsewhere);
    }
    if (again.length > 0) await notify(again);
    return { batchItemFailures: failures.map((itemIdentifier) => ({ itemIdentifier })) };
  };
}
