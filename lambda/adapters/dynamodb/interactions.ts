import { createHash } from "node:crypto";
import { gunzipSync, gzipSync } from "node:zlib";
import {
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { breakdownKeysOf, breakdownRowId } from "../../core/breakdowns";
import {
  DAY_MS,
  entryPosition,
  INDEX_RETENTION_DAYS,
  type InteractionFilters,
  type InteractionIndex,
  type InteractionListQuery,
  type InteractionSummary,
  modelSearchOf,
  positionRange,
  statusClass,
  summaryOf,
} from "../../core/interactions";
import { boundedKeyPart, groupByRollup } from "../../core/interactions-usage";
import type { InteractionRecord } from "../../core/record";
import { hasBodies, type RetentionCutoffs, type RetentionIndex, withoutBodies } from "../../core/retention";
import { batchGet, batchWrite, queryItems } from "./paging";
import { breakdownTarget, DynamoUsageRollups, modelTarget, type RollupTarget } from "./rollups";
import type { TableNames } from "./tables";

/**
 * The recent-interactions index in the `interactions` table, with the rollups it keeps in step.
 *
 * Items, per project (partition `projectId`):
 *   `p#<bucket>#<newest>#<pack id>`, `q#<bucket>#<newest>#<pack id>`
 *                           a pack: up to 100 interactions of one write that started in the same 10
 *                           seconds (the bucket; `newest`, when the newest of them started; both
 *                           zero-padded epoch ms), in two items: `p#`, the summaries a list row shows
 *                           (`entriesGz`), and `q#`, the whole records, bodies included (`recordsGz`),
 *                           each gzipped JSON, so that a page reads no body. `v` counts an item's
 *                           rewrites (purges, retention). The pack id is a hash of its transaction
 *                           ids, so a repeated batch rewrites the same pack.
 *   `t#<transaction id>`    a pointer: the pack that holds the transaction (`pack`: its key without
 *                           `p#` or `q#`). The detail view and purges start from it.
 *   `u#<user>#<position>`,  lists (`entry`: the call's summary as JSON) of the calls that a filter
 *   `x#<position>`,         would look for among many: a user's (`<user>` hashed when long), the
 *   `b#<mode>#<position>`   failed calls, the BYOK or dual calls (`listsOf`). The user, status and
 *                           billing filters read them instead of every pack, as they read the filter
 *                           indexes before.
 *   `e#<position>`,         written before packs (one entry and one record item per interaction, the
 *   `r#<transaction id>`    entry copied into four filter indexes): still listed, opened, purged and
 *                           expired, and gone within the index's retention.
 * A managed call that succeeded and names no user is its pointer and a share of a pack: one item and
 * a fiftieth, where it was three (docs/architecture.md, "Packed interactions").
 *
 * A page reads packs in the order of their newest call (or the list its filters name), and the
 * entries written before in their order, merging the two; every filter is applied in memory, within
 * the page's scan budget. Packs of one bucket may overlap in time (a late call, a retry), so a call
 * read is given once no pack yet to read can hold a newer one.
 *
 * Writing a batch, exactly once per transaction however often it is repeated (the consumer repeats a
 * batch whose write failed, and re-sends records it sees again):
 *   w1  read the pointers, and the packs they name: a transaction is indexed once its pointer's
 *       pack summaries exist (written last, after its figures are in the rollups), or its entry
 *       written before packs exists
 *   w2  put the pointers, each naming the pack planned for it       (idempotent)
 *   w3  rollups: add the figures with an `add` marker                (once per marker, rollups.ts), to
 *       the model rollups and the key's and the user's rows, all at once
 *   w4  put the packs' records, the list entries, then the packs' summaries
 *                                                  (idempotent; from now on w1 skips their records)
 *   w5  rollups: remove the `add` markers
 * w2 to w5 run a round at a time: whole packs, up to 100 records (`ROUND_RECORDS`), so that a rollup
 * item carries at most a round's markers for each write in flight, whatever the batch's size.
 * A crash before w3 leaves nothing counted; between w3 and w4 the markers say "counted", so the retry
 * skips the addition and writes a pack (perhaps another one, if the retry's batch differs: the pointer
 * is rewritten to name it); after w4 the pack says it. A pack is only ever written after its pointers,
 * so every pack holding a transaction is in the bucket its pointer names, which a purge reads whole;
 * a transaction in two packs (a slow writer and its retry) is listed once.
 *
 * Purging transactions (deletion): read their pointers, delete their list entries (found in the
 * records), rewrite every pack of their buckets without them (or delete it; records first, then
 * summaries), then delete the pointers; entries written before packs go as before (entry,
 * then record). Safe to repeat. The rollups keep their figures (billing totals outlive a deletion); a
 * user's deletion also moves the user's rows to deleted users' rows (rollups.ts `forgetUser`). A
 * purge racing the consumer's write of the same transaction can leave it listed; deletion stops the
 * consumer writing deleted transactions first (tombstones), which closes that window.
 */

const ENTRIES = "p#";
const RECORDS = "q#";
const POINTER = "t#";
const USER = "u#";
const ERRORS = "x#";
const BILLING = "b#";
/** Written before packs. */
const ENTRY = "e#";
const RECORD = "r#";
/** A pack's time span: small enough that a page reads few packs, large enough that packs fill. */
const BUCKET_MS = 10_000;
const PACK_RECORDS = 100;
/**
 * Records taken through w2 to w5 together. Markers stay on a rollup item from w3 to w5, and every
 * update rewrites the whole item: with a batch's records all in flight at once, one project's item
 * grew to a marker per record of the batch (~40 bytes each; 1,000 records, 40 KB), each update cost
 * write units by that size, and a batch of ~10,000 would pass DynamoDB's 400 KB item limit.
 */
export const ROUND_RECORDS = PACK_RECORDS;
/** A pack's records as JSON, before gzip: a DynamoDB item holds 400 KB. */
const PACK_BYTES = 300_000;
/** Entries outlive the listing window by a week, then DynamoDB may collect them (in AWS). */
const GC_AFTER_MS = (INDEX_RETENTION_DAYS + 7) * DAY_MS;
/** Entries a filtered page may examine before it returns what it found, with a cursor to go on. */
export const PAGE_SCAN_BUDGET = 1000;
/** Packs per Query round of a listing (DynamoDB stops a round at 1 MB); entries written before packs, per round. */
const PACK_ROUND = 100;
const ENTRY_ROUND = 250;
const PURGE_CONCURRENCY = 8;
/** Tries of a pack rewrite that others keep beating to it. */
const REWRITE_ROUNDS = 30;
/** The last millisecond a bucket's 15 digits can name. */
const LAST_MS = 999_999_999_999_999;

/** Names the index in errors. */
const INDEX = "the interactions index";

const bucketOf = (startedAt: number) => startedAt - (((startedAt % BUCKET_MS) + BUCKET_MS) % BUCKET_MS);
const digits = (ms: number) => String(ms).padStart(15, "0");
type PackKind = typeof ENTRIES | typeof RECORDS;
/** A pack's key without its kind: `<bucket>#<newest>#<id>`. Its bucket part is the first 16 characters. */
const BUCKET_PART = 16;
/** Every pack of a kind and bucket has this sort key prefix. */
const bucketPrefix = (kind: PackKind, bucket: number) => `${kind}${digits(bucket)}#`;
/** When a pack's newest call started: the part of its sort key after the bucket. */
const newestOfPack = (sk: string) => Number(sk.slice(2 + BUCKET_PART, 2 + BUCKET_PART + 15));

const positionOf = (entry: Pick<InteractionSummary, "started_at" | "transaction_id">) =>
  entryPosition(entry.started_at, entry.transaction_id);
const newestFirst = (a: InteractionSummary, b: InteractionSummary) => {
  const [pa, pb] = [positionOf(a), positionOf(b)];
  return pa < pb ? 1 : pa > pb ? -1 : 0;
};

const pointerKey = (projectId: string, transactionId: string) => ({ projectId, sk: POINTER + transactionId });
/** Where a user's calls are listed: `u#<user>#` (the user id, hashed when long). */
const userPrefix = (userId: string) => `${USER}${boundedKeyPart(userId)}#`;
/** Where a billing mode's calls are listed: BYOK and dual only (managed calls are most calls). */
const billingPrefix = (mode: string | undefined) =>
  mode === undefined || mode === "managed" ? undefined : `${BILLING}${mode}#`;

/**
 * The lists a call is in besides its pack, by their key prefix: its user's, the failed calls' (a
 * status filter's, for the error class or an error code) and its billing mode's when not managed.
 * Each is of calls few enough that reading a pack's every call would be slow to find them.
 */
function listsOf(entry: InteractionSummary): string[] {
  const lists: string[] = [];
  if (entry.user_id !== null) lists.push(userPrefix(entry.user_id));
  if (statusClass(entry) === "error") lists.push(ERRORS);
  const billing = billingPrefix(entry.billing_mode);
  if (billing) lists.push(billing);
  return lists;
}

/** The list that a page's filters read, most selective first, if any: else the packs. */
function listFor(filters: InteractionFilters): string | undefined {
  if (filters.userId !== undefined) return userPrefix(filters.userId);
  // A stream that broke after its 200 is in the error class: only an error code is surely a failure.
  if (filters.status === "error" || (typeof filters.status === "number" && filters.status >= 400))
    return ERRORS;
  return billingPrefix(filters.billingMode);
}

const listEntryKeys = (projectId: string, entry: InteractionSummary) =>
  listsOf(entry).map((prefix) => ({ projectId, sk: prefix + positionOf(entry) }));
const legacyEntryKey = (record: Pick<InteractionRecord, "project_id" | "started_at" | "transaction_id">) => ({
  projectId: record.project_id,
  sk: ENTRY + entryPosition(record.started_at, record.transaction_id),
});

/** The interactions a batch adds to one pack, in order, with their JSON. */
interface PackPlan {
  projectId: string;
  /** `<bucket>#<newest>#<id>`: the pack's sort keys without their kind. */
  key: string;
  records: InteractionRecord[];
  json: string[];
}

/**
 * A batch's records in packs: by project and bucket, newest first, up to PACK_RECORDS or PACK_BYTES of
 * JSON each (a single larger record has a pack of its own). The id hashes the transaction ids.
 */
function planPacks(records: readonly InteractionRecord[]): PackPlan[] {
  const groups = new Map<string, InteractionRecord[]>();
  for (const record of records) {
    const group = `${record.project_id}/${bucketOf(record.started_at)}`;
    const list = groups.get(group);
    if (list) list.push(record);
    else groups.set(group, [record]);
  }
  const plans: PackPlan[] = [];
  for (const list of groups.values()) {
    list.sort(newestFirst);
    let current: Omit<PackPlan, "key"> | undefined;
    let bytes = 0;
    const close = () => {
      if (!current) return;
      const first = current.records[0] as InteractionRecord;
      const id = createHash("sha256")
        .update(current.records.map((r) => r.transaction_id).join("\n"))
        .digest("base64url")
        .slice(0, 22);
      plans.push({
        ...current,
        key: `${digits(bucketOf(first.started_at))}#${digits(first.started_at)}#${id}`,
      });
      current = undefined;
    };
    for (const record of list) {
      const json = JSON.stringify(record);
      if (current && (current.records.length >= PACK_RECORDS || bytes + json.length > PACK_BYTES)) close();
      current ??= { projectId: record.project_id, records: [], json: [] };
      if (current.records.length === 0) bytes = 0;
      current.records.push(record);
      current.json.push(json);
      bytes += json.length;
    }
    close();
  }
  return plans;
}

/** Packs in rounds of whole packs, each round up to ROUND_RECORDS records (a pack holds no more). */
function roundsOf(plans: readonly PackPlan[]): PackPlan[][] {
  const rounds: PackPlan[][] = [];
  let round: PackPlan[] = [];
  let count = 0;
  for (const plan of plans) {
    if (count > 0 && count + plan.records.length > ROUND_RECORDS) {
      rounds.push(round);
      round = [];
      count = 0;
    }
    round.push(plan);
    count += plan.records.length;
  }
  if (round.length > 0) rounds.push(round);
  return rounds;
}

/**
 * A pack's two items: its summaries (what a listing reads) and its records (what the detail view and
 * purges read), apart so that a page reads none of the bodies.
 */
function packItems(projectId: string, key: string, records: readonly InteractionRecord[], json?: string[]) {
  const gcAt = Math.floor((Number(key.slice(0, 15)) + BUCKET_MS + GC_AFTER_MS) / 1000);
  return {
    entries: (v: number) => ({
      projectId,
      sk: ENTRIES + key,
      entriesGz: gzipSync(JSON.stringify(records.map(summaryOf))),
      v,
      gcAt,
    }),
    records: (v: number) => ({
      projectId,
      sk: RECORDS + key,
      recordsGz: gzipSync(`[${(json ?? records.map((r) => JSON.stringify(r))).join(",")}]`),
      v,
      gcAt,
    }),
  };
}

/** A call in each of its lists: the summary a row shows, as JSON. */
function listEntryItems(record: InteractionRecord): Record<string, unknown>[] {
  const entry = summaryOf(record);
  const json = JSON.stringify(entry);
  const gcAt = Math.floor((record.started_at + GC_AFTER_MS) / 1000);
  return listEntryKeys(record.project_id, entry).map((key) => ({ ...key, entry: json, gcAt }));
}

/** The JSON array a pack attribute holds; an unreadable one names the item, never its content. */
function unpack<T>(item: Record<string, unknown>, attribute: "entriesGz" | "recordsGz"): T[] {
  try {
    return JSON.parse(gunzipSync(item[attribute] as Uint8Array).toString("utf8")) as T[];
  } catch (err) {
    throw new Error(`The stored pack ${String(item.sk)} of project ${String(item.projectId)} is unreadable`, {
      cause: err,
    });
  }
}

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

/** Whether an entry passes a page's filters. */
function matches(entry: InteractionSummary, filters: InteractionFilters): boolean {
  if (filters.vendor !== undefined && entry.vendor !== filters.vendor) return false;
  if (filters.userId !== undefined && entry.user_id !== filters.userId) return false;
  if (filters.keyId !== undefined && entry.key_id !== filters.keyId) return false;
  if (filters.billingMode !== undefined && entry.billing_mode !== filters.billingMode) return false;
  if (typeof filters.status === "number" && entry.status_code !== filters.status) return false;
  if (typeof filters.status === "string" && statusClass(entry) !== filters.status) return false;
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

const marshallOptions = { removeUndefinedValues: true };
const isConflict = (err: unknown) => (err as Error).name === "ConditionalCheckFailedException";

export class DynamoInteractionIndex implements InteractionIndex, RetentionIndex {
  /** As a deletion's copy purger. */
  readonly name = "dashboard index";
  readonly rollups: DynamoUsageRollups;

  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "interactions" | "usageRollups">,
  ) {
    this.rollups = new DynamoUsageRollups(db, tables);
  }

  async write(records: readonly InteractionRecord[]): Promise<void> {
    const unique = [...new Map(records.map((r) => [entryId(r), r])).values()];
    const indexed = await this.indexedAmong(unique);
    const fresh = unique.filter((r) => !indexed.has(entryId(r)));
    const stale = unique.filter((r) => indexed.has(entryId(r)));

    for (const round of roundsOf(planPacks(fresh))) await this.writeRound(round);
    // A repeat of a write that stopped after w4 may have left `add` markers behind.
    await Promise.all(
      rollupGroups(stale).map((g) => this.rollups.clear(g.projectId, g.target, ids(g.records))),
    );
  }

  /** w2 to w5 for the records of these packs. */
  private async writeRound(plans: readonly PackPlan[]): Promise<void> {
    const records = plans.flatMap((plan) => plan.records);
    await this.batchWrite(
      plans.flatMap((plan) =>
        // Object.assign, not a spread: on Node 20 a spread with more properties after it costs ~1 µs.
        plan.records.map((r) =>
          Object.assign(pointerKey(plan.projectId, r.transaction_id), {
            pack: plan.key,
            gcAt: Math.floor((r.started_at + GC_AFTER_MS) / 1000),
          }),
        ),
      ),
    );
    const groups = rollupGroups(records);
    await Promise.all(groups.map((g) => this.rollups.add(g.projectId, g.target, g.records)));
    const items = plans.map((plan) => packItems(plan.projectId, plan.key, plan.records, plan.json));
    // The records and the list entries first: a pack's summaries say it is complete.
    await this.batchWrite(items.map((item) => item.records(1)));
    await this.batchWrite(records.flatMap(listEntryItems));
    await this.batchWrite(items.map((item) => item.entries(1)));
    await Promise.all(groups.map((g) => this.rollups.clear(g.projectId, g.target, ids(g.records))));
  }

  async list(query: InteractionListQuery): Promise<{ interactions: InteractionSummary[]; next?: string }> {
    const { filters, projectId, after } = query;
    if (query.until <= query.since) return { interactions: [] };
    // Newest first from the cursor's time (or the range's end) down to the range's start.
    const high =
      after === undefined ? query.until - 1 : Math.min(query.until - 1, Number(after.slice(0, 15)));
    const list = listFor(filters);
    const entries = mergeNewestFirst(
      list === undefined
        ? this.packEntries(projectId, query.since, high)
        : this.listEntries(projectId, list, query.since, high),
      this.legacyEntries(projectId, query.since, high),
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
  private async *packEntries(projectId: string, since: number, until: number) {
    const packs = this.between(
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
  private async *listEntries(projectId: string, prefix: string, since: number, until: number) {
    for await (const item of this.positionsUnder(projectId, prefix, since, until, "entry")) {
      yield JSON.parse(item.entry as string) as InteractionSummary;
    }
  }

  /** The summaries of entries written before packs, of [since, until] (epoch ms), newest first. */
  private async *legacyEntries(projectId: string, since: number, until: number) {
    for await (const item of this.positionsUnder(projectId, ENTRY, since, until)) {
      yield summaryOf(item as InteractionRecord);
    }
  }

  /** The items under `<prefix><position>` of [since, until] (epoch ms, both included), newest first. */
  private async *positionsUnder(
    projectId: string,
    prefix: string,
    since: number,
    until: number,
    projection?: string,
  ) {
    const { low, high } = positionRange(since, until + 1);
    yield* this.between(projectId, prefix + low, prefix + high, {
      projection,
      newestFirst: true,
      round: ENTRY_ROUND,
    });
  }

  async get(projectId: string, transactionId: string): Promise<InteractionRecord | undefined> {
    const pointer = await this.getItem(pointerKey(projectId, transactionId));
    if (pointer) {
      const pack = await this.getItem({ projectId, sk: RECORDS + (pointer.pack as string) });
      const records = pack ? unpack<InteractionRecord>(pack, "recordsGz") : [];
      const found = records.find((r) => r.transaction_id === transactionId);
      if (found) return found;
    }
    const legacy = await this.getItem({ projectId, sk: RECORD + transactionId });
    return legacy && legacyRecordOf(legacy);
  }

  /**
   * Retention: the project's interactions of days before `recordsBefore` leave the index (packs and
   * pointers; entries and records written before), and those of days before `bodiesBefore` lose their
   * bodies. The rollups keep their figures: billing totals outlive the records. Each step is idempotent.
   */
  async expire(projectId: string, cutoffs: RetentionCutoffs): Promise<{ removed: number; blanked: number }> {
    const dayStart = (day: string) => Date.parse(`${day}T00:00:00Z`);
    let removed = 0;
    let blanked = 0;
    const recordsEnd = cutoffs.recordsBefore === undefined ? 0 : dayStart(cutoffs.recordsBefore);
    if (recordsEnd > 0) {
      // The records and their pointers first, then the summaries, which a repeat lists again.
      for await (const pack of this.packsOf(RECORDS, projectId, 0, recordsEnd, "projectId, sk, recordsGz")) {
        const records = unpack<InteractionRecord>(pack, "recordsGz");
        await this.batchDelete([
          ...records.map((r) => pointerKey(projectId, r.transaction_id)),
          ...records.flatMap((r) => listEntryKeys(projectId, r)),
        ]);
        await this.deleteItem({ projectId, sk: pack.sk as string });
      }
      for await (const pack of this.packsOf(ENTRIES, projectId, 0, recordsEnd, "projectId, sk, entriesGz")) {
        removed += unpack<InteractionSummary>(pack, "entriesGz").length;
        await this.deleteItem({ projectId, sk: pack.sk as string });
      }
      for (const id of await this.legacyEntriesBefore(projectId, 0, recordsEnd)) {
        await this.deleteItem(id.entry);
        await this.deleteItem({ projectId, sk: RECORD + id.transactionId });
        removed++;
      }
    }
    if (cutoffs.bodiesBefore !== undefined) {
      const bodiesEnd = dayStart(cutoffs.bodiesBefore);
      for await (const pack of this.packsOf(RECORDS, projectId, recordsEnd, bodiesEnd, "projectId, sk")) {
        const before = await this.rewritePack<InteractionRecord>(projectId, pack.sk as string, (records) =>
          records.some(hasBodies) ? records.map((r) => (hasBodies(r) ? withoutBodies(r) : r)) : undefined,
        );
        blanked += before?.filter(hasBodies).length ?? 0;
      }
      for (const id of await this.legacyEntriesBefore(projectId, recordsEnd, bodiesEnd)) {
        const stored = await this.getItem({ projectId, sk: RECORD + id.transactionId });
        const record = stored && legacyRecordOf(stored);
        if (!record || !hasBodies(record)) continue;
        await this.db.send(
          new PutItemCommand({
            TableName: this.tables.interactions,
            Item: marshall(
              {
                projectId,
                sk: RECORD + record.transaction_id,
                recordGz: gzipSync(JSON.stringify(withoutBodies(record))),
                gcAt: Math.floor((record.started_at + GC_AFTER_MS) / 1000),
              },
              marshallOptions,
            ),
          }),
        );
        blanked++;
      }
    }
    return { removed, blanked };
  }

  /** The project's packs of a kind, of buckets starting in [since, until), oldest first, with these attributes. */
  private async *packsOf(
    kind: PackKind,
    projectId: string,
    since: number,
    until: number,
    projection: string,
  ) {
    if (until <= since) return;
    // Bucket starts below `until`; buckets never straddle a day.
    const high = bucketPrefix(kind, bucketOf(until - 1)).replace(/#$/, "$");
    yield* this.between(projectId, bucketPrefix(kind, bucketOf(since)), high, {
      projection,
      round: PACK_ROUND,
    });
  }

  /** The project's items with a sort key in [low, high], page by page. */
  private between(
    projectId: string,
    low: string,
    high: string,
    options: { projection?: string; newestFirst?: boolean; round: number },
  ): AsyncGenerator<Record<string, unknown>, undefined> {
    return queryItems(this.db, {
      TableName: this.tables.interactions,
      KeyConditionExpression: "projectId = :p AND sk BETWEEN :low AND :high",
      ExpressionAttributeValues: marshall({ ":p": projectId, ":low": low, ":high": high }),
      ...(options.projection ? { ProjectionExpression: options.projection } : {}),
      ScanIndexForward: !options.newestFirst,
      Limit: options.round,
    });
  }

  /** The project's entries written before packs, of [since, until): their keys and transaction ids. */
  private async legacyEntriesBefore(projectId: string, since: number, until: number) {
    const found: { entry: { projectId: string; sk: string }; transactionId: string }[] = [];
    if (until <= since) return found;
    const projection = "projectId, sk, transaction_id";
    for await (const item of this.positionsUnder(projectId, ENTRY, since, until - 1, projection)) {
      found.push({
        entry: { projectId, sk: item.sk as string },
        transactionId: item.transaction_id as string,
      });
    }
    return found;
  }

  /**
   * Rewrites one pack (its summaries or its records, as `sk` says) with what `change` makes of them
   * (undefined: leave it; none: delete it), unless another rewrite got there first, then again from
   * what that one left. Returns what the pack held before (undefined when it is gone or was left).
   */
  private async rewritePack<T extends InteractionSummary>(
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
      const item = await this.getItem({ projectId, sk }, true);
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
          await this.db.send(
            new DeleteItemCommand({
              TableName: this.tables.interactions,
              Key: marshall({ projectId, sk }),
              ...condition,
            }),
          );
        } else {
          const { entries, records } = packItems(
            projectId,
            sk.slice(2),
            next as unknown as InteractionRecord[],
          );
          const rewritten = (attribute === "recordsGz" ? records : entries)((item.v as number) + 1);
          await this.db.send(
            new PutItemCommand({
              TableName: this.tables.interactions,
              Item: marshall(rewritten, marshallOptions),
              ...condition,
            }),
          );
        }
        return held;
      } catch (err) {
        if (!isConflict(err)) throw err;
      }
    }
    throw new Error("the interactions index kept changing a pack under a rewrite");
  }

  /**
   * Deletion: the user's interactions leave the index, and the user's usage rows lose the user id
   * (their figures stay, as a deleted user's). Returns how many interactions were purged.
   */
  async purgeUser(projectId: string, userId: string): Promise<number> {
    const ids: string[] = [];
    for await (const entry of this.listEntries(projectId, userPrefix(userId), 0, LAST_MS)) {
      // A long user id's key is a hash: the entry says whose call it is.
      if (entry.user_id === userId) ids.push(entry.transaction_id);
    }
    const byUser = { expression: "user_id = :id", values: { ":id": userId } };
    for await (const item of this.itemsBeginningWith(projectId, ENTRY, "transaction_id", byUser)) {
      ids.push(item.transaction_id as string);
    }
    const purged = await this.purgeTransactions(projectId, ids);
    await this.rollups.forgetUser(projectId, userId);
    return purged;
  }

  /** Deletion: these transactions leave the index (unknown ids are ignored); the rollups keep them. */
  async purgeTransactions(projectId: string, transactionIds: readonly string[]): Promise<number> {
    const wanted = [...new Set(transactionIds)];
    const pointers = await this.batchGet(
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
      const records = await this.packsWithPrefix(projectId, RECORDS + bucket);
      for (const sk of records) {
        const pack = await this.getItem({ projectId, sk }, true);
        const held = pack ? unpack<InteractionRecord>(pack, "recordsGz") : [];
        await this.batchDelete(
          held.filter((r) => gone.has(r.transaction_id)).flatMap((r) => listEntryKeys(projectId, r)),
        );
      }
      // Then every pack of the bucket (a retry may have packed a call twice), the records first.
      for (const kind of [RECORDS, ENTRIES] as const) {
        for (const pack of await this.packsWithPrefix(projectId, kind + bucket)) {
          await this.rewritePack(projectId, pack, without(gone));
        }
      }
      await this.batchDelete([...gone].map((id) => pointerKey(projectId, id)));
      for (const id of gone) purged.add(id);
    });
    await inParallel(wanted, async (id) => {
      if (await this.purgeLegacy(projectId, id)) purged.add(id);
    });
    return purged.size;
  }

  /** The sort keys of a bucket's packs. */
  private async packsWithPrefix(projectId: string, prefix: string): Promise<string[]> {
    const found: string[] = [];
    for await (const item of this.itemsBeginningWith(projectId, prefix, "sk", undefined, true)) {
      found.push(item.sk as string);
    }
    return found;
  }

  /** The project's items whose sort key begins with `prefix`, with these attributes, through a filter. */
  private itemsBeginningWith(
    projectId: string,
    prefix: string,
    projection: string,
    filter?: { expression: string; values: Record<string, unknown> },
    consistent = false,
  ): AsyncGenerator<Record<string, unknown>, undefined> {
    return queryItems(this.db, {
      TableName: this.tables.interactions,
      KeyConditionExpression: "projectId = :p AND begins_with(sk, :prefix)",
      ...(filter ? { FilterExpression: filter.expression } : {}),
      ProjectionExpression: projection,
      ExpressionAttributeValues: marshall({ ":p": projectId, ":prefix": prefix, ...filter?.values }),
      ConsistentRead: consistent,
    });
  }

  /** Purges one transaction written before packs: its entry, then its record. */
  private async purgeLegacy(projectId: string, transactionId: string): Promise<boolean> {
    const stored = await this.getItem({ projectId, sk: RECORD + transactionId }, true);
    if (!stored) return false;
    const record = legacyRecordOf(stored);
    // The entry first: while the record is there, a repeat finds the entry's key in it.
    await this.deleteItem(legacyEntryKey(record));
    await this.deleteItem({ projectId, sk: RECORD + transactionId });
    return true;
  }

  /** `entryId` of the records already indexed: their pointer's pack exists, or their entry written before packs. */
  private async indexedAmong(records: readonly InteractionRecord[]): Promise<Set<string>> {
    const keys = records.flatMap((r) => [pointerKey(r.project_id, r.transaction_id), legacyEntryKey(r)]);
    const found = await this.batchGet(keys, "projectId, sk, pack");
    const indexed = new Set<string>();
    // The summaries' item of each pack a pointer names, with the transactions that point to it.
    const pointed = new Map<string, { key: { projectId: string; sk: string }; ids: string[] }>();
    for (const item of found) {
      const { projectId, sk } = item as { projectId: string; sk: string };
      if (sk.startsWith(ENTRY)) {
        indexed.add(`${projectId}/${sk.slice(ENTRY.length + 16)}`);
        continue;
      }
      const key = { projectId, sk: ENTRIES + (item.pack as string) };
      const pack = pointed.get(`${projectId}/${key.sk}`) ?? { key, ids: [] };
      pack.ids.push(`${projectId}/${sk.slice(POINTER.length)}`);
      pointed.set(`${projectId}/${key.sk}`, pack);
    }
    const packs = await this.batchGet(
      [...pointed.values()].map((pack) => pack.key),
      "projectId, sk",
    );
    for (const pack of packs) {
      for (const id of pointed.get(`${pack.projectId}/${pack.sk}`)?.ids ?? []) indexed.add(id);
    }
    return indexed;
  }

  private async deleteItem(key: Record<string, string>): Promise<void> {
    await this.db.send(new DeleteItemCommand({ TableName: this.tables.interactions, Key: marshall(key) }));
  }

  private async getItem(key: Record<string, string>, consistent = false) {
    const out = await this.db.send(
      new GetItemCommand({
        TableName: this.tables.interactions,
        Key: marshall(key),
        ConsistentRead: consistent,
      }),
    );
    return out.Item && unmarshall(out.Item);
  }

  /** The items of these keys that exist (consistent reads), with these attributes. */
  private async batchGet(keys: readonly Record<string, string>[], projection: string) {
    const found = await batchGet(
      this.db,
      this.tables.interactions,
      keys.map((k) => marshall(k)),
      { ProjectionExpression: projection, ConsistentRead: true },
      INDEX,
    );
    return found.map((item): Record<string, unknown> => unmarshall(item));
  }

  private batchWrite(items: readonly Record<string, unknown>[]): Promise<void> {
    return this.batchSend(items.map((item) => ({ PutRequest: { Item: marshall(item, marshallOptions) } })));
  }

  private batchDelete(keys: readonly Record<string, string>[]): Promise<void> {
    return this.batchSend(keys.map((key) => ({ DeleteRequest: { Key: marshall(key) } })));
  }

  private batchSend(requests: readonly WriteRequest[]): Promise<void> {
    return batchWrite(this.db, this.tables.interactions, requests, INDEX);
  }
}

/** Runs `task` over `items`, PURGE_CONCURRENCY at a time. */
async function inParallel<T>(items: readonly T[], task: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const next = async (): Promise<void> => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await task(item);
  };
  await Promise.all(Array.from({ length: Math.min(PURGE_CONCURRENCY, queue.length) }, next));
}

const ids = (records: readonly InteractionRecord[]) => records.map((r) => r.transaction_id);

/** Project and transaction: unique across projects (a project id has no `/`). */
function entryId(record: InteractionRecord): string {
  return `${record.project_id}/${record.transaction_id}`;
}

/**
 * Records grouped by project and rollup item (the model rollup, the key's row, the user's row): one
 * counter update per group.
 */
function rollupGroups(records: readonly InteractionRecord[]) {
  const byProject = new Map<string, InteractionRecord[]>();
  for (const record of records) {
    const list = byProject.get(record.project_id);
    if (list) list.push(record);
    else byProject.set(record.project_id, [record]);
  }
  return [...byProject].flatMap(([projectId, list]) => {
    const groups: { projectId: string; target: RollupTarget; records: InteractionRecord[] }[] = [
      ...groupByRollup(list).values(),
    ].map((group) => ({ projectId, target: modelTarget(group.key), records: group.records }));
    const rows = new Map<string, { projectId: string; target: RollupTarget; records: InteractionRecord[] }>();
    for (const record of list) {
      for (const key of breakdownKeysOf(record)) {
        const id = breakdownRowId(key);
        const group = rows.get(id);
        if (group) group.records.push(record);
        else rows.set(id, { projectId, target: breakdownTarget(key), records: [record] });
      }
    }
    return [...groups, ...rows.values()];
  });
}
