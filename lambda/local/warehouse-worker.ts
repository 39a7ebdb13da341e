// The warehouse's writing side, in a worker thread (lambda/local/warehouse-thread.ts starts it): the
// in-process queue with its journal, the consumer Lambda runs (Parquet files, the delivery ledger, dead
// letters), and the dashboard's index and rollups, written through a store client of its own.
import { parentPort, workerData } from "node:worker_threads";
import { DynamoPorts } from "../adapters/dynamodb/ports";
import { storeCopies } from "../compose/consumer";
import { loggerOver } from "../core/logger";
import { storeClient } from "./dynalite-client";
import { startWarehouseQueue } from "./warehouse";
import type { WarehouseWorkerData, WorkerReport, WorkerRequest } from "./warehouse-thread";

const port = parentPort;
if (!port) throw new Error("the warehouse worker runs in a worker thread");
const data = workerData as WarehouseWorkerData;
const report = (message: WorkerReport) => port.postMessage(message);

// Log lines go to the server's logger, which filters and writes them.
const logger = loggerOver((level, message, fields) =>
  report({ type: "log", level, message, ...(fields ? { fields } : {}) }),
);

const db = storeClient(data.endpoint, data.dynalite, data.storePort);
// The consumer's copies in the store, as in AWS: tombstones, the dashboard's index and rollups.
const store = new DynamoPorts(db, data.tables, () => {
  throw new Error("the warehouse worker unwraps no vendor keys");
});
const queue = await startWarehouseQueue({
  dataDir: data.dataDir,
  logger,
  flushIntervalMs: data.flushIntervalMs,
  ...storeCopies({ store }),
});

/** Records on their way into the journal: a delivery, and the close, wait for them. */
const arriving = new Set<Promise<void>>();
const arrived = () => Promise.all(arriving);

// A request that fails is an unhandled rejection: the worker ends, the server logs it and starts another.
port.on("message", (request: WorkerRequest) => {
  const done = () => report({ type: "done", id: request.id });
  if (request.type === "send") {
    const sent = Promise.all(request.bodies.map((body) => queue.enqueue(body))).then(done);
    arriving.add(sent);
    void sent.finally(() => arriving.delete(sent));
  } else if (request.type === "deliver") {
    void arrived()
      .then(() => queue.deliver())
      .then(done);
  } else {
    void arrived()
      .then(() => queue.close())
      .then(() => {
        db.destroy();
        done();
      });
  }
});
report({ type: "ready" });
