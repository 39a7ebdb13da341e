import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  UpdateTableCommand,
} from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, ensureTables, untilActive } from "../../lambda/adapters/dynamodb/client";
import { DynamoDeletionRequests } from "../../lambda/adapters/dynamodb/deletion-requests";
import { migrateTable } from "../../lambda/adapters/dynamodb/table-migration";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { newDeletionRequest } from "../../lambda/core/deletion";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";

/**
 * `ensureTables` over the embedded DynamoDB (dynalite, persisted, the real wire protocol): new tables
 * get every index, and a table made before an index was added (a data dir from an older version)
 * stops the start with what to do instead of failing the queries that need the index, unless the start
 * migrates it (the data dir's own store: table-migration.test.ts).
 */

/** dynalite itself, in memory, to set how long it takes to make a table ACTIVE. */
const dynalite = createRequire(import.meta.url)("dynalite") as (options: { createTableMs: number }) => Server;

let dir: string;
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-tables-"));
  dynamo = await startEmbeddedDynamo(dir);
  db = createDynamoClient({ endpoint: dynamo.endpoint });
});
afterAll(async () => {
  db.destroy();
  await dynamo.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The deletionRequests table as it was created before `byCreated` existed. */
async function createDeletionRequestsWithoutIndex(tableName: string): Promise<void> {
  await db.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [
        { AttributeName: "projectId", AttributeType: "S" },
        { AttributeName: "itemId", AttributeType: "S" },
      ],
      KeySchema: [
        { AttributeName: "projectId", KeyType: "HASH" },
        { AttributeName: "itemId", KeyType: "RANGE" },
      ],
    }),
  );
  await untilActive(db, tableName);
}

async function indexNames(tableName: string): Promise<(string | undefined)[]> {
  const { Table } = await db.send(new DescribeTableCommand({ TableName: tableName }));
  return (Table?.GlobalSecondaryIndexes ?? []).map((index) => index.IndexName);
}

describe("ensureTables", () => {
  it("creates missing tables with their indexes, queryable; a second run leaves them as they are", async () => {
    const names = tableNames({}, "fresh-");
    await ensureTables(db, names);
    expect(await indexNames(names.deletionRequests)).toEqual(["byCreated"]);

    const requests = new DynamoDeletionRequests(db, names.deletionRequests);
    const request = newDeletionRequest("proj-fresh", { reason: "erasure", userId: "u-1" }, 1_000);
    await requests.create(request);
    await ensureTables(db, names);
    const page = await requests.list("proj-fresh", { limit: 10 });
    expect(page.requests.map((r) => r.requestId)).toEqual([request.requestId]);
  });

  it("stops at a table made before an index was added, naming both and what to do; keeps its items", async () => {
    const names = tableNames({}, "old-");
    await createDeletionRequestsWithoutIndex(names.deletionRequests);
    const requests = new DynamoDeletionRequests(db, names.deletionRequests);
    const request = newDeletionRequest("proj-old", { reason: "erasure", transactionIds: ["tx-1"] }, 1_000);
    await requests.create(request);
    // What the dashboard's list ran into.
    await expect(requests.list("proj-old", { limit: 10 })).rejects.toThrow(/byCreated/);

    const refused = ensureTables(db, names);
    await expect(refused).rejects.toThrow("table 'old-deletionRequests' has no index 'byCreated'");
    await expect(refused).rejects.toThrow("A store at DMT_DYNAMODB_ENDPOINT is not migrated");
    expect(await indexNames(names.deletionRequests)).toEqual([]);
    expect((await requests.get("proj-old", request.requestId))?.reason).toBe("erasure");
    // The tables after it were still created: the check reports, it does not stop half-way.
    expect(await indexNames(names.deletionTombstones)).toEqual([]);
    expect(await indexNames(names.keys)).toEqual(["byProject"]);

    // Migrated, as the data dir's own store is at open: the list reads the request through the index.
    const lines: string[] = [];
    await ensureTables(db, names, (table, def, lacking) =>
      migrateTable(db, table, def, lacking, (line) => lines.push(line)),
    );
    expect(lines).toEqual([
      expect.stringContaining("table 'old-deletionRequests' made anew with index 'byCreated'"),
    ]);
    const page = await requests.list("proj-old", { limit: 10 });
    expect(page.requests.map((r) => r.requestId)).toEqual([request.requestId]);
  });

  it("returns once the tables it created take item requests, however long the store takes to make them", async () => {
    // DynamoDB takes seconds to make a table ACTIVE; the embedded store does it just after answering.
    const slow = dynalite({ createTableMs: 1_000 });
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    const slowDb = createDynamoClient({
      endpoint: `http://127.0.0.1:${(slow.address() as AddressInfo).port}`,
    });
    try {
      const names = tableNames({}, "slow-");
      await ensureTables(slowDb, names);
      const requests = new DynamoDeletionRequests(slowDb, names.deletionRequests);
      const request = newDeletionRequest("proj-slow", { reason: "erasure", userId: "u-1" }, 1_000);
      await requests.create(request);
      expect((await requests.get("proj-slow", request.requestId))?.reason).toBe("erasure");
    } finally {
      slowDb.destroy();
      await new Promise((resolve) => slow.close(resolve));
    }
  });

  // Why ensureTables refuses rather than adding the index: should dynalite learn it, this fails.
  it("dynalite accepts UpdateTable's index Create and ignores it", async () => {
    const tableName = "ignored-deletionRequests";
    await createDeletionRequestsWithoutIndex(tableName);
    await db.send(
      new UpdateTableCommand({
        TableName: tableName,
        AttributeDefinitions: [
          { AttributeName: "projectId", AttributeType: "S" },
          { AttributeName: "createdAt", AttributeType: "N" },
        ],
        GlobalSecondaryIndexUpdates: [
          {
            Create: {
              IndexName: "byCreated",
              KeySchema: [
                { AttributeName: "projectId", KeyType: "HASH" },
                { AttributeName: "createdAt", KeyType: "RANGE" },
              ],
              Projection: { ProjectionType: "ALL" },
              // dynalite's validation requires it even on an on-demand table.
              ProvisionedThroughput: { ReadCapacityUnits: 1, WriteCapacityUnits: 1 },
            },
          },
        ],
      }),
    );
    expect(await indexNames(tableName)).toEqual([]);
  });
});
