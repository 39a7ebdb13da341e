import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { MessagePort } from "node:worker_threads";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { TABLES, type TableNames, tableNames } from "../adapters/dynamodb/tables";
import type { Store } from "../core/ports";
import { runningStoreEndpoint, startEmbeddedDynamo } from "./embedded-dynamo";

// Apart from host.ts so that the CLI opens a store without loading the whole server. The AWS SDK is
// imported once the embedded store's worker is starting, so that the two overlap.

/** The store of a data dir: the embedded dynalite, or the endpoint of the process that already serves it. */
export interface LocalStore {
  store: Store;
  db: DynamoDBClient;
  tables: TableNames;
  endpoint: string;
  /** Whether the store is the data dir's own dynalite, not DMT_DYNAMODB_ENDPOINT's (which gets the SDK's client). */
  dynalite: boolean;
  /**
   * A message port to the store, for another thread of this process (the warehouse worker), when this
   * process runs the store in a worker (EmbeddedDynamo.connect) and speaks to it with the lean client.
   */
  connect?: () => MessagePort;
  close(): Promise<void>;
}

/**
 * Beside LevelDB's files in the embedded store's folder (LevelDB ignores names it does not know): the
 * table definitions ensureTables last found complete there. A store that has every table and was
 * checked against these same definitions is not checked again (20 DescribeTable requests, most of a
 * short CLI command's work): one ListTables tells that every table is there (the embedded store's
 * first request, which it makes anyway). Moving the folder aside moves this file with it. A store at
 * DMT_DYNAMODB_ENDPOINT is always checked.
 */
const CHECKED_TABLES = "dmt-tables.json";

function checkedTablesFile(dataDir: string): string {
  return join(dataDir, "dynamodb", CHECKED_TABLES);
}

/**
 * `worker: false`: an embedded store opened here runs on this thread (startEmbeddedDynamo).
 * `sdkClient`: the AWS SDK's client even for the data dir's own dynalite (EmbeddedHostOptions.sdkStoreClient).
 * `log`: where a table upgrade of the data dir's store says what it did (one line each; stderr if not given).
 */
export async function openLocalStore(
  dataDir: string,
  endpoint?: string,
  options: { worker?: boolean; sdkClient?: boolean; log?: (line: string) => void } = {},
): Promise<LocalStore> {
  const shared = endpoint ?? runningStoreEndpoint(dataDir);
  const [embedded, { ensureTables, probeStore }, { DynamoStore }, { storeClient }] = await Promise.all([
    shared ? undefined : startEmbeddedDynamo(dataDir, options),
    import("../adapters/dynamodb/client"),
    import("../adapters/dynamodb/store"),
    import("./dynalite-client"),
  ]);
  const url = shared ?? (embedded?.endpoint as string);
  // The data dir's own store (opened here, or served by the process that opened it), not an endpoint
  // named by DMT_DYNAMODB_ENDPOINT: dynalite, and its tables were checked on these definitions if the
  // file says so.
  const ownStore = endpoint === undefined;
  const lean = ownStore && !options.sdkClient;
  const connect = lean ? embedded?.connect : undefined;
  const db = storeClient(url, lean, connect?.());
  const names = tableNames(process.env);
  const definitions = JSON.stringify({ names, tables: TABLES });
  try {
    const checked =
      ownStore &&
      checkedOn(dataDir, definitions) &&
      hasEvery(embedded ? embedded.tablesAtOpen : await probeStore(db), names);
    if (!checked && ownStore) {
      // The data dir's own dynalite: tables made before an index was declared are migrated, and a
      // migration a stopped start left half-done is finished first (table-migration.ts).
      const { finishTableMigrations, migrateTable } = await import("../adapters/dynamodb/table-migration");
      const log = options.log ?? ((line: string) => process.stderr.write(`dmt: ${line}\n`));
      await finishTableMigrations(db, names, log);
      await ensureTables(db, names, (table, def, lacking) => migrateTable(db, table, def, lacking, log));
      recordCheckedTables(dataDir, definitions);
    } else if (!checked) {
      await ensureTables(db, names);
    }
  } catch (err) {
    // The embedded store (in a worker thread, or on this one) left open would keep the process alive.
    db.destroy();
    await embedded?.close();
    throw err;
  }
  return {
    store: new DynamoStore(db, names),
    db,
    tables: names,
    endpoint: url,
    dynalite: ownStore,
    ...(connect ? { connect } : {}),
    async close() {
      db.destroy();
      await embedded?.close();
    },
  };
}

/** Best effort: without the file, the next open checks again. */
function recordCheckedTables(dataDir: string, definitions: string): void {
  try {
    writeFileSync(checkedTablesFile(dataDir), definitions);
  } catch {
    // The folder is the store's own (LevelDB's); it may not be there when another process serves it.
  }
}

/** Whether ensureTables last passed on this store with these same definitions. */
function checkedOn(dataDir: string, definitions: string): boolean {
  try {
    return readFileSync(checkedTablesFile(dataDir), "utf8") === definitions;
  } catch {
    return false;
  }
}

function hasEvery(present: string[] | undefined, names: TableNames): boolean {
  return present !== undefined && Object.values(names).every((name) => present.includes(name));
}
