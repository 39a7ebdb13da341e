import { marshall } from "@aws-sdk/util-dynamodb";
import type { InteractionSummary } from "../../../core/interactions";
import type { InteractionRecord } from "../../../core/record";
import { hasBodies, type RetentionCutoffs, withoutBodies } from "../../../core/retention";
import type { DynamoUsageRollups } from "../rollups";
import {
  BUCKET_PART,
  bucketOf,
  bucketPrefix,
  ENTRIES,
  LAST_MS,
  listEntryKeys,
  PACK_ROUND,
  type PackKind,
  POINTER,
  packItems,
  pointerKey,
  RECORDS,
  unpack,
  userPrefix,
} from "./layout";
import { legacyBlank, legacyIdsOfUser, legacyPurge, legacyRemove } from "./legacy";
import { listEntries } from "./read";
import { type IndexTable, isConflict } from "./table";

/**
 * What leaves the index: a deletion's transactions or user (purges, the protocol in ../interactions.ts)
 * and retention's days. Each step is safe to repeat; the rollups keep their figures.
 */

const PURGE_CONCURRENCY = 8;
/** Tries of a pack rewrite that others keep beating to it. */
const REWRITE_ROUNDS = 30;

/**
 * Deletion: the user's interactions leave the index, and the user's usage rows lose the user id
 * (their figures stay, as a deleted user's). Returns how many interactions were purged.
 */
export async function purgeUser(
  table: IndexTable,
  rollups: DynamoUsageRollups,
  projectId: string,
  userId: string,
): Promise<number> {
  const ids: string[] = [];
  for await (const entry of listEntries(table, projectId, userPrefix(userId), 0, LAST_MS)) {
    // A long user id's key is a hash: the entry says whose call it is.
    if (entry.user_id === userId) ids.push(entry.transaction_id);
  }
  for await (const id of legacyIdsOfUser(table, projectId, userId)) ids.push(id);
  const purged = await purgeTransactions(table, projectId, ids);
  await rollups.forgetUser(projectId, userId);
  return purged;
}

/** Deletion: these transactions leave the index (unknown ids are ignored); the rollups keep them. */
export async function purgeTransactions(
  table: IndexTable,
  projectId: string,
  transactionIds: readonly string[],
): Promise<number> {
  const wanted = [...new Set(transactionIds)];
  const pointers = await table.batchGet(
    wanted.map((id) => pointerKey(projectId, id)),
    "projectId, sk, pack",
  );
  const byBucket = new Map<string, Set<string>>();
  for (const pointer of pointers) {
    const bucket = (pointer.pack as string).slice(0, BUCKET_PART);
    const set = byBucket.get(bucket) ?? new Set<string>();
    set.add((pointer.sk as string).slice(POINTER.length));
    byBucket.set(bucket, set);
  }
  const purged = new Set<string>();
  const without = (gone: Set<string>) => (held: InteractionSummary[]) =>
    held.some((r) => gone.has(r.transaction_id))
      ? held.filter((r) => !gone.has(r.transaction_id))
      : undefined;
  await inParallel([...byBucket], async ([bucket, gone]) => {
    // Their list entries first, found in the records (written before them, removed after them).
    const records = await packsWithPrefix(table, projectId, RECORDS + bucket);
    for (const sk of records) {
      const pack = await table.get({ projectId, sk }, true);
      const held = pack ? unpack<InteractionRecord>(pack, "recordsGz") : [];
      await table.batchDelete(
        held.filter((r) => gone.has(r.transaction_id)).flatMap((r) => listEntryKeys(projectId, r)),
      );
    }
    // Then every pack of the bucket (a retry may have packed a call twice), the records first.
    for (const kind of [RECORDS, ENTRIES] as const) {
      for (const pack of await packsWithPrefix(table, projectId, kind + bucket)) {
        await rewritePack(table, projectId, pack, without(gone));
      }
    }
    await table.batchDelete([...gone].map((id) => pointerKey(projectId, id)));
    for (const id of gone) purged.add(id);
  });
  await inParallel(wanted, async (id) => {
    if (await legacyPurge(table, projectId, id)) purged.add(id);
  });
  return purged.size;
}

/**
 * Retention: the project's interactions of days before `recordsBefore` leave the index (packs and
 * pointers; entries and records written before), and those of days before `bodiesBefore` lose their
 * bodies. The rollups keep their figures: billing totals outlive the records. Each step is idempotent.
 */
export async function expire(
  table: IndexTable,
  projectId: string,
  cutoffs: RetentionCutoffs,
): Promise<{ removed: number; blanked: number }> {
  const dayStart = (day: string) => Date.parse(`${day}T00:00:00Z`);
  let removed = 0;
  let blanked = 0;
  const recordsEnd = cutoffs.recordsBefore === undefined ? 0 : dayStart(cutoffs.recordsBefore);
  if (recordsEnd > 0) {
    // The records and their pointers first, then the summaries, which a repeat lists again.
    for await (const pack of packsOf(table, RECORDS, projectId, 0, recordsEnd, "projectId, sk, recordsGz")) {
      const records = unpack<InteractionRecord>(pack, "recordsGz");
      await table.batchDelete([
        ...records.map((r) => pointerKey(projectId, r.transaction_id)),
        ...records.flatMap((r) => listEntryKeys(projectId, r)),
      ]);
      await table.delete({ projectId, sk: pack.sk as string });
    }
    for await (const pack of packsOf(table, ENTRIES, projectId, 0, recordsEnd, "projectId, sk, entriesGz")) {
      removed += unpack<InteractionSummary>(pack, "entriesGz").length;
      await table.delete({ projectId, sk: pack.sk as string });
    }
    removed += await legacyRemove(table, projectId, 0, recordsEnd);
  }
  if (cutoffs.bodiesBefore !== undefined) {
    const bodiesEnd = dayStart(cutoffs.bodiesBefore);
    for await (const pack of packsOf(table, RECORDS, projectId, recordsEnd, bodiesEnd, "projectId, sk")) {
      const before = await rewritePack<InteractionRecord>(table, projectId, pack.sk as string, (records) =>
        records.some(hasBodies) ? records.map((r) => (hasBodies(r) ? withoutBodies(r) : r)) : undefined,
      );
      blanked += before?.filter(hasBodies).length ?? 0;
    }
    blanked += await legacyBlank(table, projectId, recordsEnd, bodiesEnd);
  }
  return { removed, blanked };
}

/** The project's packs of a kind, of buckets starting in [since, until), oldest first, with these attributes. */
async function* packsOf(
  table: IndexTable,
  kind: PackKind,
  projectId: string,
  since: number,
  until: number,
  projection: string,
) {
  if (until <= since) return;
  // Bucket starts below `until`; buckets never straddle a day.
  const high = bucketPrefix(kind, bucketOf(until - 1)).replace(/#$/, "$");
  yield* table.between(projectId, bucketPrefix(kind, bucketOf(since)), high, {
    projection,
    round: PACK_ROUND,
  });
}

/** The sort keys of a bucket's packs. */
async function packsWithPrefix(table: IndexTable, projectId: string, prefix: string): Promise<string[]> {
  const found: string[] = [];
  for await (const item of table.beginningWith(projectId, prefix, "sk", undefined, true)) {
    found.push(item.sk as string);
  }
  return found;
}

/**
 * Rewrites one pack (its summaries or its records, as `sk` says) with what `change` makes of them
 * (undefined: leave it; none: delete it), unless another rewrite got there first, then again from
 * what that one left. Returns what the pack held before (undefined when it is gone or was left).
 */
async function rewritePack<T extends InteractionSummary>(
  table: IndexTable,
  projectId: string,
  sk: string,
  change: (held: T[]) => T[] | undefined,
): Promise<T[] | undefined> {
  const attribute = sk.startsWith(RECORDS) ? "recordsGz" : "entriesGz";
  for (let round = 0; round < REWRITE_ROUNDS; round++) {
    // Rewriters of one pack at once (purges, retention) take turns: each waits a random while.
    if (round > 0) {
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 10 * 2 ** Math.min(round, 6)));
    }
    const item = await table.get({ projectId, sk }, true);
    if (!item) return undefined;
    const held = unpack<T>(item, attribute);
    const next = change(held);
    if (next === undefined) return undefined;
    const condition = {
      ConditionExpression: "v = :v",
      ExpressionAttributeValues: marshall({ ":v": item.v }),
    };
    try {
      if (next.length === 0) {
        await table.delete({ projectId, sk }, condition);
      } else {
        const { entries, records } = packItems(
          projectId,
          sk.slice(2),
          next as unknown as InteractionRecord[],
        );
        await table.put((attribute === "recordsGz" ? records : entries)((item.v as number) + 1), condition);
      }
      return held;
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
  throw new Error("the interactions index kept changing a pack under a rewrite");
}

/** Runs `task` over `items`, PURGE_CONCURRENCY at a time. */
async function inParallel<T>(items: readonly T[], task: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const next = async (): Promise<void> => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await task(item);
  };
  await Promise.all(Array.from({ length: Math.min(PURGE_CONCURRENCY, queue.length) }, next));
}
