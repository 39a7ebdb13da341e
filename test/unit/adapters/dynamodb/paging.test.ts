/**
 * The DynamoDB adapters' shared loops (lambda/adapters/dynamodb/paging.ts), against a client whose
 * answers are scripted here: every page followed, batches cut to DynamoDB's sizes, what DynamoDB left
 * unprocessed sent again, and a clear error when it keeps leaving some.
 */
import { type AttributeValue, DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { afterEach, describe, expect, it, vi } from "vitest";
import { batchGet, batchWrite, queryItems, scanAll } from "../../../../lambda/adapters/dynamodb/paging";

type Input = Record<string, unknown>;
type StoredItem = Record<string, AttributeValue>;

/** A client that answers each command with `answer(name, input)`, and notes every command it got. */
function scripted(answer: (name: string, input: Input) => object) {
  const sent: { name: string; input: Input }[] = [];
  const db = new DynamoDBClient({ region: "local", credentials: { accessKeyId: "a", secretAccessKey: "b" } });
  db.middlewareStack.add(
    (_next, context) => async (args) => {
      const input = structuredClone(args.input) as Input;
      sent.push({ name: context.commandName ?? "", input });
      return { output: { $metadata: {}, ...answer(context.commandName ?? "", input) }, response: {} };
    },
    { step: "initialize", name: "scriptedAnswers" },
  );
  return { db, sent };
}

const item = (id: number): StoredItem => ({ pk: { S: `k${id}` } });
const ids = (n: number, from = 0) => Array.from({ length: n }, (_, i) => item(from + i));

afterEach(() => {
  vi.useRealTimers();
});

describe("every page of a Query or a Scan", () => {
  it("follows LastEvaluatedKey, and reads a page only when the one before is used up", async () => {
    const pages = [ids(2, 0), ids(2, 2), ids(1, 4)];
    const { db, sent } = scripted((_name, input) => {
      const start = input.ExclusiveStartKey as StoredItem | undefined;
      const at = start === undefined ? 0 : (Number(start.pk?.S?.slice(1)) + 1) / 2;
      const page = pages[at] ?? [];
      return { Items: page, ...(at < pages.length - 1 && { LastEvaluatedKey: page[page.length - 1] }) };
    });
    const found = queryItems(db, { TableName: "t", KeyConditionExpression: "pk = :p", Limit: 2 });
    expect((await found.next()).value).toEqual({ pk: "k0" });
    expect(sent).toHaveLength(1);
    const rest: unknown[] = [];
    for await (const each of found) rest.push(each);
    expect(rest).toEqual([{ pk: "k1" }, { pk: "k2" }, { pk: "k3" }, { pk: "k4" }]);
    expect(sent.map((s) => s.input.ExclusiveStartKey)).toEqual([undefined, item(1), item(3)]);
    expect(sent.every((s) => s.name === "QueryCommand" && s.input.Limit === 2)).toBe(true);
  });

  it("collects a Scan's pages in order", async () => {
    const { db, sent } = scripted((_name, input) =>
      input.ExclusiveStartKey === undefined
        ? { Items: ids(3), LastEvaluatedKey: item(2) }
        : { Items: ids(1, 3) },
    );
    expect(await scanAll(db, { TableName: "t" })).toEqual([
      { pk: "k0" },
      { pk: "k1" },
      { pk: "k2" },
      { pk: "k3" },
    ]);
    expect(sent.map((s) => s.name)).toEqual(["ScanCommand", "ScanCommand"]);
  });
});

describe("batches", () => {
  it("reads 100 keys a request, and sends again the keys DynamoDB left unprocessed", async () => {
    let left = true;
    const { db, sent } = scripted((_name, input) => {
      const request = (input.RequestItems as Record<string, { Keys: StoredItem[] }>).t;
      const keys = request?.Keys ?? [];
      // The first request's last key is left for a second round, once.
      if (left && keys.length === 100) {
        left = false;
        return {
          Responses: { t: keys.slice(0, 99) },
          UnprocessedKeys: { t: { ...request, Keys: keys.slice(99) } },
        };
      }
      return { Responses: { t: keys }, UnprocessedKeys: {} };
    });
    const found = await batchGet(
      db,
      "t",
      ids(150),
      { ProjectionExpression: "pk", ConsistentRead: true },
      "the test",
    );
    expect(found.map((f) => f.pk?.S).sort()).toEqual(
      ids(150)
        .map((k) => k.pk?.S)
        .sort(),
    );
    const sizes = sent.map(
      (s) => (s.input.RequestItems as Record<string, { Keys: unknown[] }>).t?.Keys.length,
    );
    expect(sizes).toEqual([100, 1, 50]);
    expect(sent[0]?.input.RequestItems).toMatchObject({
      t: { ProjectionExpression: "pk", ConsistentRead: true },
    });
  });

  it("writes 25 requests a request, and sends again what DynamoDB left unprocessed", async () => {
    let left = true;
    const { db, sent } = scripted((_name, input) => {
      const requests = (input.RequestItems as Record<string, unknown[]>).t ?? [];
      if (left) {
        left = false;
        return { UnprocessedItems: { t: requests.slice(20) } };
      }
      return { UnprocessedItems: {} };
    });
    const requests = ids(60).map((Item) => ({ PutRequest: { Item } }));
    await batchWrite(db, "t", requests, "the test");
    const sizes = sent.map((s) => (s.input.RequestItems as Record<string, unknown[]>).t?.length);
    expect(sizes).toEqual([25, 5, 25, 10]);
  });

  it("names the table's owner when DynamoDB keeps leaving keys unprocessed", async () => {
    vi.useFakeTimers();
    const { db, sent } = scripted((_name, input) => ({ Responses: {}, UnprocessedKeys: input.RequestItems }));
    const reading = batchGet(db, "t", ids(3), {}, "the test table");
    const failed = expect(reading).rejects.toThrow("the test table kept throttling reads");
    await vi.runAllTimersAsync();
    await failed;
    expect(sent).toHaveLength(8);
  });
});
