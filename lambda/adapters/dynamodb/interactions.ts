import { gunzipSync, gzipSync } from "node:zlib";
import {
  type AttributeValue,
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  BatchWriteItemCommand,
  type BatchWriteItemCommandOutput,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  type KeysAndAttributes,
  PutItemCommand,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
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
import { breakdownTarget, DynamoUsageRollups, modelTarget, type RollupTarget } from "./rollups";
import type { TableNames } from "./tables";

/**
 * The recent-interactions index in the `interactions` table, with the rollups it keeps in step.
 *
 * Items, per project (partition `projectId`):
 *   `e#<position>`        entry: the summary a list row shows, plus one key attribute per filter index
 *                         (`userKey`, `vendorKey`, `statusKey`, `billingKey`: `<project>#<value>`;
 *                         sparse where one value is most entries: `statusKey` on errors only,
 *                         `billingKey` on BYOK and dual calls only) and `model_search`, the model
 *                         lower-cased, that a model filter looks into
 *   `r#<transaction id>`  the whole record, bodies included, for the detail view and for purges: gzipped
 *                         JSON in `recordGz` (recordItem), or, written before, a map in `record`
 * A page is one Query on the table (no filter) or on the index of the most selective filter, newest
 * first, the other filters applied by DynamoDB on the way; so its cost depends on the page, not on
 * how many interactions the project has. The model filter (part of a name) and the key filter have no
 * index: they are applied on the way, within the page's scan budget.
 *
 * Writing a batch, exactly once per transaction however often it is repeated (the consumer repeats a
 * batch whose write failed, and re-sends records it sees again):
 *   w1  read which entries exist: an entry exists only once its figures are in the rollups (done)
 *   w2  put the records                                   (idempotent)
 *   w3  rollups: add the figures with an `add` marker     (once per marker, rollups.ts), to the
 *       model rollups and the key's and the user's rows, all at once
 *   w4  put the entries                                   (idempotent; from now on w1 skips them)
 *   w5  rollups: remove the `add` markers
 * A crash before w3 leaves nothing counted; between w3 and w4 the marker says "counted", so the retry
 * skips the addition and writes the entry; after w4 the entry says it.
 *
 * Purging one transaction (deletion): read the record (absent: nothing to do), delete its entry, then
 * the record; safe to repeat. The rollups keep its figures (billing totals outlive a deletion); a
 * user's deletion also moves the user's rows to deleted users' rows (rollups.ts `forgetUser`). A
 * purge racing the consumer's write of the same transaction can leave it listed; deletion stops the
 * consumer writing deleted transactions first (tombstones), which closes that window.
 */

const ENTRY = "e#";
const RECORD = "r#";
/** Entries outlive the listing window by a week, then DynamoDB may collect them (in AWS). */
const GC_AFTER_MS = (INDEX_RETENTION_DAYS + 7) * DAY_MS;
const READ_BATCH = 100;
const WRITE_BATCH = 25;
const MAX_ROUNDS = 8;
/** Entries a filtered page may examine before it returns what it found, with a cursor to go on. */
export const PAGE_SCAN_BUDGET = 1000;
const SCAN_ROUND = 250;
const PURGE_CONCURRENCY = 8;

const backoff = (round: number) =>
  round === 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, 25 * 2 ** round));

const chunks = <T>(items: readonly T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

const entryKey = (record: Pick<InteractionRecord, "project_id" | "started_at" | "transaction_id">) => ({
  projectId: record.project_id,
  sk: ENTRY + entryPosition(record.started_at, record.transaction_id),
});

/** The filter indexes, most selective first: a page uses the first one its filters name. */
const FILTER_INDEXES = [
  { index: "byUser", attribute: "userKey" },
  { index: "byStatus", attribute: "statusKey" },
  { index: "byBilling", attribute: "billingKey" },
  { index: "byVendor", attribute: "vendorKey" },
] as const;
type FilterAttribute = (typeof FILTER_INDEXES)[number]["attribute"];

/**
 * A record's item. The record is gzipped JSON: DynamoDB bills a write unit per KB of item, and a
 * record's bodies and field names compress well (a 2.0 KB chat record to 0.9 KB: three write units to
 * one; docs/aws.md). Only the detail view, retention and purges read it, one at a time.
 */
function recordItem(record: InteractionRecord): Record<string, unknown> {
  return {
    projectId: record.project_id,
    sk: RECORD + record.transaction_id,
    recordGz: gzipSync(JSON.stringify(record)),
    gcAt: Math.floor((record.started_at + GC_AFTER_MS) / 1000),
  };
}

/** The record a record item holds, in either form it was written in. */
function recordOf(item: Record<string, unknown>): InteractionRecord {
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

function entryItem(record: InteractionRecord): Record<string, unknown> {
  const project = record.project_id;
  const status = statusClass(record);
  return {
    ...entryKey(record),
    ...summaryOf(record),
    status_class: status,
    userKey: record.user_id === null ? undefined : `${project}#${boundedKeyPart(record.user_id)}`,
    model_search: record.model === null ? undefined : modelSearchOf(record.model),
    vendorKey: `${project}#${record.vendor}`,
    // Only errors are indexed by status: successes are most entries, so a success filter reads the
    // table itself, and each successful record is one index item (one DynamoDB write) less.
    statusKey: status === "error" ? `${project}#error` : undefined,
    // Likewise managed calls, what dmt bills: only BYOK and dual calls are indexed by billing mode.
    billingKey: billingPartition(project, record.billing_mode),
    gcAt: Math.floor((record.started_at + GC_AFTER_MS) / 1000),
  };
}

const marshallOptions = { removeUndefinedValues: true };

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
    const indexed = await this.existingEntries(unique);
    const fresh = unique.filter((r) => !indexed.has(entryId(r)));
    const stale = unique.filter((r) => indexed.has(entryId(r)));

    await this.batchWrite(fresh.map(recordItem));
    const groups = rollupGroups(fresh);
    await Promise.all(groups.map((g) => this.rollups.add(g.projectId, g.target, g.records)));
    await this.batchWrite(fresh.map(entryItem));
    await Promise.all(groups.map((g) => this.rollups.clear(g.projectId, g.target, ids(g.records))));
    // A repeat of a write that stopped after w4 may have left `add` markers behind.
    await Promise.all(
      rollupGroups(stale).map((g) => this.rollups.clear(g.projectId, g.target, ids(g.records))),
    );
  }

  async list(query: InteractionListQuery): Promise<{ interactions: InteractionSummary[]; next?: string }> {
    const { filters, projectId } = query;
    const keyValues: Record<FilterAttribute, string | undefined> = {
      userKey: filters.userId === undefined ? undefined : `${projectId}#${boundedKeyPart(filters.userId)}`,
      statusKey: statusPartition(projectId, filters.status),
      billingKey: billingPartition(projectId, filters.billingMode),
      vendorKey: filters.vendor === undefined ? undefined : `${projectId}#${filters.vendor}`,
    };
    const path = FILTER_INDEXES.find((f) => keyValues[f.attribute] !== undefined);
    const partition = path ? { name: path.attribute, value: keyValues[path.attribute] as string } : undefined;

    if (query.until <= query.since) return { interactions: [] };

    // Every filter is checked on the way: the one the index matched costs nothing and keeps hashed
    // keys honest; the others drop entries, so a page reads in larger rounds.
    const conditions: string[] = [];
    const values: Record<string, unknown> = {};
    let filtered = false;
    const check = (attribute: string, value: unknown, matchedBy?: FilterAttribute) => {
      const ref = `:f${conditions.length}`;
      conditions.push(`${attribute} = ${ref}`);
      values[ref] = value;
      if (matchedBy === undefined || matchedBy !== partition?.name) filtered = true;
    };
    if (filters.userId !== undefined) check("user_id", filters.userId, "userKey");
    if (filters.model !== undefined) {
      // Entries written before `model_search` existed are matched on the model as written.
      conditions.push(
        "(contains(model_search, :model) OR (attribute_not_exists(model_search) AND contains(model, :model)))",
      );
      values[":model"] = filters.model;
      filtered = true;
    }
    if (filters.keyId !== undefined) check("key_id", filters.keyId);
    if (filters.vendor !== undefined) check("vendor", filters.vendor, "vendorKey");
    if (filters.billingMode !== undefined) check("billing_mode", filters.billingMode, "billingKey");
    // The status index holds the error class: an exact code is a filter within its class.
    if (typeof filters.status === "number") check("status_code", filters.status);
    else if (filters.status !== undefined) check("status_class", filters.status, "statusKey");

    const { low, high } = positionRange(query.since, query.until);
    const input: QueryCommandInput = {
      TableName: this.tables.interactions,
      ...(path ? { IndexName: path.index } : {}),
      KeyConditionExpression: "#pk = :pk AND sk BETWEEN :low AND :high",
      ...(conditions.length > 0 ? { FilterExpression: conditions.join(" AND ") } : {}),
      ExpressionAttributeNames: { "#pk": partition?.name ?? "projectId" },
      ExpressionAttributeValues: marshall({
        ":pk": partition?.value ?? projectId,
        ":low": ENTRY + low,
        ":high": ENTRY + high,
        ...values,
      }),
      ScanIndexForward: false,
    };
    let start: Record<string, AttributeValue> | undefined =
      query.after === undefined
        ? undefined
        : marshall({
            projectId,
            sk: ENTRY + query.after,
            ...(partition ? { [partition.name]: partition.value } : {}),
          });

    const found: InteractionSummary[] = [];
    let examined = 0;
    for (;;) {
      // One more than the page tells whether another page follows without a second read.
      const wanted = query.limit + 1 - found.length;
      const page: QueryCommandOutput = await this.db.send(
        new QueryCommand({
          ...input,
          Limit: filtered ? Math.max(wanted, SCAN_ROUND) : wanted,
          ExclusiveStartKey: start,
        }),
      );
      examined += page.ScannedCount ?? 0;
      for (const item of page.Items ?? []) found.push(summaryOf(unmarshall(item) as InteractionRecord));
      start = page.LastEvaluatedKey;
      if (found.length > query.limit) {
        const rows = found.slice(0, query.limit);
        const last = rows[rows.length - 1] as InteractionSummary;
        return { interactions: rows, next: entryPosition(last.started_at, last.transaction_id) };
      }
      if (!start) return { interactions: found };
      if (examined >= PAGE_SCAN_BUDGET) {
        // A sparse filter: return what this page found, and where to go on from.
        return { interactions: found, next: (unmarshall(start).sk as string).slice(ENTRY.length) };
      }
    }
  }

  async get(projectId: string, transactionId: string): Promise<InteractionRecord | undefined> {
    const out = await this.db.send(
      new GetItemCommand({
        TableName: this.tables.interactions,
        Key: marshall({ projectId, sk: RECORD + transactionId }),
      }),
    );
    return out.Item && recordOf(unmarshall(out.Item));
  }

  /**
   * Retention: the project's entries of days before `recordsBefore` leave the index (entry and
   * record), and those of days before `bodiesBefore` lose their bodies. The rollups keep their
   * figures: billing totals outlive the records. Each step is idempotent.
   */
  async expire(projectId: string, cutoffs: RetentionCutoffs): Promise<{ removed: number; blanked: number }> {
    const dayStart = (day: string) => Date.parse(`${day}T00:00:00Z`);
    let removed = 0;
    let blanked = 0;
    const recordsEnd = cutoffs.recordsBefore === undefined ? 0 : dayStart(cutoffs.recordsBefore);
    if (recordsEnd > 0) {
      for (const id of await this.entriesBefore(projectId, 0, recordsEnd)) {
        await this.db.send(
          new DeleteItemCommand({ TableName: this.tables.interactions, Key: marshall(id.entry) }),
        );
        await this.db.send(
          new DeleteItemCommand({
            TableName: this.tables.interactions,
            Key: marshall({ projectId, sk: RECORD + id.transactionId }),
          }),
        );
        removed++;
      }
    }
    if (cutoffs.bodiesBefore !== undefined) {
      for (const id of await this.entriesBefore(projectId, recordsEnd, dayStart(cutoffs.bodiesBefore))) {
        const stored = await this.get(projectId, id.transactionId);
        if (!stored || !hasBodies(stored)) continue;
        await this.db.send(
          new PutItemCommand({
            TableName: this.tables.interactions,
            Item: marshall(recordItem(withoutBodies(stored)), marshallOptions),
          }),
        );
        blanked++;
      }
    }
    return { removed, blanked };
  }

  /** The project's entries of [since, until): their keys and transaction ids. */
  private async entriesBefore(projectId: string, since: number, until: number) {
    const found: { entry: { projectId: string; sk: string }; transactionId: string }[] = [];
    if (until <= since) return found;
    const { low, high } = positionRange(since, until);
    let start: QueryCommandOutput["LastEvaluatedKey"];
    do {
      const page: QueryCommandOutput = await this.db.send(
        new QueryCommand({
          TableName: this.tables.interactions,
          KeyConditionExpression: "projectId = :p AND sk BETWEEN :lo AND :hi",
          ProjectionExpression: "projectId, sk, transaction_id",
          ExpressionAttributeValues: marshall({ ":p": projectId, ":lo": ENTRY + low, ":hi": ENTRY + high }),
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        const { sk, transaction_id } = unmarshall(item) as { sk: string; transaction_id: string };
        found.push({ entry: { projectId, sk }, transactionId: transaction_id });
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return found;
  }

  /**
   * Deletion: the user's interactions leave the index, and the user's usage rows lose the user id
   * (their figures stay, as a deleted user's). Returns how many interactions were purged.
   */
  async purgeUser(projectId: string, userId: string): Promise<number> {
    const ids: string[] = [];
    let start: QueryCommandOutput["LastEvaluatedKey"];
    do {
      const page: QueryCommandOutput = await this.db.send(
        new QueryCommand({
          TableName: this.tables.interactions,
          IndexName: "byUser",
          KeyConditionExpression: "userKey = :u",
          FilterExpression: "user_id = :id",
          ProjectionExpression: "transaction_id",
          ExpressionAttributeValues: marshall({
            ":u": `${projectId}#${boundedKeyPart(userId)}`,
            ":id": userId,
          }),
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) ids.push(unmarshall(item).transaction_id as string);
      start = page.LastEvaluatedKey;
    } while (start);
    const purged = await this.purgeTransactions(projectId, ids);
    await this.rollups.forgetUser(projectId, userId);
    return purged;
  }

  /** Deletion: these transactions leave the index (unknown ids are ignored); the rollups keep them. */
  async purgeTransactions(projectId: string, transactionIds: readonly string[]): Promise<number> {
    const queue = [...new Set(transactionIds)];
    let purged = 0;
    const next = async (): Promise<void> => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        if (await this.purgeOne(projectId, id)) purged++;
      }
    };
    await Promise.all(Array.from({ length: Math.min(PURGE_CONCURRENCY, queue.length) }, next));
    return purged;
  }

  private async purgeOne(projectId: string, transactionId: string): Promise<boolean> {
    const recordKey = marshall({ projectId, sk: RECORD + transactionId });
    const stored = await this.db.send(
      new GetItemCommand({ TableName: this.tables.interactions, Key: recordKey, ConsistentRead: true }),
    );
    if (!stored.Item) return false;
    const record = recordOf(unmarshall(stored.Item));
    // The entry first: while the record is there, a repeat finds the entry's key in it.
    await this.db.send(
      new DeleteItemCommand({ TableName: this.tables.interactions, Key: marshall(entryKey(record)) }),
    );
    await this.db.send(new DeleteItemCommand({ TableName: this.tables.interactions, Key: recordKey }));
    return true;
  }

  /** `entryId` of the entries that exist among these records'. */
  private async existingEntries(records: readonly InteractionRecord[]): Promise<Set<string>> {
    const found = new Set<string>();
    const table = this.tables.interactions;
    for (const group of chunks(records, READ_BATCH)) {
      let request: Record<string, KeysAndAttributes> | undefined = {
        [table]: {
          Keys: group.map((r) => marshall(entryKey(r))),
          ProjectionExpression: "projectId, sk",
          ConsistentRead: true,
        },
      };
      for (let round = 0; request && Object.keys(request).length > 0; round++) {
        if (round >= MAX_ROUNDS) throw new Error("the interactions index kept throttling reads");
        await backoff(round);
        const out: BatchGetItemCommandOutput = await this.db.send(
          new BatchGetItemCommand({ RequestItems: request }),
        );
        for (const item of out.Responses?.[table] ?? []) {
          const { projectId, sk } = unmarshall(item) as { projectId: string; sk: string };
          found.add(`${projectId}/${sk}`);
        }
        request = out.UnprocessedKeys;
      }
    }
    return found;
  }

  private async batchWrite(items: readonly Record<string, unknown>[]): Promise<void> {
    const table = this.tables.interactions;
    for (const group of chunks(items, WRITE_BATCH)) {
      let request: Record<string, WriteRequest[]> | undefined = {
        [table]: group.map((item) => ({ PutRequest: { Item: marshall(item, marshallOptions) } })),
      };
      for (let round = 0; request && Object.keys(request).length > 0; round++) {
        if (round >= MAX_ROUNDS) throw new Error("the interactions index kept throttling writes");
        await backoff(round);
        const out: BatchWriteItemCommandOutput = await this.db.send(
          new BatchWriteItemCommand({ RequestItems: request }),
        );
        request = out.UnprocessedItems;
      }
    }
  }
}

const ids = (records: readonly InteractionRecord[]) => records.map((r) => r.transaction_id);

/** Project and entry position: unique across projects (a project id has no `/`). */
function entryId(record: InteractionRecord): string {
  const { projectId, sk } = entryKey(record);
  return `${projectId}/${sk}`;
}

/**
 * The status index partition a status filter can use: the error class, for the class or an error code.
 * Successes are not indexed (entryItem); nor can a success code use it: a stream that broke after its
 * 200 is in the error class.
 */
function statusPartition(projectId: string, status: InteractionFilters["status"]): string | undefined {
  if (status === undefined || status === "success" || (typeof status === "number" && status < 400))
    return undefined;
  return `${projectId}#error`;
}

/**
 * The billing index partition of a billing mode: none for managed calls, which a managed filter finds
 * in the table itself (entryItem). Entries written before keep `<project>#managed` in the index,
 * unread.
 */
function billingPartition(projectId: string, mode: string | undefined): string | undefined {
  return mode === undefined || mode === "managed" ? undefined : `${projectId}#${mode}`;
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
