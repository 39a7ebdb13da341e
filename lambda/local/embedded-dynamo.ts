import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";

/**
 * dynalite, persisted under `<dataDir>/dynamodb`, spoken to over the real DynamoDB wire protocol.
 * LevelDB allows one process per folder, so the process that opens it publishes its endpoint in
 * `<dataDir>/store.json`; other processes (the CLI, a second server) connect to that endpoint.
 */
export interface EmbeddedDynamo {
  endpoint: string;
  /** The tables the store had when it opened (its first ListTables page), or undefined past one page. */
  tablesAtOpen: string[] | undefined;
  /**
   * A message port to the store, for a thread of this process (dynalite-client.ts), when the store runs
   * in a worker: its requests skip the loopback socket. Each call makes a new one.
   */
  connect?: () => MessagePort;
  close(): Promise<void>;
}

const DISCOVERY = "store.json";

/**
 * `worker: false` runs dynalite on the calling thread instead of a worker's: for a short command (the
 * CLI's), which has no event loop to keep free, and to which a worker's start (a Node environment of its
 * own) added a tenth of its CPU.
 */
export async function startEmbeddedDynamo(
  dataDir: string,
  options: { worker?: boolean } = {},
): Promise<EmbeddedDynamo> {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, "dynamodb");
  // The AWS SDK loads while a worker starts: they overlap.
  const [server, { createDynamoClient, probeStore }] = await Promise.all([
    options.worker === false ? onThisThread(path) : inWorker(path),
    import("../adapters/dynamodb/client"),
  ]);
  const endpoint = `http://127.0.0.1:${server.port}`;
  let closing: Promise<void> | undefined;
  // Idempotent: dynalite closes LevelDB on server close; wait for it, so no write is lost.
  const close = () => (closing ??= server.close());
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
    ...(server.connect ? { connect: server.connect } : {}),
    async close() {
      rmSync(join(dataDir, DISCOVERY), { force: true });
      await close();
    },
  };
}

interface DynaliteServer {
  port: number;
  connect?: () => MessagePort;
  close(): Promise<void>;
}

/** A worker thread: dynalite's CPU work must not stall the server's event loop. */
async function inWorker(path: string): Promise<DynaliteServer> {
  const worker = new Worker(new URL("./dynamo-worker.mjs", import.meta.url), { workerData: { path } });
  const port = await new Promise<number>((resolve, reject) => {
    worker.once("error", reject);
    worker.once("message", (message: { type: string; port?: number; message?: string }) => {
      if (message.type === "listening" && message.port !== undefined) resolve(message.port);
      else reject(new Error(`dynalite did not start: ${message.message ?? message.type}`));
    });
  });
  return {
    port,
    connect() {
      const { port1, port2 } = new MessageChannel();
      worker.postMessage({ type: "connect", port: port2 }, [port2]);
      return port1;
    },
    close: () =>
      new Promise<void>((resolve) => {
        worker.once("message", () => resolve());
        worker.once("exit", () => resolve());
        worker.postMessage("close");
      }).then(() => worker.terminate().then(() => undefined)),
  };
}

async function onThisThread(path: string): Promise<DynaliteServer> {
  const { startDynalite } = await import("./dynalite-server.mjs");
  let server: ReturnType<typeof startDynalite> | undefined;
  const port = await new Promise<number>((resolve, reject) => {
    server = startDynalite(path, resolve, (err) =>
      reject(new Error(`dynalite did not start: ${err.message}`)),
    );
  });
  return { port, close: () => new Promise<void>((resolve) => server?.close(() => resolve())) };
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
