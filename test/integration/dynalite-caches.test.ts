import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  CreateTableCommand,
  DeleteItemCommand,
  DeleteTableCommand,
  DescribeTableCommand,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ResourceNotFoundException,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { untilActive } from "../../lambda/adapters/dynamodb/client";
import { STORE_WRITE_BUFFER_BYTES } from "../../lambda/local/dynalite-caches.mjs";
import { DynaliteClient } from "../../lambda/local/dynalite-client";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { createKeyTable } from "../support/dynamo-tables";

/**
 * The caches inside the embedded dynalite (lambda/local/dynalite-caches.mjs) change no answer: a
 * cached parse is the tree a fresh parse gives, with the request's own values, and marks the same names
 * and values used; a table's definition is never read stale; writes gathered in a batch are all in
 * LevelDB before the answer. The store runs on this thread here, so its parsers can be called beside
 * the originals and its LevelDB watched.
 */
type Context = {
  attrNames?: Record<string, string>;
  attrVals?: Record<string, Record<string, unknown>>;
  unusedAttrNames: Record<string, true>;
  unusedAttrVals: Record<string, true>;
  isReserved?: unknown;
  compare?: unknown;
};
type Parser = { parse(input: string, options: { context: Context }): unknown };

const fromDynalite = createRequire(createRequire(import.meta.url).resolve("dynalite"));
type ParserName = "conditionParser" | "updateParser" | "projectionParser";
const parser = (name: ParserName) => fromDynalite(`./db/${name}`) as Parser;
const parse = (name: ParserName): Parser["parse"] => parser(name).parse.bind(parser(name));
// The parsers as dynalite ships them, taken before the store starts and puts its caches in.
const originals: Record<ParserName, Parser["parse"]> = {
  conditionParser: parse("conditionParser"),
  updateParser: parse("updateParser"),
  projectionParser: parse("projectionParser"),
};
const { ClassicLevel } = createRequire(createRequire(fromDynalite.resolve("level")).resolve("classic-level"))(
  "classic-level",
) as { ClassicLevel: { prototype: { _batch(operations: unknown[], options: unknown): Promise<void> } } };
const validations = fromDynalite("./validations") as {
  validateExpressions(data: Record<string, unknown>): string | undefined;
};

let dir: string;
let dynamo: EmbeddedDynamo;
let db: DynaliteClient;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-dynalite-caches-"));
  dynamo = await startEmbeddedDynamo(dir, { worker: false });
  db = new DynaliteClient(dynamo.endpoint);
});
afterAll(async () => {
  db?.destroy();
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A context as dynalite's validateExpressions makes it: every name and value unused at first. */
function context(
  attrNames: Record<string, string> | undefined,
  attrVals: Record<string, unknown> | undefined,
) {
  const vals = attrVals && (marshall(attrVals) as unknown as Context["attrVals"]);
  const reference = fromDynalite("./db") as { compare: unknown };
  return {
    ...(attrNames && { attrNames }),
    ...(vals && { attrVals: vals }),
    unusedAttrNames: Object.fromEntries(Object.keys(attrNames ?? {}).map((k) => [k, true as const])),
    unusedAttrVals: Object.fromEntries(Object.keys(vals ?? {}).map((k) => [k, true as const])),
    isReserved: (name: string) => ["SIZE", "NAME", "STATUS"].includes(name.toUpperCase()),
    compare: reference.compare,
  } as Context;
}

function outcome(
  parse: (input: string, options: { context: Context }) => unknown,
  input: string,
  ctx: Context,
) {
  try {
    const tree = parse(input, { context: ctx });
    return {
      tree,
      unusedNames: Object.keys(ctx.unusedAttrNames),
      unusedVals: Object.keys(ctx.unusedAttrVals),
    };
  } catch (err) {
    return { threw: (err as Error).message };
  }
}

const IDEMPOTENCY_BEGIN =
  "attribute_not_exists(recordId) OR expiresAt <= :now OR (phase = :running AND leaseUntil <= :now AND fingerprint = :fp)";

describe("a cached parse", () => {
  it.each([
    [
      "conditionParser",
      IDEMPOTENCY_BEGIN,
      undefined,
      [
        { ":now": 1, ":running": "running", ":fp": "a" },
        { ":now": 99, ":running": "running", ":fp": "b" },
      ],
    ],
    [
      "conditionParser",
      "#t >= :from AND begins_with(#s, :prefix)",
      { "#t": "at", "#s": "sk" },
      [
        { ":from": 1, ":prefix": "x" },
        { ":from": 7, ":prefix": "y#" },
      ],
    ],
    [
      "conditionParser",
      "size(#l) < :n AND contains(tags, :tag)",
      { "#l": "list" },
      [
        { ":n": 3, ":tag": "a" },
        { ":n": 0, ":tag": "b" },
      ],
    ],
    [
      "conditionParser",
      "#status IN (:a, :b) AND NOT attribute_exists(gone)",
      { "#status": "status" },
      [
        { ":a": "x", ":b": "y" },
        { ":a": "p", ":b": "q" },
      ],
    ],
    [
      "updateParser",
      "SET phase = :done, body = :body, lengths = :lengths ADD n :one REMOVE #h",
      { "#h": "hold" },
      [
        { ":done": "completed", ":body": new Uint8Array([1]), ":lengths": [1, 2], ":one": 1 },
        { ":done": "x", ":body": new Uint8Array([9, 9]), ":lengths": [], ":one": 5 },
      ],
    ],
    [
      "updateParser",
      "SET a = if_not_exists(a, :zero) + :inc, l = list_append(l, :more)",
      undefined,
      [
        { ":zero": 0, ":inc": 1, ":more": ["a"] },
        { ":zero": 0, ":inc": 8, ":more": [] },
      ],
    ],
    ["projectionParser", "#a, b.c[1], d", { "#a": "name" }, [undefined, undefined]],
  ] as const)("%s: %s is what a fresh parse gives, values swapped", (name, input, names, valueSets) => {
    for (const values of valueSets) {
      const cached = outcome(parse(name), input, context(names, values));
      const fresh = outcome(originals[name], input, context(names, values));
      expect(cached).toEqual(fresh);
      expect(cached).toHaveProperty("tree");
    }
  });

  // The rollups' markers name one attribute per record: such parses are kept once, for any names.
  it.each([
    [
      "updateParser",
      "ADD calls :one, cost :c SET #m0 = :add, #m1 = :add",
      { ":one": 1, ":c": 5, ":add": "add" },
    ],
    ["conditionParser", "attribute_not_exists(#m0) AND attribute_not_exists(#m1)", undefined],
    ["conditionParser", "#m0.#m1 = :add AND size(#m1) > :one", { ":add": "add", ":one": 1 }],
    ["projectionParser", "#m0, #m1.c[2]", undefined],
  ] as const)("%s: %s, with other names each time, is what a fresh parse gives", (name, input, values) => {
    for (const names of [
      { "#m0": "add#tx-1", "#m1": "add#tx-2" },
      { "#m0": "add#tx-3", "#m1": "add#tx-4" },
      { "#m0": "SIZE", "#m1": "x.y" },
    ]) {
      const cached = outcome(parse(name), input, context(names, values));
      const fresh = outcome(originals[name], input, context(names, values));
      expect(cached).toEqual(fresh);
      expect(cached).toHaveProperty("tree");
      expect(JSON.stringify(cached)).toContain(names["#m1"]);
    }
  });

  it("marks the values an expression uses, whatever the request's other expressions used", () => {
    // dynalite parses the update expression before the condition: both use :v.
    const both = validations.validateExpressions({
      UpdateExpression: "SET a = :v",
      ConditionExpression: "a <> :v",
      ExpressionAttributeValues: marshall({ ":v": 1 }),
    });
    expect(both).toBeUndefined();
    // The same condition alone, with the same value names: still every value used.
    const alone = validations.validateExpressions({
      ConditionExpression: "a <> :v",
      ExpressionAttributeValues: marshall({ ":v": 2 }),
    });
    expect(alone).toBeUndefined();
    // A condition that uses no value, parsed after an update that used :w ...
    const after = validations.validateExpressions({
      UpdateExpression: "SET a = :w",
      ConditionExpression: "attribute_exists(a)",
      ExpressionAttributeValues: marshall({ ":w": 1 }),
    });
    expect(after).toBeUndefined();
    // ... leaves :w unused when it comes alone.
    const unused = validations.validateExpressions({
      ConditionExpression: "attribute_exists(a)",
      ExpressionAttributeValues: marshall({ ":w": 1 }),
    });
    expect(unused).toContain("unused in expressions: keys: {:w}");
  });

  const condition = (expression: string, values: Record<string, unknown>) => ({
    ConditionExpression: expression,
    ExpressionAttributeValues: marshall(values),
  });
  const update = (expression: string, names: Record<string, string>) => ({
    UpdateExpression: expression,
    ExpressionAttributeNames: names,
    ExpressionAttributeValues: marshall({ ":v": 1, ":w": 2 }),
  });
  it.each([
    [
      "a value nothing uses",
      condition("a = :a", { ":a": 1 }),
      condition("a = :a", { ":a": 1, ":b": 2 }),
      "unused in expressions: keys: {:b}",
    ],
    [
      "a value of another type",
      condition("size(:a) > :n", { ":a": "text", ":n": 2 }),
      condition("size(:a) > :n", { ":a": 1, ":n": 2 }),
      "Incorrect operand type",
    ],
    ["a syntax error", condition("a = :a", { ":a": 1 }), condition("a = = :a", { ":a": 1 }), "Syntax error"],
    [
      "BETWEEN bounds the wrong way round",
      condition("a BETWEEN :hi AND :lo", { ":hi": 1, ":lo": 9 }),
      condition("a BETWEEN :hi AND :lo", { ":hi": 9, ":lo": 1 }),
      "upper bound to be greater",
    ],
    [
      "two names for one attribute",
      update("SET #a = :v, #b = :w", { "#a": "x", "#b": "y" }),
      update("SET #a = :v, #b = :w", { "#a": "x", "#b": "x" }),
      "Two document paths overlap",
    ],
    [
      "a name for an attribute the expression also names itself",
      update("SET #a = :v, b = :w", { "#a": "c" }),
      update("SET #a = :v, b = :w", { "#a": "b" }),
      "Two document paths overlap",
    ],
    [
      "a name nested under itself",
      update("SET #a.#b = :v, #b = :w", { "#a": "x", "#b": "y" }),
      update("SET #a.#b = :v, #b = :w", { "#a": "x", "#b": "x" }),
      "Two document paths overlap",
    ],
  ])("refuses %s every time, after a request like it was accepted", (_name, accepted, refused, message) => {
    expect(validations.validateExpressions(accepted)).toBeUndefined();
    for (let i = 0; i < 2; i++) expect(validations.validateExpressions(refused)).toContain(message);
  });
});

/** Until a deleted table is gone (DELETING, then nothing). */
async function gone(tableName: string): Promise<void> {
  for (;;) {
    try {
      await db.send(new DescribeTableCommand({ TableName: tableName }));
    } catch (err) {
      if (err instanceof ResourceNotFoundException) return;
      throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("through the store", () => {
  beforeAll(() => createKeyTable(db, "values"));

  it("evaluates a cached condition on each request's own values", async () => {
    await db.send(new PutItemCommand({ TableName: "values", Item: marshall({ pk: "a", n: 3 }) }));
    const bump = (max: number) =>
      db.send(
        new UpdateItemCommand({
          TableName: "values",
          Key: marshall({ pk: "a" }),
          UpdateExpression: "ADD n :one",
          ConditionExpression: "n < :max",
          ExpressionAttributeValues: marshall({ ":one": 1, ":max": max }),
        }),
      );
    await bump(5); // 3 < 5: n becomes 4
    await expect(bump(4)).rejects.toBeInstanceOf(ConditionalCheckFailedException); // 4 < 4 fails
    await bump(10); // n becomes 5
    const item = await db.send(new GetItemCommand({ TableName: "values", Key: marshall({ pk: "a" }) }));
    expect(item.Item?.n).toEqual({ N: "5" });
  });

  it("reads each write at once, under concurrent writes, and nothing for a key never written", async () => {
    // LevelDB's reads run on the store's own thread (readDynaliteInline): each read still sees the
    // latest write, with others in flight.
    await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        const pk = `w${i}`;
        await db.send(
          new PutItemCommand({ TableName: "values", Item: marshall({ pk, n: i, b: Buffer.from([i]) }) }),
        );
        const read = await db.send(
          new GetItemCommand({ TableName: "values", Key: marshall({ pk }), ConsistentRead: true }),
        );
        expect(read.Item).toEqual({ pk: { S: pk }, n: { N: String(i) }, b: { B: new Uint8Array([i]) } });
      }),
    );
    const missing = await db.send(
      new GetItemCommand({ TableName: "values", Key: marshall({ pk: "never" }) }),
    );
    expect(missing.Item).toBeUndefined();
  });

  it("writes a request's items and index entries in a few LevelDB batches, all there before the answer", async () => {
    await db.send(
      new CreateTableCommand({
        TableName: "indexed",
        BillingMode: "PAY_PER_REQUEST",
        AttributeDefinitions: [
          { AttributeName: "pk", AttributeType: "S" },
          { AttributeName: "g", AttributeType: "S" },
        ],
        KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
        GlobalSecondaryIndexes: [
          {
            IndexName: "byG",
            KeySchema: [{ AttributeName: "g", KeyType: "HASH" }],
            Projection: { ProjectionType: "ALL" },
          },
        ],
      }),
    );
    await untilActive(db, "indexed");
    const batch = ClassicLevel.prototype._batch;
    const batches: number[] = [];
    ClassicLevel.prototype._batch = function (operations, options) {
      batches.push(operations.length);
      return batch.call(this, operations, options);
    };
    try {
      const items = Array.from({ length: 25 }, (_, i) => marshall({ pk: `i${i}`, g: "group" }));
      await db.send(
        new BatchWriteItemCommand({
          RequestItems: { indexed: items.map((Item) => ({ PutRequest: { Item } })) },
        }),
      );
      // 25 items and 25 index entries: one task on libuv's pool each, before.
      expect(batches.reduce((a, b) => a + b, 0)).toBe(50);
      expect(batches.length).toBeLessThanOrEqual(4);
    } finally {
      ClassicLevel.prototype._batch = batch;
    }
    const listed = await db.send(
      new QueryCommand({
        TableName: "indexed",
        IndexName: "byG",
        KeyConditionExpression: "g = :g",
        ExpressionAttributeValues: marshall({ ":g": "group" }),
      }),
    );
    expect(listed.Count).toBe(25);
  });

  it("never answers from a table definition that was deleted or made again", async () => {
    const define = async (sortKey: boolean) => {
      await db.send(
        new CreateTableCommand({
          TableName: "remade",
          BillingMode: "PAY_PER_REQUEST",
          AttributeDefinitions: [
            { AttributeName: "pk", AttributeType: "S" },
            ...(sortKey ? [{ AttributeName: "sk", AttributeType: "N" as const }] : []),
          ],
          KeySchema: [
            { AttributeName: "pk", KeyType: "HASH" },
            ...(sortKey ? [{ AttributeName: "sk", KeyType: "RANGE" as const }] : []),
          ],
        }),
      );
      await untilActive(db, "remade");
    };
    await define(false);
    await db.send(new PutItemCommand({ TableName: "remade", Item: marshall({ pk: "x" }) }));
    await db.send(new DeleteTableCommand({ TableName: "remade" }));
    await expect(
      db.send(new GetItemCommand({ TableName: "remade", Key: marshall({ pk: "x" }) })),
    ).rejects.toBeInstanceOf(ResourceNotFoundException);
    await gone("remade");
    // Made again with a sort key: a key without it is refused by the new definition.
    await define(true);
    await expect(
      db.send(new DeleteItemCommand({ TableName: "remade", Key: marshall({ pk: "x" }) })),
    ).rejects.toThrow(/key element does not match the schema/);
    await db.send(new PutItemCommand({ TableName: "remade", Item: marshall({ pk: "x", sk: 1 }) }));
    const page = await db.send(
      new QueryCommand({
        TableName: "remade",
        KeyConditionExpression: "pk = :p",
        ExpressionAttributeValues: marshall({ ":p": "x" }),
      }),
    );
    expect(page.Items).toEqual([{ pk: { S: "x" }, sk: { N: "1" } }]);
  });

  it("parses a table's definition once for all its item requests, and afresh for a table request", async () => {
    // The definition as dynalite stores it: JSON with the table's name and key schema.
    const isDefinition = (text: unknown) =>
      typeof text === "string" && text.includes('"TableName":"values"') && text.includes('"KeySchema"');
    const parse = JSON.parse;
    let parsed = 0;
    const counting = async (work: () => Promise<unknown>) => {
      parsed = 0;
      JSON.parse = (text: string, reviver?: Parameters<typeof parse>[1]) => {
        if (isDefinition(text)) parsed++;
        return parse(text, reviver);
      };
      try {
        await work();
      } finally {
        JSON.parse = parse;
      }
      return parsed;
    };
    await db.send(new GetItemCommand({ TableName: "values", Key: marshall({ pk: "warm" }) }));
    const items = await counting(async () => {
      for (let i = 0; i < 10; i++) {
        await db.send(new GetItemCommand({ TableName: "values", Key: marshall({ pk: `p${i}` }) }));
      }
      await db.send(
        new BatchWriteItemCommand({
          RequestItems: {
            values: Array.from({ length: 20 }, (_, i) => ({
              PutRequest: { Item: marshall({ pk: `p${i}` }) },
            })),
          },
        }),
      );
    });
    expect(items).toBe(0);
    // A table request gets its own copy (DescribeTable's answer is parsed by the client as well).
    const described = await counting(() => db.send(new DescribeTableCommand({ TableName: "values" })));
    expect(described).toBeGreaterThanOrEqual(1);
    const read = await db.send(new GetItemCommand({ TableName: "values", Key: marshall({ pk: "p19" }) }));
    expect(read.Item).toEqual({ pk: { S: "p19" } });
  });
});

describe("LevelDB's write buffer", () => {
  it("holds more than LevelDB's default 4 MB of writes before a table file, and loses none of them on close", async () => {
    const own = mkdtempSync(join(tmpdir(), "dmt-dynalite-buffer-"));
    const tableFiles = () =>
      (readdirSync(own, { recursive: true }) as string[]).filter((name) => name.endsWith(".ldb"));
    try {
      let store = await startEmbeddedDynamo(own, { worker: false });
      let client = new DynaliteClient(store.endpoint);
      await createKeyTable(client, "big");
      // 12 MB: three times LevelDB's default buffer, well under ours.
      const value = (i: number) => `${i}`.padEnd(384 * 1024, "x");
      for (let i = 0; i < 32; i++)
        await client.send(
          new PutItemCommand({ TableName: "big", Item: marshall({ pk: `k${i}`, v: value(i) }) }),
        );
      expect(12 << 20).toBeLessThan(STORE_WRITE_BUFFER_BYTES);
      expect(tableFiles()).toEqual([]);
      client.destroy();
      await store.close();

      store = await startEmbeddedDynamo(own, { worker: false });
      client = new DynaliteClient(store.endpoint);
      try {
        for (let i = 0; i < 32; i++) {
          const read = await client.send(
            new GetItemCommand({ TableName: "big", Key: marshall({ pk: `k${i}` }), ConsistentRead: true }),
          );
          expect(read.Item?.v?.S).toBe(value(i));
        }
      } finally {
        client.destroy();
        await store.close();
      }
    } finally {
      rmSync(own, { recursive: true, force: true });
    }
  });
});
