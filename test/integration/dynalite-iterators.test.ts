import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import type { AddressInfo, Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CreateTableCommand,
  ListTablesCommand,
  PutItemCommand,
  QueryCommand,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, untilActive } from "../../lambda/adapters/dynamodb/client";
import { closeDynaliteIterators, dynaliteAbstractLevel } from "../../lambda/local/dynalite-iterators.mjs";

/**
 * dynalite's queries, scans and table listings read LevelDB through iterators; one left open keeps
 * the memtables and table files it started on, so memory and the store's folder grow with every write
 * (what `npm run fuzz` saw as RSS growing 24 KB a request). Every iterator opened must be closed once
 * its request is answered. The store runs in this process here, so its iterators can be counted.
 */
const open = new Set<object>();
let opened = 0;
let server: Server;
let dir: string;
const db = () =>
  createDynamoClient({ endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });

beforeAll(async () => {
  // A database's resources are its open iterators (and snapshots, which dynalite does not take).
  const proto = dynaliteAbstractLevel().AbstractLevel.prototype;
  const attach = proto.attachResource;
  const detach = proto.detachResource;
  const isIterator = (r: object) => typeof (r as { next?: unknown }).next === "function";
  proto.attachResource = function (resource) {
    if (isIterator(resource)) {
      open.add(resource);
      opened++;
    }
    attach.call(this, resource);
  };
  proto.detachResource = function (resource) {
    open.delete(resource);
    detach.call(this, resource);
  };
  closeDynaliteIterators();
  dir = mkdtempSync(join(tmpdir(), "dmt-dynalite-"));
  const dynalite = createRequire(import.meta.url)("dynalite") as (options: object) => Server;
  server = dynalite({ path: join(dir, "db"), createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});
afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe("dynalite's iterators", () => {
  it("are all closed once queries, scans and listings are answered", async () => {
    const client = db();
    try {
      await client.send(
        new CreateTableCommand({
          TableName: "things",
          AttributeDefinitions: [
            { AttributeName: "pk", AttributeType: "S" },
            { AttributeName: "sk", AttributeType: "S" },
          ],
          KeySchema: [
            { AttributeName: "pk", KeyType: "HASH" },
            { AttributeName: "sk", KeyType: "RANGE" },
          ],
          BillingMode: "PAY_PER_REQUEST",
        }),
      );
      await untilActive(client, "things");
      for (let i = 0; i < 20; i++) {
        await client.send(
          new PutItemCommand({
            TableName: "things",
            Item: { pk: { S: "p" }, sk: { S: `s${String(i).padStart(2, "0")}` } },
          }),
        );
      }
      const query = (limit?: number) =>
        client.send(
          new QueryCommand({
            TableName: "things",
            KeyConditionExpression: "pk = :p",
            ExpressionAttributeValues: { ":p": { S: "p" } },
            ...(limit ? { Limit: limit } : {}),
          }),
        );
      for (let i = 0; i < 10; i++) {
        expect((await query()).Items).toHaveLength(20);
        expect((await query(3)).Items).toHaveLength(3);
        await client.send(
          new QueryCommand({
            TableName: "things",
            KeyConditionExpression: "pk = :p",
            ExpressionAttributeValues: { ":p": { S: "nobody" } },
          }),
        );
        expect((await client.send(new ScanCommand({ TableName: "things" }))).Items).toHaveLength(20);
        await client.send(new ListTablesCommand({}));
      }
      expect(opened).toBeGreaterThanOrEqual(50);
      // An iterator closes just after its answer is sent: wait for that, not for a fixed time.
      for (let i = 0; i < 500 && open.size > 0; i++) await new Promise((r) => setTimeout(r, 10));
      expect(open.size).toBe(0);
    } finally {
      client.destroy();
    }
  });
});
