import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MessagePort } from "node:worker_threads";
import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  CreateTableCommand,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  ResourceNotFoundException,
  ScanCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, untilActive } from "../../lambda/adapters/dynamodb/client";
import { DynaliteClient } from "../../lambda/local/dynalite-client";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { createKeyTable } from "../support/dynamo-tables";

/**
 * The embedded store's lean client answers as the AWS SDK's client does, on the same dynalite: the
 * same outputs (bytes as bytes), the same exception classes the adapters catch, the same refusals;
 * over loopback HTTP (another process's way to the store) and over a message port to the store's
 * worker (the way of the threads of the process that runs it).
 */
const TABLE = "parity";
let dir: string;
let dynamo: EmbeddedDynamo;
let sdk: DynamoDBClient;
let overHttp: DynaliteClient;
let overPort: DynaliteClient;
/** The lean client under test: one of the two. */
let lean: DynaliteClient;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-dynalite-client-"));
  dynamo = await startEmbeddedDynamo(dir);
  sdk = createDynamoClient({ endpoint: dynamo.endpoint });
  overHttp = new DynaliteClient(dynamo.endpoint);
  overPort = new DynaliteClient(dynamo.endpoint, dynamo.connect?.());
  // A table operation: the lean client hands it to the SDK.
  await overPort.send(
    new CreateTableCommand({
      TableName: TABLE,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "pk", AttributeType: "S" },
        { AttributeName: "sk", AttributeType: "N" },
      ],
      KeySchema: [
        { AttributeName: "pk", KeyType: "HASH" },
        { AttributeName: "sk", KeyType: "RANGE" },
      ],
    }),
  );
  await untilActive(overPort, TABLE);
});
afterAll(async () => {
  sdk?.destroy();
  overHttp?.destroy();
  overPort?.destroy();
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A store command of any kind (the SDK's types tie each to its own input and output). */
type AnyCommand = object;
type Output = Record<string, unknown> & {
  Item?: Record<string, AttributeValue>;
  LastEvaluatedKey?: Record<string, unknown>;
};
type StoreError = Error & { $fault?: string; $metadata?: { httpStatusCode?: number } };

/** What a command's output holds from each client, without the transport's metadata. */
async function both(command: () => AnyCommand): Promise<{ sdk: Output; lean: Output }> {
  const withoutMetadata = (out: unknown): Output => {
    const { $metadata, ...rest } = out as Output & { $metadata: { httpStatusCode?: number } };
    expect($metadata.httpStatusCode).toBe(200);
    return rest;
  };
  return {
    sdk: withoutMetadata(await sdk.send(command() as never)),
    lean: withoutMetadata(await lean.send(command() as never)),
  };
}

async function refusal(client: DynamoDBClient, command: AnyCommand): Promise<StoreError> {
  const err = await client.send(command as never).then(
    () => undefined,
    (e: unknown) => e as StoreError,
  );
  expect(err).toBeInstanceOf(Error);
  return err as StoreError;
}

describe.each([
  ["over loopback HTTP", () => overHttp],
  ["over a message port", () => overPort],
])("the lean client %s, beside the SDK's", (_transport, client) => {
  beforeAll(() => {
    lean = client();
  });

  it("writes and reads bytes, numbers, sets and nested values as the SDK does", async () => {
    const item = {
      pk: "mixed",
      sk: 1,
      body: Buffer.from("héllo, bytes"),
      raw: new Uint8Array([0, 1, 2, 255]),
      view: Buffer.from("xxabcxx").subarray(2, 5),
      price: 12_345_678_901,
      tags: new Set(["a", "b"]),
      blobs: new Set([Buffer.from([1]), new Uint8Array([2, 3])]),
      nested: { list: [1, "two", { three: true }, Buffer.from("deep")], none: null },
    };
    await lean.send(new PutItemCommand({ TableName: TABLE, Item: marshall(item) }));
    const read = await both(
      () =>
        new GetItemCommand({ TableName: TABLE, Key: marshall({ pk: "mixed", sk: 1 }), ConsistentRead: true }),
    );
    expect(read.lean).toEqual(read.sdk);
    const got = read.lean.Item ?? {};
    expect(got.body?.B).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(got.body?.B as Uint8Array).toString()).toBe("héllo, bytes");
    expect([...(got.view?.B ?? [])]).toEqual([..."abc"].map((c) => c.charCodeAt(0)));
    expect(got.blobs?.BS?.map((b) => [...b])).toEqual([[1], [2, 3]]);
    const deep = got.nested?.M?.list?.L?.[3]?.B;
    expect(deep).toBeInstanceOf(Uint8Array);
    expect(Buffer.from(deep as Uint8Array).toString()).toBe("deep");
  });

  it("queries and scans page by page with the same pages and keys", async () => {
    for (let sk = 10; sk < 17; sk++) {
      await lean.send(
        new PutItemCommand({ TableName: TABLE, Item: marshall({ pk: "paged", sk, n: sk * 2 }) }),
      );
    }
    let start: Record<string, unknown> | undefined;
    let pages = 0;
    do {
      const page = await both(
        () =>
          new QueryCommand({
            TableName: TABLE,
            KeyConditionExpression: "pk = :p AND sk >= :from",
            ExpressionAttributeValues: marshall({ ":p": "paged", ":from": 10 }),
            Limit: 3,
            ExclusiveStartKey: start as never,
          }),
      );
      expect(page.lean).toEqual(page.sdk);
      start = page.lean.LastEvaluatedKey;
      pages++;
    } while (start);
    expect(pages).toBe(3);
    const scan = await both(() => new ScanCommand({ TableName: TABLE, Limit: 4 }));
    expect(scan.lean).toEqual(scan.sdk);
  });

  it("updates, deletes and batches with the same answers", async () => {
    await lean.send(new PutItemCommand({ TableName: TABLE, Item: marshall({ pk: "counter", sk: 0, n: 1 }) }));
    const updated = await lean.send(
      new UpdateItemCommand({
        TableName: TABLE,
        Key: marshall({ pk: "counter", sk: 0 }),
        UpdateExpression: "ADD n :one SET b = :b",
        ExpressionAttributeValues: marshall({ ":one": 1, ":b": new Uint8Array([7]) }),
        ReturnValues: "ALL_NEW",
      }),
    );
    expect(updated.Attributes).toEqual({
      pk: { S: "counter" },
      sk: { N: "0" },
      n: { N: "2" },
      b: { B: new Uint8Array([7]) },
    });

    await lean.send(
      new BatchWriteItemCommand({
        RequestItems: {
          [TABLE]: [1, 2, 3].map((sk) => ({
            PutRequest: { Item: marshall({ pk: "batch", sk, b: Buffer.from([sk]) }) },
          })),
        },
      }),
    );
    const keys = [1, 2, 3].map((sk) => marshall({ pk: "batch", sk }));
    const batch = await both(() => new BatchGetItemCommand({ RequestItems: { [TABLE]: { Keys: keys } } }));
    const sorted = (out: typeof batch.sdk) =>
      (out.Responses as Record<string, { sk: { N: string } }[]>)[TABLE]?.sort(
        (a, b) => Number(a.sk.N) - Number(b.sk.N),
      );
    expect(sorted(batch.lean)).toEqual(sorted(batch.sdk));
    expect(sorted(batch.lean)).toHaveLength(3);

    const deleted = await lean.send(
      new DeleteItemCommand({
        TableName: TABLE,
        Key: marshall({ pk: "batch", sk: 1 }),
        ReturnValues: "ALL_OLD",
      }),
    );
    expect(deleted.Attributes?.b).toEqual({ B: new Uint8Array([1]) });
  });

  it("throws the SDK's ConditionalCheckFailedException when a condition fails, and writes nothing", async () => {
    await lean.send(
      new PutItemCommand({ TableName: TABLE, Item: marshall({ pk: "taken", sk: 0, v: "first" }) }),
    );
    const condition = () =>
      new PutItemCommand({
        TableName: TABLE,
        Item: marshall({ pk: "taken", sk: 0, v: "second" }),
        ConditionExpression: "attribute_not_exists(pk)",
      });
    const leanErr = await refusal(lean, condition());
    const sdkErr = await refusal(sdk, condition());
    expect(leanErr).toBeInstanceOf(ConditionalCheckFailedException);
    expect(sdkErr).toBeInstanceOf(ConditionalCheckFailedException);
    expect(leanErr.message).toBe(sdkErr.message);
    expect(leanErr.$metadata?.httpStatusCode).toBe(400);
    const kept = await lean.send(
      new GetItemCommand({ TableName: TABLE, Key: marshall({ pk: "taken", sk: 0 }) }),
    );
    expect(kept.Item?.v).toEqual({ S: "first" });
  });

  it("throws the SDK's ResourceNotFoundException for a table that is not there", async () => {
    const err = await refusal(lean, new GetItemCommand({ TableName: "absent", Key: marshall({ pk: "x" }) }));
    expect(err).toBeInstanceOf(ResourceNotFoundException);
    expect(err.$metadata?.httpStatusCode).toBe(400);
  });

  it.each([
    [
      "a table that does not exist",
      () => new GetItemCommand({ TableName: "absent", Key: marshall({ pk: "x", sk: 0 }) }),
    ],
    [
      "a table name too short",
      () => new GetItemCommand({ TableName: "x", Key: marshall({ pk: "x", sk: 0 }) }),
    ],
    [
      "a key without its sort key",
      () => new GetItemCommand({ TableName: TABLE, Key: marshall({ pk: "x" }) }),
    ],
    [
      "a number that is not one",
      () =>
        new PutItemCommand({
          TableName: TABLE,
          Item: { pk: { S: "n" }, sk: { N: "0" }, n: { N: "twelve" } },
        }),
    ],
    [
      "an expression that does not parse",
      () =>
        new UpdateItemCommand({
          TableName: TABLE,
          Key: marshall({ pk: "x", sk: 0 }),
          UpdateExpression: "SET = 1",
        }),
    ],
  ])("refuses %s exactly as the SDK's client does", async (_name, command) => {
    const leanErr = await refusal(lean, command());
    const sdkErr = await refusal(sdk, command());
    expect({ name: leanErr.name, message: leanErr.message, fault: leanErr.$fault }).toEqual({
      name: sdkErr.name,
      message: sdkErr.message,
      fault: sdkErr.$fault,
    });
    // The same class: ResourceNotFoundException for a missing table, as the adapters catch it.
    expect(leanErr.constructor).toBe(sdkErr.constructor);
  });
});

describe("the lean client's ways to the store", () => {
  it("fails at once, with the connection's error, when no store listens at its endpoint", async () => {
    // A port that was just free: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const nowhere = new DynaliteClient(`http://127.0.0.1:${port}`);
    try {
      const err = await refusal(
        nowhere,
        new GetItemCommand({ TableName: TABLE, Key: marshall({ pk: "x", sk: 0 }) }),
      );
      expect(err.message).toMatch(/ECONNREFUSED/);
    } finally {
      nowhere.destroy();
    }
  });

  it("answers each of many requests in flight on two ports with its own item", async () => {
    const second = new DynaliteClient(dynamo.endpoint, dynamo.connect?.());
    try {
      const keys = Array.from({ length: 40 }, (_, i) => i);
      await Promise.all(
        keys.map((sk) =>
          overPort.send(
            new PutItemCommand({ TableName: TABLE, Item: marshall({ pk: "fan", sk, v: `v${sk}` }) }),
          ),
        ),
      );
      const read = (client: DynaliteClient, sk: number) =>
        client
          .send(new GetItemCommand({ TableName: TABLE, Key: marshall({ pk: "fan", sk }) }))
          .then((out: { Item?: Record<string, { S?: string }> }) => out.Item?.v?.S);
      const answers = await Promise.all(keys.flatMap((sk) => [read(overPort, sk), read(second, sk)]));
      expect(answers).toEqual(keys.flatMap((sk) => [`v${sk}`, `v${sk}`]));
    } finally {
      second.destroy();
    }
  });

  it.each([
    ["an unknown operation", "DynamoDB_20120810.FlyAway", "{}"],
    ["an unknown API", "Dynamo.GetItem", "{}"],
    ["a target without an API", "GetItem", "{}"],
    ["a body that is not JSON", "DynamoDB_20120810.GetItem", "{nope"],
    ["an empty body", "DynamoDB_20120810.GetItem", ""],
    ["a request missing its table", "DynamoDB_20120810.GetItem", "{}"],
    [
      "a table that does not exist",
      "DynamoDB_20120810.GetItem",
      '{"TableName":"absent","Key":{"pk":{"S":"x"}}}',
    ],
  ])("answers %s on a port as the store's HTTP server does", async (_name, target, body) => {
    const port = dynamo.connect?.() as MessagePort;
    try {
      const overPort = await new Promise<{ status: number; text: string }>((resolve) => {
        port.once("message", resolve);
        port.postMessage({ id: 1, target, body });
      });
      const overHttp = await fetch(dynamo.endpoint, {
        method: "POST",
        headers: {
          "content-type": "application/x-amz-json-1.0",
          "x-amz-target": target,
          "x-amz-date": "20200101T000000Z",
          authorization:
            "AWS4-HMAC-SHA256 Credential=local/20200101/local/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
        },
        body,
      });
      expect(overHttp.status).toBeGreaterThanOrEqual(400);
      expect({ status: overPort.status, body: JSON.parse(overPort.text) }).toEqual({
        status: overHttp.status,
        body: await overHttp.json(),
      });
    } finally {
      port.close();
    }
  });

  it("fails a request over a port once its store has closed, instead of waiting forever", async () => {
    const own = mkdtempSync(join(tmpdir(), "dmt-dynalite-port-"));
    const closing = await startEmbeddedDynamo(own);
    const client = new DynaliteClient(closing.endpoint, closing.connect?.());
    try {
      await createKeyTable(client, TABLE);
      const get = () => client.send(new GetItemCommand({ TableName: TABLE, Key: marshall({ pk: "x" }) }));
      expect((await get()).Item).toBeUndefined();
      await closing.close();
      await expect(get()).rejects.toThrow("the store closed");
    } finally {
      client.destroy();
      rmSync(own, { recursive: true, force: true });
    }
  });
});
