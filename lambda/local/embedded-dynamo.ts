import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { ListTablesCommand } from "@aws-sdk/client-dynamodb";
import dynalite from "dynalite";
import { createDynamoClient } from "../adapters/dynamodb/client";

/**
 * dynalite, persisted under `<dataDir>/dynamodb`, spoken to over the real DynamoDB wire protocol.
 * LevelDB allows one process per folder, so the process that opens it publishes its endpoint in
 * `<dataDir>/store.json`; other processes (the CLI, a second server) connect to that endpoint.
 */
export interface EmbeddedDynamo {
  endpoint: string;
  close(): Promise<void>;
}

const DISCOVERY = "store.json";

export async function startEmbeddedDynamo(dataDir: string): Promise<EmbeddedDynamo> {
  mkdirSync(dataDir, { recursive: true });
  const server = dynalite({
    path: join(dataDir, "dynamodb"),
    createTableMs: 0,
    deleteTableMs: 0,
    updateTableMs: 0,
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  // LevelDB opens lazily: a first request tells whether another process holds the folder's lock.
  const probe = createDynamoClient({ endpoint });
  try {
    await probe.send(new ListTablesCommand({}));
  } catch (err) {
    await close();
    throw new Error(
      `The local store in ${dataDir} is in use by another process (${(err as Error).message}).`,
    );
  } finally {
    probe.destroy();
  }
  writeFileSync(join(dataDir, DISCOVERY), JSON.stringify({ endpoint, pid: process.pid }));
  return {
    endpoint,
    async close() {
      rmSync(join(dataDir, DISCOVERY), { force: true });
      await close();
    },
  };
}

/** The endpoint of a live process that serves this data dir's store, if any. */
export function runningStoreEndpoint(dataDir: string): string | undefined {
  try {
    const { endpoint, pid } = JSON.parse(readFileSync(join(dataDir, DISCOVERY), "utf8")) as {
      endpoint: string;
      pid: number;
    };
    process.kill(pid, 0); // throws if that process is gone
    return endpoint;
  } catch {
    return undefined;
  }
}
