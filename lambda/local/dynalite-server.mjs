// dynalite over the LevelDB files of a folder, on a loopback port: what the store's worker thread runs
// (dynamo-worker.mjs), and what a short command runs on its own thread (embedded-dynamo.ts). Plain
// JavaScript, so the worker needs no TypeScript loader.
import dynalite from "dynalite";
import { closeDynaliteIterators } from "./dynalite-iterators.mjs";

/** Calls `listening` with the port once the server listens, `failed` with the server's first error. */
export function startDynalite(path, listening, failed) {
  // Without it every query, scan and table listing left a LevelDB iterator open (see the module).
  closeDynaliteIterators();
  const server = dynalite({ path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  server.once("error", failed);
  server.listen(0, "127.0.0.1", () => listening(server.address().port));
  return server;
}
