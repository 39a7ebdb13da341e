import { randomUUID } from "node:crypto";
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import {
  BREAKDOWN_COUNTERS,
  type BreakdownDimension,
  type BreakdownKey,
  type BreakdownRow,
  breakdownDeltaOf,
  breakdownRange,
  breakdownRowId,
} from "../../core/breakdowns";
import {
  deltaOf,
  ROLLUP_COUNTERS,
  type Rollup,
  type RollupKey,
  rollupId,
} from "../../core/interactions-usage";
import type { InteractionRecord } from "../../core/record";
import type { UsageRollups } from "../../core/usage-rollups";
import { queryAll } from "./paging";
import type { TableNames } from "./tables";

/**
 * Daily rollups in the `usageRollups` table, items per project (partition `projectId`):
 *   `<day>#<vendor>#<billing mode>#<model>`  the model rollups (core/interactions-usage.ts)
 *   `k#<day>#=<key id>`, `u#<day>#=<user id>` usage by key and by end user (core/breakdowns.ts)
 *   `u#<day>#!<random>`                     a deleted user's figures, without the user id
 * Each holds counters, plus transient per-transaction markers `m_<transaction id>` that make each
 * addition apply exactly once without transactions (dynalite has none):
 *
 *   add    counters += the records' sums, markers := "add"   if none of the markers exists
 *   clear  markers removed                                   if they still say "add"
 *
 * A marker lives only between the addition and the index write that makes it durable knowledge (see
 * adapters/dynamodb/interactions.ts), so an item carries at most the markers of the writes in flight,
 * a round's (up to 100 records) each.
 * Nothing subtracts: deletion and retention keep the totals (docs/privacy.md).
 *
 * Forgetting a user (deletion) moves each of the user's rows to a deleted user's row, exactly once:
 *   f1  the row gets `moveTo`, a random id, unless it has one      (a repeat moves to the same row)
 *   f2  put the deleted user's row `u#<day>#!<moveTo>` with the row's counters   (idempotent)
 *   f3  delete the row if its counters are still those copied; else a call was added: back to f2
 */

const MARKER = "m_";
/**
 * Records per update. An update costs about the same whatever its size (locally ~1 ms of the store's
 * CPU), so larger chunks cost less per record: 50 took a rollup's add and clear from ~0.08 to ~0.04 ms
 * of CPU per record and item, and in AWS from ~0.16 to ~0.12 write units (3 units each for an item of
 * ~2.4 KB while 50 markers are on it, against 2 for ~1.4 KB; 5 for the second chunk of a round, with
 * 100 on it). The expressions stay under half of DynamoDB's 4 KB limit: an add's condition is ~1.5 KB,
 * its update ~0.8 KB.
 */
export const ROLLUP_CHUNK = 50;

const markerOf = (transactionId: string) => `${MARKER}${transactionId}`;

/** An item the consumer adds records to: its id, the fields that describe it, and its counters. */
export interface RollupTarget {
  id: string;
  fields: Record<string, string>;
  counters: readonly string[];
  delta: (record: InteractionRecord) => Record<string, number>;
}

export const modelTarget = (key: RollupKey): RollupTarget => ({
  id: rollupId(key),
  // The key's fields ride along so that a query needs nothing but the items.
  fields: {
    day: key.day,
    vendor: key.vendor,
    billing_mode: key.billing_mode,
    ...(key.model === null ? {} : { model: key.model }),
  },
  counters: ROLLUP_COUNTERS,
  delta: deltaOf,
});

export const breakdownTarget = (key: BreakdownKey): RollupTarget => ({
  id: breakdownRowId(key),
  fields: { day: key.day, dimension: key.dimension, ...(key.id === null ? {} : { dim_id: key.id }) },
  counters: BREAKDOWN_COUNTERS,
  delta: breakdownDeltaOf,
});

function counterUpdate(target: RollupTarget, records: readonly InteractionRecord[]) {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const deltas = records.map(target.delta);
  const adds = target.counters.map((c, i) => {
    names[`#c${i}`] = c;
    values[`:c${i}`] = deltas.reduce((sum, d) => sum + (d[c] ?? 0), 0);
    return `#c${i} :c${i}`;
  });
  const sets = Object.entries(target.fields).map(([field, value], i) => {
    names[`#f${i}`] = field;
    values[`:f${i}`] = value;
    return `#f${i} = :f${i}`;
  });
  return { adds, sets, names, values };
}

export class DynamoUsageRollups implements UsageRollups {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "usageRollups">,
  ) {}

  /** Every item of the project between two row ids, both included. */
  private async items(
    projectId: string,
    low: string,
    high: string,
    consistent = false,
  ): Promise<Record<string, unknown>[]> {
    return queryAll(this.db, {
      TableName: this.tables.usageRollups,
      KeyConditionExpression: "projectId = :p AND rollupId BETWEEN :low AND :high",
      ExpressionAttributeValues: marshall({ ":p": projectId, ":low": low, ":high": high }),
      ConsistentRead: consistent,
    });
  }

  async query(projectId: string, from: string, to: string): Promise<Rollup[]> {
    return (await this.items(projectId, `${from}#`, `${to}#~`)).map((raw) => {
      const rollup = {
        day: raw.day,
        vendor: raw.vendor,
        billing_mode: raw.billing_mode,
        model: raw.model ?? null,
      } as Rollup;
      for (const c of ROLLUP_COUNTERS) rollup[c] = Number(raw[c] ?? 0);
      return rollup;
    });
  }

  async breakdown(
    projectId: string,
    dimension: BreakdownDimension,
    from: string,
    to: string,
  ): Promise<BreakdownRow[]> {
    const { low, high } = breakdownRange(dimension, from, to);
    return (await this.items(projectId, low, high)).map((raw) => {
      const row = { dimension, day: raw.day, id: (raw.dim_id as string | undefined) ?? null } as BreakdownRow;
      for (const c of BREAKDOWN_COUNTERS) row[c] = Number(raw[c] ?? 0);
      return row;
    });
  }

  /**
   * Adds each record's figures once: records whose marker exists were added by an earlier attempt and
   * are skipped. Records are of one project and one target.
   */
  async add(projectId: string, target: RollupTarget, records: readonly InteractionRecord[]): Promise<void> {
    for (let i = 0; i < records.length; i += ROLLUP_CHUNK) {
      const chunk = records.slice(i, i + ROLLUP_CHUNK);
      if (await this.addMarked(projectId, target, chunk)) continue;
      // Some marker exists: an earlier attempt got this far. One at a time, each applies or is found.
      for (const record of chunk) await this.addMarked(projectId, target, [record]);
    }
  }

  /** One conditional update for the chunk; false when a marker already existed (nothing changed). */
  private async addMarked(projectId: string, target: RollupTarget, chunk: readonly InteractionRecord[]) {
    const { adds, sets, names, values } = counterUpdate(target, chunk);
    const conditions: string[] = [];
    chunk.forEach((record, i) => {
      names[`#m${i}`] = markerOf(record.transaction_id);
      sets.push(`#m${i} = :add`);
      conditions.push(`attribute_not_exists(#m${i})`);
    });
    values[":add"] = "add";
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.usageRollups,
          Key: marshall({ projectId, rollupId: target.id }),
          UpdateExpression: `ADD ${adds.join(", ")} SET ${sets.join(", ")}`,
          ConditionExpression: conditions.join(" AND "),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: marshall(values),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /** Removes the `add` markers of these transactions that are still there; others are left alone. */
  async clear(projectId: string, target: RollupTarget, transactionIds: readonly string[]) {
    for (let i = 0; i < transactionIds.length; i += ROLLUP_CHUNK) {
      const chunk = transactionIds.slice(i, i + ROLLUP_CHUNK);
      if (await this.clearMarked(projectId, target, chunk)) continue;
      for (const id of chunk) await this.clearMarked(projectId, target, [id]);
    }
  }

  private async clearMarked(projectId: string, target: RollupTarget, ids: readonly string[]) {
    const names: Record<string, string> = {};
    ids.forEach((id, i) => {
      names[`#m${i}`] = markerOf(id);
    });
    const refs = Object.keys(names);
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.usageRollups,
          Key: marshall({ projectId, rollupId: target.id }),
          UpdateExpression: `REMOVE ${refs.join(", ")}`,
          ConditionExpression: refs.map((ref) => `${ref} = :state`).join(" AND "),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: marshall({ ":state": "add" }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  /**
   * Deletion: the user's rows, of every day, move to deleted users' rows (f1-f3 above), so the
   * totals stay and the user id is gone. Returns how many rows moved.
   */
  async forgetUser(projectId: string, userId: string): Promise<number> {
    // All user rows of the project, read once per deletion: a deletion is rare, a row small.
    const rows = (await this.items(projectId, "u#", "u$", true)).filter((raw) => raw.dim_id === userId);
    for (const row of rows) await this.moveToDeleted(projectId, row.rollupId as string);
    return rows.length;
  }

  private async moveToDeleted(projectId: string, rowId: string): Promise<void> {
    const key = marshall({ projectId, rollupId: rowId });
    for (;;) {
      let row: Record<string, unknown>;
      try {
        const out = await this.db.send(
          new UpdateItemCommand({
            TableName: this.tables.usageRollups,
            Key: key,
            UpdateExpression: "SET moveTo = if_not_exists(moveTo, :random)",
            ConditionExpression: "attribute_exists(rollupId)",
            ExpressionAttributeValues: marshall({ ":random": randomUUID() }),
            ReturnValues: "ALL_NEW",
          }),
        );
        row = unmarshall(out.Attributes ?? {});
      } catch (err) {
        if (err instanceof ConditionalCheckFailedException) return; // moved by an earlier attempt
        throw err;
      }
      const counters = Object.fromEntries(BREAKDOWN_COUNTERS.map((c) => [c, Number(row[c] ?? 0)]));
      const day = String(row.day);
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.usageRollups,
          Item: marshall({
            projectId,
            rollupId: breakdownRowId({ dimension: "user", day, id: null }, String(row.moveTo)),
            day,
            dimension: "user",
            ...counters,
          }),
        }),
      );
      const names: Record<string, string> = {};
      const values: Record<string, number> = {};
      const same = BREAKDOWN_COUNTERS.map((c, i) => {
        names[`#c${i}`] = c;
        values[`:c${i}`] = counters[c] ?? 0;
        return `#c${i} = :c${i}`;
      });
      try {
        await this.db.send(
          new DeleteItemCommand({
            TableName: this.tables.usageRollups,
            Key: key,
            ConditionExpression: same.join(" AND "),
            ExpressionAttributeNames: names,
            ExpressionAttributeValues: marshall(values),
          }),
        );
        return;
      } catch (err) {
        // A call of the user was added since the copy: copy again (the put overwrites).
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
    }
  }
}
