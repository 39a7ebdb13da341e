import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateTableCommand, DeleteTableCommand, ListTablesCommand } from "@aws-sdk/client-dynamodb";
import { afterEach, describe, expect, it } from "vitest";
import { createDynamoClient, untilActive } from "../../lambda/adapters/dynamodb/client";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { openLocalStore } from "../../lambda/local/store";

/**
 * openLocalStore over the embedded store: the table check (ensureTables, a DescribeTable per table) is
 * skipped when the store has every table and the check last passed there on the same definitions
 * (`dynamodb/dmt-tables.json`); a missing table or other definitions check again.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const names = tableNames(process.env);
const checkedFile = (dir: string) => join(dir, "dynamodb", "dmt-tables.json");

async function withStoreClient(
  dir: string,
  use: (db: ReturnType<typeof createDynamoClient>) => Promise<void>,
) {
  const dynamo = await startEmbeddedDynamo(dir);
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  try {
    await use(db);
  } finally {
    db.destroy();
    await dynamo.close();
  }
}

describe("openLocalStore's table check", () => {
  it("records the definitions it checked, and opens again on them", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-store-open-"));
    dirs.push(dir);
    const first = await openLocalStore(dir);
    await first.store.createProject({ projectId: "p1", tier: "free", createdAt: 1 });
    await first.close();
    const checked = readFileSync(checkedFile(dir), "utf8");
    expect(JSON.parse(checked).names).toEqual(names);

    const again = await openLocalStore(dir);
    expect((await again.store.getProject("p1"))?.tier).toBe("free");
    await again.close();
    expect(readFileSync(checkedFile(dir), "utf8")).toBe(checked);
  });

  it("creates a table that went missing since the check", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-store-open-"));
    dirs.push(dir);
    await (await openLocalStore(dir)).close();
    await withStoreClient(dir, (db) => dropTable(db, names.ledger));
    const reopened = await openLocalStore(dir);
    const listed = await reopened.db.send(new ListTablesCommand({}));
    await reopened.close();
    expect(listed.TableNames).toContain(names.ledger);
  });

  it("checks again under other definitions: a table without an index is migrated, and logged", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-store-open-"));
    dirs.push(dir);
    await (await openLocalStore(dir)).close();
    await withStoreClient(dir, (db) => oldDeletionRequests(db));
    writeFileSync(checkedFile(dir), JSON.stringify({ names, tables: {} }));
    const lines: string[] = [];
    await (await openLocalStore(dir, undefined, { log: (line) => lines.push(line) })).close();
    // The migration itself, crashes included: table-migration.test.ts.
    expect(lines).toEqual([
      expect.stringContaining(`table '${names.deletionRequests}' made anew with index 'byCreated'`),
    ]);
  });

  it("a store at DMT_DYNAMODB_ENDPOINT whose table lacks an index stops the open: it is not migrated", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-store-open-"));
    dirs.push(dir);
    await (await openLocalStore(dir)).close();
    const dynamo = await startEmbeddedDynamo(dir);
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    try {
      await oldDeletionRequests(db);
      const other = mkdtempSync(join(tmpdir(), "dmt-store-open-"));
      dirs.push(other);
      await expect(openLocalStore(other, dynamo.endpoint)).rejects.toThrow(
        `table '${names.deletionRequests}' has no index 'byCreated'`,
      );
    } finally {
      db.destroy();
      await dynamo.close();
    }
  });
});

/** The deletionRequests table as it was made before its index existed, by an older version. */
async function oldDeletionRequests(db: ReturnType<typeof createDynamoClient>) {
  await dropTable(db, names.deletionRequests);
  await db.send(
    new CreateTableCommand({
      TableName: names.deletionRequests,
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
  // dynalite makes a table ACTIVE just after answering: the store is closed only once it is.
  await untilActive(db, names.deletionRequests);
}

/** Deletes a table and waits until it is gone (dynalite deletes it just after answering). */
async function dropTable(db: ReturnType<typeof createDynamoClient>, tableName: string) {
  await db.send(new DeleteTableCommand({ TableName: tableName }));
  while ((await db.send(new ListTablesCommand({}))).TableNames?.includes(tableName)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
