// dynalite over the LevelDB files of a folder, on a loopback port: what the store's worker thread runs
// (dynamo-worker.mjs), and what a short command runs on its own thread (embedded-dynamo.ts). Plain
// JavaScript, so the worker needs no TypeScript loader.
import dynalite from "dynalite";
import {
  batchDynaliteWrites,
  cacheDynaliteParses,
  cacheDynaliteTables,
  readDynaliteInline,
} from "./dynalite-caches.mjs";
import { closeDynaliteIterators } from "./dynalite-iterators.mjs";

/** Calls `listening` with the port once the server listens, `failed` with the server's first error. */
export function startDynalite(path, listening, failed) {
  // Without it every query, scan and table listing left a LevelDB iterator open (see the module).
  closeDynaliteIterators();
  cacheDynaliteParses();
  cacheDynaliteTables();
  readDynaliteInline();
  batchDynaliteWrites();
  const server = dynalite({ path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  // Longer than any client keeps an idle connection (dynalite-client.ts: 10 s; the SDK's agent keeps
  // them until the server closes), so the client closes first and never writes on a closing one.
  server.keepAliveTimeout = 65_000;
  server.once("error", failed);
  server.listen(0, "127.0.0.1", () => listening(server.address().port));
  return server;
}
