import { Agent } from "node:http";
import { type AttributeValue, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { TABLES, type TableName, type TableNames } from "../../lambda/adapters/dynamodb/tables";

/**
 * DynamoDB's documented limits, enforced in front of dynalite (which has none), for bench/aws-scale.ts:
 * per item and per partition at most 1,000 write units and 3,000 read units a second; a write costs
 * 1 WCU per KB of the larger of the item before and after it (a failed condition too); a strongly
 * consistent read 1 RCU per 4 KB (half for an eventually consistent one); an item at most 400 KB.
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html,
 * .../ServiceQuotas.html, .../read-write-operations.html (read 2026-12-07).
 *
 * A table's global secondary indexes are written too, and counted with its writes ("Managing global
 * secondary indexes", .../GSI.html#GSI.ThroughputConsiderations.Writes, read 2026-12-07): an item that
 * enters an index is one index write of its projected size, one that leaves it one, one whose index key
 * changes two (the old entry deleted, the new put), and one whose key stays one for an index of all
 * attributes, none for a keys-only index. An index's partitions have the base table's limit: one over
 * 1,000 write units in a second refuses the writes that would add to it.
 *
 * Installed as a middleware inside the SDK's retry loop: a request over a limit is refused with
 * `ProvisionedThroughputExceededException` before it reaches the store, as DynamoDB refuses it, and the
 * SDK retries it with its own backoff, as it does in Lambda. `throttleRate` refuses that share of the
 * writes to the watched tables besides (faults). Seconds are the model's clock's.
 */

export interface LimitOptions {
  clock: () => number;
  /** Physical table name -> the name to report. */
  tables: Record<string, string>;
  throttleRate: number;
  /** The tables whose writes the injected throttles hit. */
  watched: Set<string>;
}

export interface TableStats {
  requests: number;
  writes: number;
  reads: number;
  /** Write units of the table and its indexes. */
  wcu: number;
  /** Of which its indexes'. */
  indexWcu: number;
  rcu: number;
  throttled: number;
  /** Requests by command, to see what a sweep reads. */
  byCommand: Record<string, number>;
}

export interface LimitReport {
  tables: Record<string, TableStats>;
  injected: number;
  /** The item that took the most write units in one second. */
  hottest: { table: string; item: string; wcuPerSecond: number; bytes: number } | null;
  /** The index partition (an index's partition key value) that took the most write units in one second. */
  hottestIndexPartition: { table: string; index: string; partition: string; wcuPerSecond: number } | null;
  largest: { table: string; item: string; bytes: number } | null;
}

const ITEM_WCU_PER_S = 1_000;
const PARTITION_WCU_PER_S = 1_000;
const PARTITION_RCU_PER_S = 3_000;
const MAX_ITEM_BYTES = 400 * 1024;

interface ItemState {
  second: number;
  wcu: number;
  maxWcu: number;
  bytes: number;
  maxBytes: number;
  /** Each index's key of the item (partition and sort key values), absent when it is not in that index. */
  indexKeys?: Record<string, string | undefined>;
}

interface PartitionState {
  second: number;
  wcu: number;
  rcu: number;
  maxWcu: number;
}

type IndexDefinition = {
  name: string;
  partitionKey: string;
  sortKey?: { name: string };
  projection?: "keys";
};

type Input = Record<string, unknown> & {
  TableName?: string;
  Key?: Record<string, AttributeValue>;
  Item?: Record<string, AttributeValue>;
  ReturnValues?: string;
  ConsistentRead?: boolean;
};

export class DynamoLimits {
  private items = new Map<string, ItemState>();
  private partitions = new Map<string, PartitionState>();
  private indexPartitions = new Map<string, PartitionState>();
  private stats: Record<string, TableStats> = {};
  private injected = 0;
  /** Off: requests are counted, not refused (the model's end, whose clock no longer moves). */
  enforce = true;
  private keySchemas = new Map<string, string>();

  constructor(
    private readonly db: DynamoDBClient,
    private readonly options: LimitOptions,
  ) {}

  install(): void {
    // biome-ignore lint/suspicious/noExplicitAny: the SDK's middleware generics, which this does not narrow
    const middleware: any = (next: any, context: { commandName?: string }) => async (args: any) => {
      // A retry comes after the SDK's backoff (a throttle's starts at 500 ms): a second later here,
      // since the model's clock stands still while a tick's requests are answered.
      const header = String(args.request?.headers?.["amz-sdk-request"] ?? "");
      const attempt = Number(/attempt=(\d+)/.exec(header)?.[1] ?? 1);
      return this.around(
        context.commandName ?? "unknown",
        args.input as Input,
        () => next(args),
        attempt - 1,
      );
    };
    // Before the request is serialized: a write returns the item, so its size is known after it.
    // biome-ignore lint/suspicious/noExplicitAny: as above
    const sizes: any = (next: any, context: { commandName?: string }) => async (args: any) => {
      const command = context.commandName;
      const input = args.input as Input;
      if (
        (command === "UpdateItemCommand" || command === "DeleteItemCommand") &&
        (input.ReturnValues === undefined || input.ReturnValues === "UPDATED_NEW")
      ) {
        args.input = { ...input, ReturnValues: command === "DeleteItemCommand" ? "ALL_OLD" : "ALL_NEW" };
      }
      return next(args);
    };
    this.db.middlewareStack.add(sizes, { step: "initialize", name: "dmtScaleSizes" });
    this.db.middlewareStack.add(middleware, {
      step: "deserialize",
      name: "dmtScaleLimits",
      priority: "high",
    });
  }

  reset(): void {
    this.items.clear();
    this.partitions.clear();
    this.indexPartitions.clear();
    this.stats = {};
    this.injected = 0;
  }

  snapshot(): Record<string, TableStats> {
    return structuredClone(this.stats);
  }

  /** Requests per table since a snapshot. */
  since(before: Record<string, TableStats>): Record<string, Record<string, number>> {
    const out: Record<string, Record<string, number>> = {};
    for (const [table, s] of Object.entries(this.stats)) {
      const b = before[table];
      const diff: Record<string, number> = {};
      for (const [cmd, n] of Object.entries(s.byCommand)) {
        const d = n - (b?.byCommand[cmd] ?? 0);
        if (d > 0) diff[cmd] = d;
      }
      const rcu = s.rcu - (b?.rcu ?? 0);
      if (Object.keys(diff).length > 0) out[table] = { ...diff, rcu: Number(rcu.toFixed(1)) };
    }
    return out;
  }

  report(): LimitReport {
    let hottest: LimitReport["hottest"] = null;
    let largest: LimitReport["largest"] = null;
    for (const [key, state] of this.items) {
      const [table = "", item = ""] = splitKey(key);
      if (!hottest || state.maxWcu > hottest.wcuPerSecond) {
        hottest = { table, item, wcuPerSecond: state.maxWcu, bytes: state.maxBytes };
      }
      if (!largest || state.maxBytes > largest.bytes) largest = { table, item, bytes: state.maxBytes };
    }
    const tables = structuredClone(this.stats);
    for (const s of Object.values(tables)) {
      s.wcu = Math.round(s.wcu);
      s.rcu = Number(s.rcu.toFixed(1));
    }
    let hottestIndexPartition: LimitReport["hottestIndexPartition"] = null;
    for (const [key, p] of this.indexPartitions) {
      if (hottestIndexPartition && p.maxWcu <= hottestIndexPartition.wcuPerSecond) continue;
      const [table = "", index = "", partition = ""] = key.split("\u0000");
      hottestIndexPartition = {
        table: this.options.tables[table] ?? table,
        index,
        partition,
        wcuPerSecond: p.maxWcu,
      };
    }
    return { tables, injected: this.injected, hottest, largest, hottestIndexPartition };
  }

  /** The hottest item whose key's text contains `part` (a TPM minute's counter: "tpm#"). */
  hottestWhere(part: string): LimitReport["hottest"] {
    let hottest: LimitReport["hottest"] = null;
    for (const [key, state] of this.items) {
      const [table = "", item = ""] = splitKey(key);
      if (!item.includes(part)) continue;
      if (!hottest || state.maxWcu > hottest.wcuPerSecond) {
        hottest = { table, item, wcuPerSecond: state.maxWcu, bytes: state.maxBytes };
      }
    }
    return hottest;
  }

  private table(physical: string | undefined): TableStats {
    const name = (physical && this.options.tables[physical]) ?? physical ?? "?";
    let s = this.stats[name];
    if (!s) {
      s = { requests: 0, writes: 0, reads: 0, wcu: 0, indexWcu: 0, rcu: 0, throttled: 0, byCommand: {} };
      this.stats[name] = s;
    }
    return s;
  }

  private async around(
    command: string,
    input: Input,
    send: () => Promise<{ output: unknown }>,
    retry: number,
  ) {
    const physical = input.TableName;
    const stats = this.table(physical);
    stats.requests++;
    stats.byCommand[command] = (stats.byCommand[command] ?? 0) + 1;
    const second = Math.floor(this.options.clock() / 1000) + retry;
    const write =
      command === "PutItemCommand" || command === "UpdateItemCommand" || command === "DeleteItemCommand";
    if (!write) {
      const result = await send();
      const output = result.output as {
        Item?: Record<string, AttributeValue>;
        Items?: Record<string, AttributeValue>[];
      };
      const items = output.Item ? [output.Item] : (output.Items ?? []);
      const bytes = items.reduce((sum, item) => sum + itemBytes(item), 0);
      const units = Math.max(1, Math.ceil(bytes / 4096)) * (input.ConsistentRead ? 1 : 0.5);
      stats.reads++;
      stats.rcu += units;
      if (command === "GetItemCommand" && input.Key) {
        const partition = this.partitionOf(physical, input.Key);
        const p = this.partition(partition, second);
        p.rcu += units;
        if (p.rcu > PARTITION_RCU_PER_S) stats.throttled++; // counted; reads are not refused here
      }
      return result;
    }
    const key = input.Key ?? this.keyOf(physical, input.Item);
    const itemKey = `${physical}\u0000${JSON.stringify(key)}`;
    const state = this.items.get(itemKey) ?? { second, wcu: 0, maxWcu: 0, bytes: 0, maxBytes: 0 };
    if (state.second !== second) {
      state.second = second;
      state.wcu = 0;
    }
    const partition = this.partition(this.partitionOf(physical, key), second);
    const newBytes = input.Item ? itemBytes(input.Item) : 0;
    const units = Math.max(1, Math.ceil(Math.max(state.bytes, newBytes) / 1024));
    const injected =
      this.options.throttleRate > 0 &&
      physical !== undefined &&
      this.options.watched.has(physical) &&
      Math.random() < this.options.throttleRate;
    const over =
      state.wcu + units > ITEM_WCU_PER_S ||
      partition.wcu + units > PARTITION_WCU_PER_S ||
      this.indexesFull(physical, state, input.Item, second);
    if (this.enforce && (injected || over)) {
      if (injected) this.injected++;
      stats.throttled++;
      const err = new Error(
        "The level of configured provisioned throughput for the table was exceeded (model).",
      );
      err.name = "ProvisionedThroughputExceededException";
      Object.assign(err, { $fault: "client", $metadata: {} });
      this.items.set(itemKey, state);
      throw err;
    }
    if (newBytes > MAX_ITEM_BYTES) {
      const err = new Error("Item size has exceeded the maximum allowed size (model)");
      err.name = "ValidationException";
      Object.assign(err, { $fault: "client", $metadata: {} });
      throw err;
    }
    if (
      command !== "PutItemCommand" &&
      (input.ReturnValues === undefined || input.ReturnValues === "UPDATED_NEW")
    ) {
      // To learn the item's size after the write; the callers read only attributes ALL_NEW has too.
      input.ReturnValues = command === "DeleteItemCommand" ? "ALL_OLD" : "ALL_NEW";
    }
    stats.writes++;
    state.wcu += units;
    partition.wcu += units;
    state.maxWcu = Math.max(state.maxWcu, state.wcu);
    stats.wcu += units;
    this.items.set(itemKey, state);
    const bytesBefore = state.bytes;
    const result = await send();
    const attributes = (result.output as { Attributes?: Record<string, AttributeValue> }).Attributes;
    if (command === "PutItemCommand") state.bytes = newBytes;
    else if (command === "DeleteItemCommand") state.bytes = 0;
    else if (attributes) state.bytes = itemBytes(attributes);
    state.maxBytes = Math.max(state.maxBytes, state.bytes);
    // An update is billed by the larger of the item before and after it: one that grew the item past a
    // KB costs the units its new size takes, known only now.
    const grown = Math.max(1, Math.ceil(Math.max(bytesBefore, state.bytes) / 1024)) - units;
    if (grown > 0) {
      state.wcu += grown;
      partition.wcu += grown;
      state.maxWcu = Math.max(state.maxWcu, state.wcu);
      stats.wcu += grown;
    }
    const after =
      command === "PutItemCommand" ? input.Item : command === "DeleteItemCommand" ? undefined : attributes;
    // A delete answers the item it removed (ALL_OLD): its index entries are known even if never seen.
    const before = command === "DeleteItemCommand" ? attributes : undefined;
    this.writeIndexes(physical, command, state, before, after, second, stats);
    return result;
  }

  /** Whether a write of this item would add to an index partition already at its limit this second. */
  private indexesFull(
    physical: string | undefined,
    state: ItemState,
    item: Record<string, AttributeValue> | undefined,
    second: number,
  ): boolean {
    for (const index of this.indexes.get(physical ?? "") ?? []) {
      for (const entry of [state.indexKeys?.[index.name], item && indexKeyOf(index, item)]) {
        if (entry === undefined) continue;
        const p = this.indexPartitions.get(indexPartitionKey(physical, index, entry));
        if (p && p.second === second && p.wcu >= PARTITION_WCU_PER_S) return true;
      }
    }
    return false;
  }

  /** The index writes of one base-table write, from the item's index keys before and after it. */
  private writeIndexes(
    physical: string | undefined,
    command: string,
    state: ItemState,
    removed: Record<string, AttributeValue> | undefined,
    after: Record<string, AttributeValue> | undefined,
    second: number,
    stats: TableStats,
  ): void {
    const indexes = this.indexes.get(physical ?? "") ?? [];
    if (indexes.length === 0) return;
    const keys: Record<string, string | undefined> = {};
    for (const index of indexes) {
      const now = after && indexKeyOf(index, after);
      const known = state.indexKeys !== undefined || removed !== undefined;
      // An item this wrapper never saw written (made before it was installed): an update is taken to
      // leave its index key as it is; a put makes it anew.
      const was = removed
        ? indexKeyOf(index, removed)
        : known
          ? state.indexKeys?.[index.name]
          : command === "UpdateItemCommand"
            ? now
            : undefined;
      keys[index.name] = now;
      const entryUnits = index.projection === "keys" ? 1 : Math.max(1, Math.ceil(state.bytes / 1024));
      const writes: [string, number][] = [];
      if (was !== undefined && was !== now) writes.push([was, 1]);
      if (now !== undefined && (was !== now || index.projection !== "keys")) writes.push([now, entryUnits]);
      for (const [entry, units] of writes) {
        const partitionKey = indexPartitionKey(physical, index, entry);
        let p = this.indexPartitions.get(partitionKey);
        if (!p || p.second !== second) {
          p = { second, wcu: 0, rcu: 0, maxWcu: p?.maxWcu ?? 0 };
          this.indexPartitions.set(partitionKey, p);
        }
        p.wcu += units;
        p.maxWcu = Math.max(p.maxWcu, p.wcu);
        stats.wcu += units;
        stats.indexWcu += units;
      }
    }
    state.indexKeys = keys;
  }

  private partition(key: string, second: number): PartitionState {
    let p = this.partitions.get(key);
    if (!p || p.second !== second) {
      p = { second, wcu: 0, rcu: 0, maxWcu: 0 };
      this.partitions.set(key, p);
    }
    return p;
  }

  /** The partition: the table and the partition key's value (the first key attribute DynamoDB hashes). */
  private partitionOf(physical: string | undefined, key: Record<string, AttributeValue> | undefined): string {
    const pk = this.keySchemas.get(physical ?? "");
    const value = key && pk ? key[pk] : key && Object.values(key)[0];
    return `${physical}\u0000${JSON.stringify(value)}`;
  }

  private keyOf(physical: string | undefined, item: Record<string, AttributeValue> | undefined) {
    if (!item) return undefined;
    const pk = this.keySchemas.get(physical ?? "");
    const sk = this.sortKeys.get(physical ?? "");
    if (!pk) return item;
    return { [pk]: item[pk] as AttributeValue, ...(sk && { [sk]: item[sk] as AttributeValue }) };
  }

  /** The partition key attribute of each table (from the definitions), for puts and partitions. */
  setKeys(
    schemas: Record<
      string,
      { partitionKey: string; sortKey?: { name: string }; indexes?: IndexDefinition[] }
    >,
  ): void {
    for (const [physical, def] of Object.entries(schemas)) {
      this.keySchemas.set(physical, def.partitionKey);
      if (def.indexes) this.indexes.set(physical, def.indexes);
    }
    this.sortKeys = new Map(Object.entries(schemas).map(([p, d]) => [p, d.sortKey?.name]));
  }

  private sortKeys = new Map<string, string | undefined>();
  private indexes = new Map<string, IndexDefinition[]>();
}

/** The item's key in an index (its partition and sort key values), or undefined when it is not in it. */
function indexKeyOf(index: IndexDefinition, item: Record<string, AttributeValue>): string | undefined {
  const pk = item[index.partitionKey];
  const sk = index.sortKey ? item[index.sortKey.name] : undefined;
  if (pk === undefined || (index.sortKey && sk === undefined)) return undefined;
  return JSON.stringify([pk, sk ?? null]);
}

function indexPartitionKey(physical: string | undefined, index: IndexDefinition, entry: string): string {
  const [partition] = JSON.parse(entry) as [unknown];
  return `${physical}\u0000${index.name}\u0000${JSON.stringify(partition)}`;
}

function splitKey(key: string): [string, string] {
  const at = key.indexOf("\u0000");
  return [key.slice(0, at), key.slice(at + 1)];
}

/** An item's size as DynamoDB counts it: names plus values (numbers ~1 byte per 2 digits, + 1). */
export function itemBytes(item: Record<string, AttributeValue>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) bytes += Buffer.byteLength(name) + valueBytes(value);
  return bytes;
}

function valueBytes(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S);
  if (value.N !== undefined) return Math.ceil(value.N.replace(/^-|\./g, "").length / 2) + 1;
  if (value.B !== undefined) return value.B.length;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.M !== undefined) return 3 + itemBytes(value.M) + Object.keys(value.M).length;
  if (value.L !== undefined) return 3 + value.L.reduce((sum, v) => sum + 1 + valueBytes(v), 0);
  if (value.SS !== undefined) return value.SS.reduce((sum, s) => sum + Buffer.byteLength(s), 0);
  if (value.NS !== undefined) return value.NS.reduce((sum, n) => sum + Math.ceil(n.length / 2) + 1, 0);
  return 0;
}

/**
 * A client of the embedded store with the Lambda functions' settings (3 attempts) and a patient
 * timeout (a busy dynalite is not a lost network), behind DynamoDB's limits over the declared tables,
 * each reported by its logical name.
 */
export function limitedClient(
  endpoint: string,
  names: TableNames,
  options: Omit<LimitOptions, "tables">,
): { db: DynamoDBClient; limits: DynamoLimits } {
  const db = new DynamoDBClient({
    region: "local",
    endpoint,
    credentials: { accessKeyId: "local", secretAccessKey: "local" },
    maxAttempts: 3,
    requestHandler: new NodeHttpHandler({
      httpAgent: new Agent({ keepAlive: true, maxSockets: 64 }),
      requestTimeout: 0,
    }),
  });
  const logical = Object.fromEntries(Object.entries(names).map(([name, physical]) => [physical, name]));
  const limits = new DynamoLimits(db, { ...options, tables: logical });
  limits.setKeys(
    Object.fromEntries(Object.entries(TABLES).map(([name, def]) => [names[name as TableName], def])),
  );
  limits.install();
  return { db, limits };
}
