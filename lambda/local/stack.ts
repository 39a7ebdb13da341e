import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { createDynamoClient, ensureTables } from "../adapters/dynamodb/client";
import { DynamoStore } from "../adapters/dynamodb/store";
import { tableNames } from "../adapters/dynamodb/tables";
import { createDataApp } from "../app/data-api";
import type { AppEnv } from "../app/env";
import { errorResponse } from "../app/errors";
import { requireKey } from "../app/middleware";
import { appShell } from "../app/shell";
import { errors } from "../core/errors";
import { CachedKeyLookup } from "../core/key-cache";
import { KeyUsageTracker } from "../core/key-usage";
import type { Logger } from "../core/logger";
import type { Store } from "../core/ports";
import type { LocalConfig } from "./config";
import { type EmbeddedDynamo, runningStoreEndpoint, startEmbeddedDynamo } from "./embedded-dynamo";
import { createHttpServer } from "./http-server";

/** The store of a data dir: the embedded dynalite, or the endpoint of the process that already serves it. */
export interface LocalStore {
  store: Store;
  db: DynamoDBClient;
  close(): Promise<void>;
}

export async function openLocalStore(dataDir: string, endpoint?: string): Promise<LocalStore> {
  const shared = endpoint ?? runningStoreEndpoint(dataDir);
  const embedded: EmbeddedDynamo | undefined = shared ? undefined : await startEmbeddedDynamo(dataDir);
  const url = shared ?? (embedded as EmbeddedDynamo).endpoint;
  const db = createDynamoClient({ endpoint: url });
  const names = tableNames(process.env);
  await ensureTables(db, names);
  return {
    store: new DynamoStore(db, names),
    db,
    async close() {
      db.destroy();
      await embedded?.close();
    },
  };
}

export interface LocalStack {
  url: string;
  port: number;
  store: Store;
  close(): Promise<void>;
}

/** The whole service in one process: the same apps the Lambda handlers wrap, over embedded parts. */
export async function startLocalStack(config: LocalConfig, logger: Logger): Promise<LocalStack> {
  const local = await openLocalStore(config.dataDir, config.DMT_DYNAMODB_ENDPOINT);
  const keys = new CachedKeyLookup(local.store, config.DMT_KEY_CACHE_MS);
  const usage = new KeyUsageTracker(local.store, logger);
  const auth = requireKey({ keys, clock: Date.now, onAuthenticated: (a) => usage.touch(a.keyId) });

  const dataApp = createDataApp({ auth, logger });
  const fallback = appShell(logger);
  fallback.all("*", (c) => errorResponse(errors.notFound(), c, logger));

  // Path prefix -> app, as API Gateway routes to one Lambda per concern in AWS.
  const fetch = (request: Request, env: AppEnv["Bindings"]) => {
    const path = new URL(request.url).pathname;
    const app = path === "/api" || path.startsWith("/api/") ? dataApp : fallback;
    return app.fetch(request, env);
  };

  const server = createHttpServer({
    fetch,
    ...(config.DMT_TLS_CERT && config.DMT_TLS_KEY
      ? { tls: { cert: config.DMT_TLS_CERT, key: config.DMT_TLS_KEY } }
      : {}),
  });
  let port: number;
  try {
    port = await server.listen(config.PORT, config.HOST);
  } catch (err) {
    await local.close();
    throw err;
  }
  const scheme = config.DMT_TLS_CERT ? "https" : "http";
  const host = config.HOST.includes(":") ? `[${config.HOST}]` : config.HOST;
  return {
    url: `${scheme}://${host}:${port}`,
    port,
    store: local.store,
    async close() {
      await server.close(10_000);
      await usage.flush();
      await local.close();
    },
  };
}
