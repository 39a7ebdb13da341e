import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  QueryCommand,
  type QueryCommandOutput,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import {
  deltaOf,
  ROLLUP_COUNTERS,
  type Rollup,
  type RollupCounters,
  type RollupKey,
  rollupId,
  sumCounters,
  type UsageRollups,
} from "../../core/interactions-usage";
import type { InteractionRecord } from "../../core/record";
import type { TableNames } from "./tables";

/**
 * Daily rollups in the `usageRollups` table, one item per (project, day, vendor, billing mode, model):
 * counters, plus transient per-transaction markers `m_<transaction id>` that make each change apply
 * exactly once without transactions (dynalite has none):
 *
 *   add       counters += the records' sums, markers := "add"      if none of the markers exists
 *   subtract  counters -= one record's figures, marker := "sub"   if the marker says it was added
 *   clear     markers removed                                     if they still say what we set
 *
 * A marker lives only between the change and the index write that makes it durable knowledge (see
 * adapters/dynamodb/interactions.ts), so an item carries at most the markers of the writes in flight.
 */

const MARKER = "m_";
/** Records per update: the expression stays far below DynamoDB's 4 KB expression limit. */
export const ROLLUP_CHUNK = 25;

export type MarkerState = "add" | "sub";

const markerOf = (transactionId: string) => `${MARKER}${transactionId}`;

function counterUpdate(sums: RollupCounters, key: RollupKey) {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const adds = ROLLUP_COUNTERS.map((c, i) => {
    names[`#c${i}`] = c;
    values[`:c${i}`] = sums[c];
    return `#c${i} :c${i}`;
  });
  // The key's fields ride along so that a query needs nothing but the items.
  const sets = ["#day = :day", "vendor = :vendor", "billing_mode = :billing"];
  names["#day"] = "day";
  values[":day"] = key.day;
  values[":vendor"] = key.vendor;
  values[":billing"] = key.billing_mode;
  if (key.model !== null) {
    sets.push("#model = :model");
    names["#model"] = "model";
    values[":model"] = key.model;
  }
  return { adds, sets, names, values };
}

export class DynamoUsageRollups implements UsageRollups {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "usageRollups">,
  ) {}

  async query(projectId: string, from: string, to: string): Promise<Rollup[]> {
    const rollups: Rollup[] = [];
    let start: QueryCommandOutput["LastEvaluatedKey"];
    do {
      const page: QueryCommandOutput = await this.db.send(
        new QueryCommand({
          TableName: this.tables.usageRollups,
          KeyConditionExpression: "projectId = :p AND rollupId BETWEEN :from AND :to",
          ExpressionAttributeValues: marshall({ ":p": projectId, ":from": `${from}#`, ":to": `${to}#~` }),
          ExclusiveStartKey: start,
        }),
      );
      for (const item of page.Items ?? []) {
        const raw = unmarshall(item);
        const rollup = {
          day: raw.day,
          vendor: raw.vendor,
          billing_mode: raw.billing_mode,
          model: raw.model ?? null,
        } as Rollup;
        for (const c of ROLLUP_COUNTERS) rollup[c] = Number(raw[c] ?? 0);
        rollups.push(rollup);
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return rollups;
  }

  /**
   * Adds each record's figures once: records whose marker exists were added by an earlier attempt and
   * are skipped. Records are of one project and one rollup key.
   */
  async add(projectId: string, key: RollupKey, records: readonly InteractionRecord[]): Promise<void> {
    for (let i = 0; i < records.length; i += ROLLUP_CHUNK) {
      const chunk = records.slice(i, i + ROLLUP_CHUNK);
      if (await this.addMarked(projectId, key, chunk)) continue;
      // Some marker exists: an earlier attempt got this far. One at a time, each applies or is found.
      for (const record of chunk) await this.addMarked(projectId, key, [record]);
    }
  }

  /** One conditional update for the chunk; false when a marker already existed (nothing changed). */
  private async addMarked(projectId: string, key: RollupKey, chunk: readonly InteractionRecord[]) {
    const { adds, sets, names, values } = counterUpdate(sumCounters(chunk.map(deltaOf)), key);
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
          Key: marshall({ projectId, rollupId: rollupId(key) }),
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

  /**
   * Subtracts one record's figures once. `indexed`: its index entry still exists, so it was added (its
   * marker may be gone); otherwise only an `add` marker proves it was. A `sub` marker means done.
   */
  async subtract(projectId: string, record: InteractionRecord, key: RollupKey, indexed: boolean) {
    const { adds, sets, names, values } = counterUpdate(sumCounters([deltaOf(record)], -1), key);
    names["#m"] = markerOf(record.transaction_id);
    values[":add"] = "add";
    values[":sub"] = "sub";
    sets.push("#m = :sub");
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.usageRollups,
          Key: marshall({ projectId, rollupId: rollupId(key) }),
          UpdateExpression: `ADD ${adds.join(", ")} SET ${sets.join(", ")}`,
          ConditionExpression: indexed ? "attribute_not_exists(#m) OR #m = :add" : "#m = :add",
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: marshall(values),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  /** Removes the markers of these transactions that are still in `state`; others are left alone. */
  async clear(projectId: string, key: RollupKey, transactionIds: readonly string[], state: MarkerState) {
    for (let i = 0; i < transactionIds.length; i += ROLLUP_CHUNK) {
      const chunk = transactionIds.slice(i, i + ROLLUP_CHUNK);
      if (await this.clearMarked(projectId, key, chunk, state)) continue;
      for (const id of chunk) await this.clearMarked(projectId, key, [id], state);
    }
  }

  private async clearMarked(projectId: string, key: RollupKey, ids: readonly string[], state: MarkerState) {
    const names: Record<string, string> = {};
    ids.forEach((id, i) => {
      names[`#m${i}`] = markerOf(id);
    });
    const refs = Object.keys(names);
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.usageRollups,
          Key: marshall({ projectId, rollupId: rollupId(key) }),
          UpdateExpression: `REMOVE ${refs.join(", ")}`,
          ConditionExpression: refs.map((ref) => `${ref} = :state`).join(" AND "),
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: marshall({ ":state": state }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }
}
