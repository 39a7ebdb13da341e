import { gunzipSync, gzipSync } from "node:zlib";
import { entryPosition, type InteractionSummary, summaryOf } from "../../../core/interactions";
import type { InteractionRecord } from "../../../core/record";
import { hasBodies, withoutBodies } from "../../../core/retention";
import { GC_AFTER_MS } from "./layout";
import type { IndexTable } from "./table";

/**
 * Items written before packs: an entry `e#<position>` and a record `r#<transaction id>` per
 * interaction. Nothing writes them since the index moved to packs (5802d8c, 2026-11-27), and nothing
 * moved them into packs: they are read, purged and expired where they are, beside the packs.
 *
 * Kept because such items can still be stored. A deployment writes them until it is updated to packs;
 * in AWS, TTL then collects each from its `gcAt`, 97 days after its call (GC_AFTER_MS): for an update
 * on the day packs landed, the last of them stay until about 2027-03-04 (listable, 90 days, until
 * about 2027-02-25), later for a later update. The local store (dynalite) ignores TTL: a data dir
 * written before packs keeps them until retention or a deletion removes them. A deletion must still
 * find a user's interactions among them, and a record redelivered across the update must not be
 * indexed twice. When no deployment or data dir from before packs remains, this file and its callers
 * go, and the four filter indexes of the table after them (tables.ts).
 */

const ENTRY = "e#";
const RECORD = "r#";

export const legacyEntryKey = (
  record: Pick<InteractionRecord, "project_id" | "started_at" | "transaction_id">,
) => ({
  projectId: record.project_id,
  sk: ENTRY + entryPosition(record.started_at, record.transaction_id),
});

/** The `entryId` (`<project>/<transaction>`) an entry's key names; undefined for any other item. */
export const legacyEntryIdOf = (projectId: string, sk: string): string | undefined =>
  sk.startsWith(ENTRY) ? `${projectId}/${sk.slice(ENTRY.length + 16)}` : undefined;

/** The record an item written before packs holds: gzipped JSON in `recordGz`, or, before that, a map. */
function legacyRecordOf(item: Record<string, unknown>): InteractionRecord {
  if (!(item.recordGz instanceof Uint8Array)) return item.record as InteractionRecord;
  try {
    return JSON.parse(gunzipSync(item.recordGz).toString("utf8")) as InteractionRecord;
  } catch (err) {
    // Names the item, never its content.
    throw new Error(
      `The stored record ${String(item.sk)} of project ${String(item.projectId)} is unreadable`,
      {
        cause: err,
      },
    );
  }
}

/** The summaries of entries written before packs, of [since, until] (epoch ms), newest first. */
export async function* legacyEntries(
  table: IndexTable,
  projectId: string,
  since: number,
  until: number,
): AsyncGenerator<InteractionSummary> {
  for await (const item of table.positionsUnder(projectId, ENTRY, since, until)) {
    yield summaryOf(item as InteractionRecord);
  }
}

/** The record of a transaction written before packs, if there is one. */
export async function legacyGet(
  table: IndexTable,
  projectId: string,
  transactionId: string,
): Promise<InteractionRecord | undefined> {
  const legacy = await table.get({ projectId, sk: RECORD + transactionId });
  return legacy && legacyRecordOf(legacy);
}

/** The transactions of a user written before packs. */
export async function* legacyIdsOfUser(table: IndexTable, projectId: string, userId: string) {
  const byUser = { expression: "user_id = :id", values: { ":id": userId } };
  for await (const item of table.beginningWith(projectId, ENTRY, "transaction_id", byUser)) {
    yield item.transaction_id as string;
  }
}

/** Purges one transaction written before packs: its entry, then its record. */
export async function legacyPurge(
  table: IndexTable,
  projectId: string,
  transactionId: string,
): Promise<boolean> {
  const stored = await table.get({ projectId, sk: RECORD + transactionId }, true);
  if (!stored) return false;
  const record = legacyRecordOf(stored);
  // The entry first: while the record is there, a repeat finds the entry's key in it.
  await table.delete(legacyEntryKey(record));
  await table.delete({ projectId, sk: RECORD + transactionId });
  return true;
}

/** Retention: removes the entries and records of [since, until) written before packs; returns how many. */
export async function legacyRemove(
  table: IndexTable,
  projectId: string,
  since: number,
  until: number,
): Promise<number> {
  let removed = 0;
  for (const id of await entriesBefore(table, projectId, since, until)) {
    await table.delete(id.entry);
    await table.delete({ projectId, sk: RECORD + id.transactionId });
    removed++;
  }
  return removed;
}

/** Retention: rewrites the records of [since, until) written before packs without bodies; returns how many. */
export async function legacyBlank(
  table: IndexTable,
  projectId: string,
  since: number,
  until: number,
): Promise<number> {
  let blanked = 0;
  for (const id of await entriesBefore(table, projectId, since, until)) {
    const stored = await table.get({ projectId, sk: RECORD + id.transactionId });
    const record = stored && legacyRecordOf(stored);
    if (!record || !hasBodies(record)) continue;
    await table.put({
      projectId,
      sk: RECORD + record.transaction_id,
      recordGz: gzipSync(JSON.stringify(withoutBodies(record))),
      gcAt: Math.floor((record.started_at + GC_AFTER_MS) / 1000),
    });
    blanked++;
  }
  return blanked;
}

/** The project's entries written before packs, of [since, until): their keys and transaction ids. */
async function entriesBefore(table: IndexTable, projectId: string, since: number, until: number) {
  const found: { entry: { projectId: string; sk: string }; transactionId: string }[] = [];
  if (until <= since) return found;
  const projection = "projectId, sk, transaction_id";
  for await (const item of table.positionsUnder(projectId, ENTRY, since, until - 1, projection)) {
    found.push({
      entry: { projectId, sk: item.sk as string },
      transactionId: item.transaction_id as string,
    });
  }
  return found;
}
