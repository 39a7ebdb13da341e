import {
  type AttributeValue,
  BatchWriteItemCommand,
  DeleteTableCommand,
  type DynamoDBClient,
  ListTablesCommand,
  ResourceNotFoundException,
  ScanCommand,
  type TableDescription,
} from "@aws-sdk/client-dynamodb";
import { createTable, describeTable, untilActive } from "./client";
import { TABLES, type TableDefinition, type TableName, type TableNames } from "./tables";

/**
 * A table of the local store made before an index was declared, brought to the declared shape
 * (docs/architecture.md, "Local store upgrades"). dynalite cannot add an index to a table, so the table
 * is made anew and its items copied, through a staging table `<name>.upgrading`:
 *
 *   m1 create the staging table in the declared shape and copy every item of the table into it
 *   m2 delete the table (only once m1 is complete: from here the staging table is the whole copy)
 *   m3 create the table in the declared shape and copy the staging table's items back
 *   m4 delete the staging table
 *
 * A start stopped anywhere leaves a state the next start tells apart and finishes
 * (finishTableMigrations): a staging table beside the old table (status ACTIVE, index missing) is an
 * m1 cut short, dropped and done again; beside no table, or a table being deleted, m1 was complete; beside
 * the table in its declared shape, m3 or m4 was cut short. Copies are puts of whole items, so doing one
 * again is harmless. Only for a store no other process writes meanwhile (the data dir's own dynalite,
 * at open).
 */

/** One line for each table migrated, for the start's log. */
export type MigrationLog = (line: string) => void;

export const stagingTableName = (tableName: string): string => `${tableName}.upgrading`;

/** Items per Scan page: a page is held in memory while it is written out. */
const PAGE = 500;
/** BatchWriteItem's limit. */
const BATCH = 25;

const indexNames = (table: TableDescription | undefined) =>
  new Set(table?.GlobalSecondaryIndexes?.map((index) => index.IndexName));

/** The declared indexes `table` lacks. */
export function lackingIndexes(table: TableDescription | undefined, def: TableDefinition): string[] {
  const present = indexNames(table);
  return (def.indexes ?? []).map((index) => index.name).filter((name) => !present.has(name));
}

/**
 * Finishes every migration a stopped start left half-done (a staging table is listed), before the
 * tables are checked: the table may be missing then, and must be made from the staging copy, not empty.
 */
export async function finishTableMigrations(
  db: DynamoDBClient,
  names: TableNames,
  log: MigrationLog,
): Promise<void> {
  const listed = new Set(await listTables(db));
  for (const [name, def] of Object.entries(TABLES) as [TableName, TableDefinition][]) {
    const tableName = names[name];
    const staging = stagingTableName(tableName);
    if (!listed.has(staging)) continue;
    const stagingTable = await describeTable(db, staging);
    const table = await describeTable(db, tableName);
    if (stagingTable?.TableStatus === "DELETING") {
      // m4 cut short (the table was whole before it began), or a stale m1 copy being dropped.
      await dropTable(db, staging);
      continue;
    }
    if (table && table.TableStatus !== "DELETING" && lackingIndexes(table, def).length > 0) {
      // m1 cut short: the old table is whole and the copy may not be; the check migrates it again.
      await dropTable(db, staging);
      continue;
    }
    if (table?.TableStatus === "DELETING") await dropTable(db, tableName);
    const copied = await restoreFromStaging(db, tableName, def, !table || table.TableStatus === "DELETING");
    log(
      `store upgrade finished: table '${tableName}' restored from '${staging}' in its declared shape ` +
        `(${copied} items), where the last start stopped`,
    );
  }
}

/**
 * Migrates `tableName`, whose indexes lack `lacking`, to `def`'s shape (m1–m4); answers the line to log.
 * Any staging table of an earlier attempt was dealt with by finishTableMigrations.
 */
export async function migrateTable(
  db: DynamoDBClient,
  tableName: string,
  def: TableDefinition,
  lacking: string[],
  log: MigrationLog,
): Promise<void> {
  const staging = stagingTableName(tableName);
  await createTable(db, staging, def);
  await untilActive(db, staging);
  const copied = await copyItems(db, tableName, staging); // m1
  await dropTable(db, tableName); // m2
  await restoreFromStaging(db, tableName, def, true); // m3, m4
  log(
    `store upgraded: table '${tableName}' made anew with index ${lacking.map((i) => `'${i}'`).join(", ")} ` +
      `and its ${copied} items copied over`,
  );
}

/** m3 and m4: the table in the declared shape (`create`: it is not there), the staging copy's items. */
async function restoreFromStaging(
  db: DynamoDBClient,
  tableName: string,
  def: TableDefinition,
  create: boolean,
): Promise<number> {
  const staging = stagingTableName(tableName);
  if (create) await createTable(db, tableName, def);
  await untilActive(db, tableName);
  const copied = await copyItems(db, staging, tableName);
  await dropTable(db, staging);
  return copied;
}

/** Every item of `from` put into `to`, page by page; answers how many. */
async function copyItems(db: DynamoDBClient, from: string, to: string): Promise<number> {
  let copied = 0;
  let start: Record<string, AttributeValue> | undefined;
  do {
    const page = await db.send(
      new ScanCommand({ TableName: from, ConsistentRead: true, Limit: PAGE, ExclusiveStartKey: start }),
    );
    const items = page.Items ?? [];
    for (let i = 0; i < items.length; i += BATCH) {
      let requests = items.slice(i, i + BATCH).map((Item) => ({ PutRequest: { Item } }));
      // DynamoDB may hand some back unprocessed (dynalite does not); they are sent again.
      while (requests.length > 0) {
        const out = await db.send(new BatchWriteItemCommand({ RequestItems: { [to]: requests } }));
        requests = (out.UnprocessedItems?.[to] ?? []).flatMap((r) =>
          r.PutRequest?.Item ? [{ PutRequest: { Item: r.PutRequest.Item } }] : [],
        );
      }
    }
    copied += items.length;
    start = page.LastEvaluatedKey;
  } while (start);
  return copied;
}

/** Deletes a table (again, if a stopped start left it DELETING) and waits until it is gone. */
async function dropTable(db: DynamoDBClient, tableName: string): Promise<void> {
  try {
    await db.send(new DeleteTableCommand({ TableName: tableName }));
  } catch (err) {
    if (!(err instanceof ResourceNotFoundException)) throw err;
  }
  // A table of the same name can only be made once this one is gone.
  while (await describeTable(db, tableName)) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function listTables(db: DynamoDBClient): Promise<string[]> {
  const names: string[] = [];
  let start: string | undefined;
  do {
    const page = await db.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
    names.push(...(page.TableNames ?? []));
    start = page.LastEvaluatedTableName;
  } while (start);
  return names;
}
