import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CreateTableCommand,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoLimits } from "../../bench/lib/dynamo-limits";
import { createDynamoClient } from "../../lambda/adapters/dynamodb/client";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";

/**
 * The scale model's DynamoDB wrapper (bench/lib/dynamo-limits.ts) counts a table's index writes as
 * DynamoDB bills them: an entry put or deleted one write, a changed index key two, an unchanged key
 * none for a keys-only index and one of the item's size for an index of all attributes.
 */
const KEYS_TABLE = "limits-keys";
const ALL_TABLE = "limits-all";
let dir: string;
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;
let limits: DynamoLimits;

const index = { name: "holdsDue", partitionKey: "holdOwner", sortKey: { name: "due" } };
const table = (name: string, projection: "KEYS_ONLY" | "ALL") =>
  new CreateTableCommand({
    TableName: name,
    BillingMode: "PAY_PER_REQUEST",
    AttributeDefinitions: [
      { AttributeName: "pk", AttributeType: "S" },
      { AttributeName: "holdOwner", AttributeType: "S" },
      { AttributeName: "due", AttributeType: "N" },
    ],
    KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
    GlobalSecondaryIndexes: [
      {
        IndexName: index.name,
        KeySchema: [
          { AttributeName: "holdOwner", KeyType: "HASH" },
          { AttributeName: "due", KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: projection },
      },
    ],
  });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-limits-"));
  dynamo = await startEmbeddedDynamo(dir);
  db = createDynamoClient({ endpoint: dynamo.endpoint });
  await db.send(table(KEYS_TABLE, "KEYS_ONLY"));
  await db.send(table(ALL_TABLE, "ALL"));
  limits = new DynamoLimits(db, {
    clock: () => 0,
    tables: { [KEYS_TABLE]: "keys", [ALL_TABLE]: "all" },
    throttleRate: 0,
    watched: new Set(),
  });
  limits.setKeys({
    [KEYS_TABLE]: { partitionKey: "pk", indexes: [{ ...index, projection: "keys" }] },
    [ALL_TABLE]: { partitionKey: "pk", indexes: [index] },
  });
  limits.install();
});
afterAll(async () => {
  db?.destroy();
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The index write units of `write`, on the table's stats. */
async function indexUnits(tableName: string, write: () => Promise<unknown>): Promise<number> {
  const name = tableName === KEYS_TABLE ? "keys" : "all";
  const before = limits.report().tables[name]?.indexWcu ?? 0;
  await write();
  return (limits.report().tables[name]?.indexWcu ?? 0) - before;
}

const put = (tableName: string, pk: string, extra: Record<string, { S: string } | { N: string }>) => () =>
  db.send(new PutItemCommand({ TableName: tableName, Item: { pk: { S: pk }, ...extra } }));
const update =
  (
    tableName: string,
    pk: string,
    expression: string,
    values?: Record<string, { N: string } | { S: string }>,
  ) =>
  () =>
    db.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { pk: { S: pk } },
        UpdateExpression: expression,
        ExpressionAttributeValues: values,
      }),
    );

describe("write units in the scale model's wrapper", () => {
  it("bills an update by the larger of the item before and after it", async () => {
    const units = async (write: () => Promise<unknown>) => {
      const before = limits.report().tables.keys?.wcu ?? 0;
      await write();
      return (limits.report().tables.keys?.wcu ?? 0) - before;
    };
    expect(await units(put(KEYS_TABLE, "grows", { small: { S: "x" } }))).toBe(1);
    const big = { ":b": { S: "x".repeat(2_500) } };
    expect(await units(update(KEYS_TABLE, "grows", "SET big = :b", big))).toBe(3);
    expect(await units(update(KEYS_TABLE, "grows", "REMOVE big"))).toBe(3);
    expect(await units(update(KEYS_TABLE, "grows", "SET small = :s", { ":s": { S: "y" } }))).toBe(1);
  });
});

describe("index writes in the scale model's wrapper", () => {
  it("a keys-only index: entering, moving and leaving it are counted; a write that keeps its key is not", async () => {
    expect(
      await indexUnits(KEYS_TABLE, put(KEYS_TABLE, "a", { holdOwner: { S: "o" }, due: { N: "1" } })),
    ).toBe(1);
    expect(await indexUnits(KEYS_TABLE, update(KEYS_TABLE, "a", "SET c = :c", { ":c": { N: "5" } }))).toBe(0);
    expect(await indexUnits(KEYS_TABLE, update(KEYS_TABLE, "a", "SET due = :d", { ":d": { N: "2" } }))).toBe(
      2,
    );
    expect(await indexUnits(KEYS_TABLE, update(KEYS_TABLE, "a", "REMOVE holdOwner"))).toBe(1);
    expect(
      await indexUnits(KEYS_TABLE, update(KEYS_TABLE, "a", "SET holdOwner = :o", { ":o": { S: "p" } })),
    ).toBe(1);
    expect(
      await indexUnits(KEYS_TABLE, () =>
        db.send(new DeleteItemCommand({ TableName: KEYS_TABLE, Key: { pk: { S: "a" } } })),
      ),
    ).toBe(1);
    // An item without the index's keys is not in it.
    expect(await indexUnits(KEYS_TABLE, put(KEYS_TABLE, "b", { other: { S: "x" } }))).toBe(0);
  });

  it("an index of all attributes: every write of an item in it rewrites its entry, at the item's size", async () => {
    const big = { S: "x".repeat(2_500) };
    expect(
      await indexUnits(ALL_TABLE, put(ALL_TABLE, "a", { holdOwner: { S: "o" }, due: { N: "1" }, big })),
    ).toBe(3);
    expect(await indexUnits(ALL_TABLE, update(ALL_TABLE, "a", "SET c = :c", { ":c": { N: "5" } }))).toBe(3);
    // A table's write units include its index's.
    const stats = limits.report().tables.all;
    expect(stats?.indexWcu).toBe(6);
    expect(stats?.wcu).toBe(6 + 3 + 3);
  });
});
