import { Agent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import {
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  ListTablesCommand,
  ResourceInUseException,
  ResourceNotFoundException,
  type TableDescription,
} from "@aws-sdk/client-dynamodb";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { TABLES, type TableDefinition, type TableName, type TableNames } from "./tables";

/** One client per process, keep-alive on, created at module scope by the wiring. */
export function createDynamoClient(options: { endpoint?: string; region?: string } = {}): DynamoDBClient {
  const local = options.endpoint !== undefined;
  return new DynamoDBClient({
    region: options.region ?? process.env.AWS_REGION ?? "local",
    ...(local
      ? { endpoint: options.endpoint, credentials: { accessKeyId: "local", secretAccessKey: "local" } }
      : {}),
    maxAttempts: 3,
    requestHandler: new NodeHttpHandler({
      httpAgent: new Agent({ keepAlive: true, maxSockets: 256 }),
      httpsAgent: new HttpsAgent({ keepAlive: true, maxSockets: 256 }),
      // Locally (dynalite on loopback) a refused connection fails at once; a slow one means a busy CPU,
      // not a lost network, so it is waited for. In AWS, a second without a connection is worth a retry.
      connectionTimeout: local ? 0 : 1000,
      requestTimeout: 3000,
    }),
  });
}

/**
 * Creates every table of TABLES that does not exist yet (the local stack; CDK does this in AWS) and
 * checks that the existing ones have every index their definition lists. dynalite cannot add an index
 * to an existing table (it accepts UpdateTable's GlobalSecondaryIndexUpdates and ignores it): with
 * `migrate` (the data dir's own dynalite, table-migration.ts) such a table is handed to it to be made
 * anew; without, it stops the start with what to do, rather than failing queries later.
 */
export async function ensureTables(
  db: DynamoDBClient,
  names: TableNames,
  migrate?: (tableName: string, def: TableDefinition, lacking: string[]) => Promise<void>,
): Promise<void> {
  const missing: string[] = [];
  const created: string[] = [];
  for (const [name, def] of Object.entries(TABLES) as [TableName, TableDefinition][]) {
    const existing = await describeTable(db, names[name]);
    if (!existing) {
      await createTable(db, names[name], def);
      created.push(names[name]);
      continue;
    }
    const present = new Set(existing.GlobalSecondaryIndexes?.map((index) => index.IndexName));
    const lacking = (def.indexes ?? []).map((index) => index.name).filter((index) => !present.has(index));
    if (lacking.length === 0) continue;
    if (migrate) await migrate(names[name], def, lacking);
    else missing.push(...lacking.map((index) => `table '${names[name]}' has no index '${index}'`));
  }
  for (const tableName of created) await untilActive(db, tableName);
  if (missing.length > 0) {
    throw new Error(
      `The store was made before some indexes were added: ${missing.join("; ")}. A store at ` +
        "DMT_DYNAMODB_ENDPOINT is not migrated: add the indexes there, or move its tables aside.",
    );
  }
}

export async function describeTable(
  db: DynamoDBClient,
  tableName: string,
): Promise<TableDescription | undefined> {
  try {
    return (await db.send(new DescribeTableCommand({ TableName: tableName }))).Table;
  } catch (err) {
    if (err instanceof ResourceNotFoundException) return undefined;
    throw err;
  }
}

/**
 * A new table refuses item requests until it is ACTIVE, in DynamoDB as in dynalite (which makes it so
 * just after answering CreateTable): the first request of a fresh data dir must not race it.
 */
export async function untilActive(db: DynamoDBClient, tableName: string): Promise<void> {
  for (;;) {
    const table = await describeTable(db, tableName);
    if (!table) throw new Error(`table '${tableName}' was deleted while it was being created`);
    if (table.TableStatus === "ACTIVE") return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

export async function createTable(
  db: DynamoDBClient,
  tableName: string,
  def: TableDefinition,
): Promise<void> {
  const attributes = new Map<string, "S" | "N">([[def.partitionKey, "S"]]);
  const sortKey = def.sortKey;
  if (sortKey) attributes.set(sortKey.name, sortKey.type);
  const indexes = def.indexes ?? [];
  for (const index of indexes) {
    attributes.set(index.partitionKey, "S");
    attributes.set(index.sortKey.name, index.sortKey.type);
  }
  try {
    await db.send(
      new CreateTableCommand({
        TableName: tableName,
        BillingMode: "PAY_PER_REQUEST",
        AttributeDefinitions: [...attributes].map(([AttributeName, AttributeType]) => ({
          AttributeName,
          AttributeType,
        })),
        KeySchema: [
          { AttributeName: def.partitionKey, KeyType: "HASH" },
          ...(sortKey ? [{ AttributeName: sortKey.name, KeyType: "RANGE" as const }] : []),
        ],
        ...(indexes.length > 0
          ? {
              GlobalSecondaryIndexes: indexes.map((index) => ({
                IndexName: index.name,
                KeySchema: [
                  { AttributeName: index.partitionKey, KeyType: "HASH" as const },
                  { AttributeName: index.sortKey.name, KeyType: "RANGE" as const },
                ],
                Projection: {
                  ProjectionType: index.projection === "keys" ? ("KEYS_ONLY" as const) : ("ALL" as const),
                },
              })),
            }
          : {}),
      }),
    );
  } catch (err) {
    // Another process created it between our DescribeTable and here, from the same definitions.
    if (!(err instanceof ResourceInUseException)) throw err;
  }
}

/**
 * One request that any store answers: whether it is there and ours to use. Returns its tables when
 * they fit one page of ListTables (100), else undefined.
 */
export async function probeStore(db: DynamoDBClient): Promise<string[] | undefined> {
  const listed = await db.send(new ListTablesCommand({}));
  return listed.LastEvaluatedTableName === undefined ? (listed.TableNames ?? []) : undefined;
}

/** The client type, for the modules that pass a store client along without calling it. */
export type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
