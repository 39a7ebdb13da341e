// dynalite over the LevelDB files of a folder, on a loopback port: what the store's worker thread runs
// (dynamo-worker.mjs), and what a short command runs on its own thread (embedded-dynamo.ts). Plain
// JavaScript, so the worker needs no TypeScript loader.
import { EventEmitter } from "node:events";
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

/** What dynalite's handler checks of a request's signature: its shape, and a date (dynalite-client.ts). */
const LOOKS_SIGNED = {
  "x-amz-date": "20200101T000000Z",
  authorization:
    "AWS4-HMAC-SHA256 Credential=local/20200101/local/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
};

/**
 * Answers the requests posted on `port` (`{ id, target, body }`, DynamoDB's JSON protocol) with
 * `{ id, status, text }`, through the very handler `server` runs for an HTTP request, without the
 * socket: a thread of the same process (the server's, the warehouse worker's) reaches the store
 * without a loopback round trip, whose socket writes were the largest single cost of a store request
 * on both sides (docs/architecture.md). The port is closed with the server.
 */
export function serveOnPort(server, port) {
  const [handle] = server.listeners("request");
  const closeWithServer = () => port.close();
  server.once("close", closeWithServer);
  port.once("close", () => server.off("close", closeWithServer));
  port.on("message", ({ id, target, body }) => {
    const req = new EventEmitter();
    req.method = "POST";
    req.url = "/";
    req.headers = { "content-type": "application/x-amz-json-1.0", "x-amz-target": target, ...LOOKS_SIGNED };
    const res = {
      statusCode: 200,
      setHeader() {},
      end(text = "") {
        port.postMessage({ id, status: res.statusCode, text });
      },
    };
    handle(req, res);
    req.emit("data", body);
    req.emit("end");
  });
}
