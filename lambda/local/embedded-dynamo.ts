import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "node:worker_threads";

/**
 * dynalite, persisted under `<dataDir>/dynamodb`, spoken to over the real DynamoDB wire protocol.
 * LevelDB allows one process per folder, so the process that opens it publishes its endpoint in
 * `<dataDir>/store.json`; other processes (the CLI, a second server) connect to that endpoint.
 */
export interface EmbeddedDynamo {
  endpoint: string;
  /** The tables the store had when it opened (its first ListTables page), or undefined past one page. */
  tablesAtOpen: string[] | undefined;
  close(): Promise<void>;
}

const DISCOVERY = "store.json";

export async function startEmbeddedDynamo(dataDir: string): Promise<EmbeddedDynamo> {
  mkdirSync(dataDir, { recursive: true });
  // A worker thread: dynalite's CPU work must not stall the server's event loop.
  const worker = new Worker(new URL("./dynamo-worker.mjs", import.meta.url), {
    workerData: { path: join(dataDir, "dynamodb") },
  });
  const listening = new Promise<number>((resolve, reject) => {
    worker.once("error", reject);
    worker.once("message", (message: { type: string; port?: number; message?: string }) => {
      if (message.type === "listening" && message.port !== undefined) resolve(message.port);
      else reject(new Error(`dynalite did not start: ${message.message ?? message.type}`));
    });
  });
  // The AWS SDK loads while the worker starts (a CLI command's start: they overlap).
  const [port, { createDynamoClient, probeStore }] = await Promise.all([
    listening,
    import("../adapters/dynamodb/client"),
  ]);
  const endpoint = `http://127.0.0.1:${port}`;
  let closing: Promise<void> | undefined;
  // Idempotent: dynalite closes LevelDB on server close; wait for it, so no write is lost.
  const close = () =>
    (closing ??= new Promise<void>((resolve) => {
      worker.once("message", () => resolve());
      worker.once("exit", () => resolve());
      worker.postMessage("close");
    }).then(() => worker.terminate().then(() => undefined)));
  // LevelDB opens lazily: a first request tells whether another process holds the folder's lock.
  const probe = createDynamoClient({ endpoint });
  let tablesAtOpen: string[] | undefined;
  try {
    tablesAtOpen = await probeStore(probe);
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
    tablesAtOpen,
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
