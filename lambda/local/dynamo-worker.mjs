// dynalite in a worker thread: the store's CPU work (about a millisecond per operation) runs beside the
// server's event loop instead of inside it. Plain JavaScript, so the worker needs no TypeScript loader.
import { parentPort, workerData } from "node:worker_threads";
import dynalite from "dynalite";
import { closeDynaliteIterators } from "./dynalite-iterators.mjs";

// Without it every query, scan and table listing left a LevelDB iterator open (see the module).
closeDynaliteIterators();

const server = dynalite({ path: workerData.path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
server.once("error", (err) => parentPort.postMessage({ type: "error", message: err.message }));
server.listen(0, "127.0.0.1", () =>
  parentPort.postMessage({ type: "listening", port: server.address().port }),
);
parentPort.on("message", (message) => {
  if (message === "close") server.close(() => parentPort.postMessage({ type: "closed" }));
});
