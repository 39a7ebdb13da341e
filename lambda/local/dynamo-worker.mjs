// dynalite in a worker thread: the store's CPU work (about a millisecond per operation) runs beside the
// server's event loop instead of inside it. Threads of the same process reach it over message ports
// (`connect`), other processes over its loopback port.
import { parentPort, workerData } from "node:worker_threads";
import { serveOnPort, startDynalite } from "./dynalite-server.mjs";

const server = startDynalite(
  workerData.path,
  (port) => parentPort.postMessage({ type: "listening", port }),
  (err) => parentPort.postMessage({ type: "error", message: err.message }),
);
parentPort.on("message", (message) => {
  if (message === "close") server.close(() => parentPort.postMessage({ type: "closed" }));
  else if (message.type === "connect") serveOnPort(server, message.port);
});
