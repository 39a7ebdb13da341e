import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { createDynamoClient, ensureTables } from "../adapters/dynamodb/client";
import { DynamoStore } from "../adapters/dynamodb/store";
import { type TableNames, tableNames } from "../adapters/dynamodb/tables";
import type { Store } from "../core/ports";
import { type EmbeddedDynamo, runningStoreEndpoint, startEmbeddedDynamo } from "./embedded-dynamo";

// Apart from stack.ts so that the CLI opens a store without loading the whole server.

/** The store of a data dir: the embedded dynalite, or the endpoint of the process that already serves it. */
export interface LocalStore {
  store: Store;
  db: DynamoDBClient;
  tables: TableNames;
  endpoint: string;
  close(): Promise<void>;
}

export async function openLocalStore(dataDir: string, endpoint?: string): Promise<LocalStore> {
  const shared = endpoint ?? runningStoreEndpoint(dataDir);
  const embedded: EmbeddedDynamo | undefined = shared ? undefined : await startEmbeddedDynamo(dataDir);
  const url = shared ?? (embedded as EmbeddedDynamo).endpoint;
  const db = createDynamoClient({ endpoint: url });
  const names = tableNames(process.env);
  try {
    await ensureTables(db, names);
  } catch (err) {
    // The embedded store runs in a worker thread: left open, it would keep the process alive.
    db.destroy();
    await embedded?.close();
    throw err;
  }
  return {
    store: new DynamoStore(db, names),
    db,
    tables: names,
    endpoint: url,
    async close() {
      db.destroy();
      await embedded?.close();
    },
  };
}
