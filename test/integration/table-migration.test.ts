import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type AttributeValue,
  DeleteTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  ListTablesCommand,
  PutItemCommand,
  ScanCommand,
} from "@aws-sdk/client-dynamodb";
import { afterEach, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { createDynamoClient, createTable, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import {
  finishTableMigrations,
  migrateTable,
  stagingTableName,
} from "../../lambda/adapters/dynamodb/table-migration";
import { TABLES, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { counterId, newBudget, windowSpan } from "../../lambda/core/budgets";
import { newHoldId } from "../../lambda/core/credits";
import { startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { openLocalStore } from "../../lambda/local/store";

/**
 * A data dir made before the `holdsDue` index was declared on the credits and budget counters tables:
 * opening it migrates each such table (made anew in the declared shape, its items copied), and a
 * migration stopped at any step is finished by the next open with no item lost.
 */

const T0 = Date.UTC(2026, 11, 7, 12);
const MINUTE = 60_000;
const clock = () => T0;
const names = tableNames(process.env);
/** Items of an older release beside the balances and holds: more than one BatchWriteItem's worth. */
const OLD_ITEMS = 60;

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function withStoreClient<T>(dir: string, use: (db: DynamoDBClient) => Promise<T>): Promise<T> {
  const dynamo = await startEmbeddedDynamo(dir);
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  try {
    return await use(db);
  } finally {
    db.destroy();
    await dynamo.close();
  }
}

async function untilGone(db: DynamoDBClient, table: string) {
  // dynalite deletes a table shortly after answering.
  while ((await db.send(new ListTablesCommand({}))).TableNames?.includes(table)) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * A data dir as the release before the index left it: both tables without `holdsDue`, an open hold
 * on a project's balance and on a budget window (each with its index attributes), other items, and
 * that release's table definitions in the check file. Answers the project and the window's counter.
 */
async function oldDataDir(dir: string) {
  await (await openLocalStore(dir, undefined, { log: () => {} })).close();
  const project = "proj-before-index";
  const budget = newBudget({ projectId: project, usd: "100", window: "day" }, T0);
  const counter = counterId(budget, windowSpan("day", T0), null);
  await withStoreClient(dir, async (db) => {
    for (const table of [names.credits, names.budgetCounters]) {
      await db.send(new DeleteTableCommand({ TableName: table }));
      await untilGone(db, table);
    }
    await createTable(db, names.credits, { ...TABLES.credits, indexes: [] });
    await createTable(db, names.budgetCounters, { ...TABLES.budgetCounters, indexes: [] });
    const credits = new DynamoCredits(db, names, clock);
    const budgets = new DynamoBudgets(db, names, clock);
    await credits.grant(project, 10_000_000, "cli");
    const lease = await credits.hold(project, newHoldId(), 2_000_000, T0 + 15 * MINUTE);
    const window = await budgets.hold(counter, newHoldId(), 2_000_000, T0 + 15 * MINUTE, 100_000_000);
    if (!lease.ok || !window.ok) throw new Error("refused");
    await credits.recordCharges(lease.hold, { chargedMicros: 300_000, uncollectedMicros: 0, calls: 2 });
    await budgets.recordCharges(window.hold, { chargedMicros: 300_000, uncollectedMicros: 0, calls: 2 });
    for (let i = 0; i < OLD_ITEMS; i++) {
      await db.send(
        new PutItemCommand({
          TableName: names.credits,
          Item: { projectId: { S: `old-${i}` }, available: { N: String(i) } },
        }),
      );
    }
  });
  const oldTables = {
    ...TABLES,
    credits: { ...TABLES.credits, indexes: undefined },
    budgetCounters: { ...TABLES.budgetCounters, indexes: undefined },
  };
  writeFileSync(join(dir, "dynamodb", "dmt-tables.json"), JSON.stringify({ names, tables: oldTables }));
  return { project, counter };
}

async function scanAll(db: DynamoDBClient, table: string): Promise<Record<string, AttributeValue>[]> {
  const items: Record<string, AttributeValue>[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await db.send(new ScanCommand({ TableName: table, ExclusiveStartKey: start }));
    items.push(...(page.Items ?? []));
    start = page.LastEvaluatedKey;
  } while (start);
  return items.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}

/** Opens the data dir and checks that everything the old release wrote is there, and read through the index. */
async function expectUpgraded(
  dir: string,
  old: { project: string; counter: string },
  items: Record<string, AttributeValue>[],
) {
  const lines: string[] = [];
  const local = await openLocalStore(dir, undefined, { log: (line) => lines.push(line) });
  try {
    for (const table of [names.credits, names.budgetCounters]) {
      const described = await local.db.send(new DescribeTableCommand({ TableName: table }));
      expect(described.Table?.GlobalSecondaryIndexes?.map((i) => i.IndexName)).toEqual(["holdsDue"]);
    }
    const listed = (await local.db.send(new ListTablesCommand({}))).TableNames ?? [];
    expect(listed.filter((name) => name.endsWith(".upgrading"))).toEqual([]);
    expect(await scanAll(local.db, names.credits)).toEqual(items);
    const credits = new DynamoCredits(local.db, names, clock);
    const budgets = new DynamoBudgets(local.db, names, clock);
    expect(await credits.balance(old.project)).toMatchObject({ openHolds: 1 });
    // The sweeper finds the expired holds through holdsDue (a Query of the index; the table has no
    // other way to them) and settles what they noted.
    const later = T0 + 16 * MINUTE;
    expect(await credits.releaseExpired(later)).toMatchObject({ holdsReleased: 1 });
    expect((await budgets.releaseExpired(later)).holdsSettled).toBe(1);
    expect(await credits.balance(old.project)).toMatchObject({
      availableMicros: 10_000_000 - 300_000,
      openHolds: 0,
      heldMicros: 0,
    });
    expect(await budgets.spend(old.counter)).toEqual({ spentMicros: 300_000, heldMicros: 0 });
  } finally {
    await local.close();
  }
  return lines;
}

describe("a data dir made before an index was declared", () => {
  it("is migrated when opened: each table made anew with its index, every item kept, one line each", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-table-migration-"));
    dirs.push(dir);
    const old = await oldDataDir(dir);
    const items = await withStoreClient(dir, (db) => scanAll(db, names.credits));
    expect(items.length).toBeGreaterThan(OLD_ITEMS);

    const lines = await expectUpgraded(dir, old, items);
    expect(lines).toEqual([
      expect.stringMatching(
        new RegExp(
          `^store upgraded: table '${names.credits}' made anew with index 'holdsDue' and its \\d+ items`,
        ),
      ),
      expect.stringMatching(
        new RegExp(`^store upgraded: table '${names.budgetCounters}' made anew with index 'holdsDue'`),
      ),
    ]);
    // The next open has nothing to do.
    const again: string[] = [];
    await (await openLocalStore(dir, undefined, { log: (line) => again.push(line) })).close();
    expect(again).toEqual([]);
  });

  /** A request the migration of the credits table does not get to make: where a start stopped. */
  const stops: [
    string,
    (command: string, input: { TableName?: string; RequestItems?: object }) => boolean,
  ][] = [
    [
      "m1, halfway through the copy into the staging table",
      (command, input) =>
        command === "BatchWriteItemCommand" &&
        Object.keys(input.RequestItems ?? {}).includes(stagingTableName(names.credits)),
    ],
    [
      "m2, before the old table is deleted",
      (command, input) => command === "DeleteTableCommand" && input.TableName === names.credits,
    ],
    [
      "m3, after the old table was deleted, before it is made anew",
      (command, input) => command === "CreateTableCommand" && input.TableName === names.credits,
    ],
    [
      "m3, halfway through the copy back",
      (command, input) =>
        command === "BatchWriteItemCommand" && Object.keys(input.RequestItems ?? {}).includes(names.credits),
    ],
    [
      "m4, before the staging table is deleted",
      (command, input) =>
        command === "DeleteTableCommand" && input.TableName === stagingTableName(names.credits),
    ],
  ];

  for (const [where, stopsAt] of stops) {
    it(`stopped at ${where}: the next open finishes it and loses nothing`, async () => {
      const dir = mkdtempSync(join(tmpdir(), "dmt-table-migration-"));
      dirs.push(dir);
      const old = await oldDataDir(dir);
      const items = await withStoreClient(dir, (db) => scanAll(db, names.credits));
      await withStoreClient(dir, async (db) => {
        // The second such request stops the start, so a copy has written one batch and not the rest.
        let seen = 0;
        db.middlewareStack.add(
          (next, context) => async (args) => {
            const input = (args as { input: { TableName?: string; RequestItems?: object } }).input;
            const kind = where.includes("halfway") ? 2 : 1;
            if (stopsAt(context.commandName ?? "", input) && ++seen >= kind)
              throw new Error("the start stopped");
            return next(args);
          },
          { step: "initialize", name: "stop" },
        );
        const log = () => {};
        await expect(
          (async () => {
            await finishTableMigrations(db, names, log);
            await ensureTables(db, names, (table, def, lacking) =>
              migrateTable(db, table, def, lacking, log),
            );
          })(),
        ).rejects.toThrow("the start stopped");
      });
      const lines = await expectUpgraded(dir, old, items);
      // Before m2 the old table is whole and migrated again; from m2 on the staging copy is restored.
      expect(lines[0]).toMatch(
        where.startsWith("m1") || where.startsWith("m2")
          ? `store upgraded: table '${names.credits}'`
          : `store upgrade finished: table '${names.credits}' restored from '${stagingTableName(names.credits)}'`,
      );
      expect(lines[1]).toMatch(`store upgraded: table '${names.budgetCounters}'`);
    });
  }
});
