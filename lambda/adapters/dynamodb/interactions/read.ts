import type {
  InteractionFilters,
  InteractionListQuery,
  InteractionSummary,
} from "../../../core/interactions";
import { matchesStatus, modelSearchOf } from "../../../core/interactions";
import type { InteractionRecord } from "../../../core/record";
import {
  bucketOf,
  bucketPrefix,
  ENTRIES,
  listFor,
  newestFirst,
  newestOfPack,
  PACK_ROUND,
  pointerKey,
  positionOf,
  RECORDS,
  unpack,
} from "./layout";
import { legacyEntries, legacyGet } from "./legacy";
import type { IndexTable } from "./table";

/**
 * The dashboard's reads: a page of the list (newest first, filtered in memory within a scan budget)
 * and one interaction's whole record.
 */

/** Entries a filtered page may examine before it returns what it found, with a cursor to go on. */
export const PAGE_SCAN_BUDGET = 1000;

/** A page of the project's interactions, newest first, from the packs (or the list its filters name). */
export async function listPage(
  table: IndexTable,
  query: InteractionListQuery,
): Promise<{ interactions: InteractionSummary[]; next?: string }> {
  const { filters, projectId, after } = query;
  if (query.until <= query.since) return { interactions: [] };
  // Newest first from the cursor's time (or the range's end) down to the range's start.
  const high = after === undefined ? query.until - 1 : Math.min(query.until - 1, Number(after.slice(0, 15)));
  const list = listFor(filters);
  const entries = mergeNewestFirst(
    list === undefined
      ? packEntries(table, projectId, query.since, high)
      : listEntries(table, projectId, list, query.since, high),
    legacyEntries(table, projectId, query.since, high),
  );
  const found: InteractionSummary[] = [];
  let examined = 0;
  let last: string | undefined;
  for await (const entry of entries) {
    const position = positionOf(entry);
    // A transaction in two packs is one entry; the cursor's own entry and newer ones were listed.
    if (position === last || (after !== undefined && position >= after)) continue;
    last = position;
    examined++;
    if (matches(entry, filters)) found.push(entry);
    if (found.length > query.limit) {
      const rows = found.slice(0, query.limit);
      return { interactions: rows, next: positionOf(rows[rows.length - 1] as InteractionSummary) };
    }
    // A sparse filter: return what this page found, and where to go on from.
    if (examined >= PAGE_SCAN_BUDGET) return { interactions: found, next: position };
  }
  return { interactions: found };
}

/**
 * The summaries in packs of [since, until] (epoch ms, both included), newest first. Packs come in
 * the order of their newest call (their sort key), so a summary read is given once no pack yet to
 * read can hold a newer one: a page opens the packs it needs, not whole buckets.
 */
async function* packEntries(table: IndexTable, projectId: string, since: number, until: number) {
  const packs = table.between(
    projectId,
    bucketPrefix(ENTRIES, bucketOf(since)),
    `${bucketPrefix(ENTRIES, bucketOf(until))}~`,
    { projection: "projectId, sk, entriesGz", newestFirst: true, round: PACK_ROUND },
  );
  let held: InteractionSummary[] = [];
  for (;;) {
    const { value: next } = await packs.next();
    const bound = next === undefined ? Number.NEGATIVE_INFINITY : newestOfPack(next.sk as string);
    const ready = held.findIndex((entry) => entry.started_at <= bound);
    if (ready !== 0) {
      yield* ready === -1 ? held : held.slice(0, ready);
      held = ready === -1 ? [] : held.slice(ready);
    }
    if (next === undefined) return;
    const entries = unpack<InteractionSummary>(next, "entriesGz");
    held = [...held, ...entries.filter((e) => e.started_at >= since && e.started_at <= until)].sort(
      newestFirst,
    );
  }
}

/** The summaries in a list, of [since, until] (epoch ms, both included), newest first. */
export async function* listEntries(
  table: IndexTable,
  projectId: string,
  prefix: string,
  since: number,
  until: number,
) {
  for await (const item of table.positionsUnder(projectId, prefix, since, until, "entry")) {
    yield JSON.parse(item.entry as string) as InteractionSummary;
  }
}

/** One interaction's whole record: in the pack its pointer names, or written before packs. */
export async function getRecord(
  table: IndexTable,
  projectId: string,
  transactionId: string,
): Promise<InteractionRecord | undefined> {
  const pointer = await table.get(pointerKey(projectId, transactionId));
  if (pointer) {
    const pack = await table.get({ projectId, sk: RECORDS + (pointer.pack as string) });
    const records = pack ? unpack<InteractionRecord>(pack, "recordsGz") : [];
    const found = records.find((r) => r.transaction_id === transactionId);
    if (found) return found;
  }
  return legacyGet(table, projectId, transactionId);
}

/** Whether an entry passes a page's filters. */
function matches(entry: InteractionSummary, filters: InteractionFilters): boolean {
  if (filters.vendor !== undefined && entry.vendor !== filters.vendor) return false;
  if (filters.userId !== undefined && entry.user_id !== filters.userId) return false;
  if (filters.keyId !== undefined && entry.key_id !== filters.keyId) return false;
  if (filters.billingMode !== undefined && entry.billing_mode !== filters.billingMode) return false;
  if (filters.status !== undefined && !matchesStatus(entry, filters.status)) return false;
  if (filters.model !== undefined) {
    if (entry.model === null || !modelSearchOf(entry.model).includes(filters.model)) return false;
  }
  return true;
}

/** Two newest-first streams as one, newest first. */
async function* mergeNewestFirst(
  a: AsyncIterator<InteractionSummary>,
  b: AsyncIterator<InteractionSummary>,
): AsyncGenerator<InteractionSummary> {
  let [left, right] = await Promise.all([a.next(), b.next()]);
  while (!left.done || !right.done) {
    if (right.done || (!left.done && positionOf(left.value) >= positionOf(right.value))) {
      yield left.value as InteractionSummary;
      left = await a.next();
    } else {
      yield right.value;
      right = await b.next();
    }
  }
}
