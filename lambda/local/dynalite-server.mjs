// dynalite over the LevelDB files of a folder, on a loopback port: what the store's worker thread runs
// (dynamo-worker.mjs), and what a short command runs on its own thread (embedded-dynamo.ts). Plain
// JavaScript, so the worker needs no TypeScript loader.
import { createRequire } from "node:module";
import dynalite from "dynalite";
import {
  batchDynaliteWrites,
  bufferDynaliteWrites,
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
  bufferDynaliteWrites();
  const server = withStore(() => dynalite({ path, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }));
  // Longer than any client keeps an idle connection (dynalite-client.ts: 10 s; the SDK's agent keeps
  // them until the server closes), so the client closes first and never writes on a closing one.
  server.keepAliveTimeout = 65_000;
  server.once("error", failed);
  server.listen(0, "127.0.0.1", () => listening(server.address().port));
  return server;
}

const fromDynalite = createRequire(createRequire(import.meta.url).resolve("dynalite"));
const validations = fromDynalite("./validations");

/** The store (dynalite's `db.create`) behind each server started here. */
const stores = new WeakMap();

/** Starts a server and keeps the store dynalite makes for it, which its handler holds in a closure. */
function withStore(start) {
  const db = fromDynalite("./db");
  const { create } = db;
  let store;
  db.create = (options) => {
    store = create(options);
    return store;
  };
  try {
    const server = start();
    stores.set(server, store);
    return server;
  } finally {
    db.create = create;
  }
}

/** dynalite's operations, as its handler dispatches them (its own list, dynalite/index.js). */
const OPERATIONS = new Map(
  [
    "BatchGetItem",
    "BatchWriteItem",
    "CreateTable",
    "DeleteItem",
    "DeleteTable",
    "DescribeTable",
    "DescribeTimeToLive",
    "GetItem",
    "ListTables",
    "PutItem",
    "Query",
    "Scan",
    "TagResource",
    "UntagResource",
    "ListTagsOfResource",
    "UpdateItem",
    "UpdateTable",
  ].map((operation) => {
    const name = validations.toLowerFirst(operation);
    return [
      operation,
      { action: fromDynalite(`./actions/${name}`), validation: fromDynalite(`./validations/${name}`) },
    ];
  }),
);
const API_VERSIONS = new Set(["DynamoDB_20111205", "DynamoDB_20120810"]);
const MAX_REQUEST_BYTES = 16 * 1024 * 1024;

/**
 * What dynalite's HTTP handler does with a signed POST (dynalite/index.js, `httpHandler`), without
 * what only HTTP needs: a request id from `randomBytes`, a CRC of the answer, the headers, the
 * signature's shape. The same checks in the same order, the same answers and errors.
 */
function answer(store, target, body, reply) {
  if (Buffer.byteLength(body) > MAX_REQUEST_BYTES) return reply(413, "");
  const refuse = (type) => reply(400, JSON.stringify({ __type: `com.amazon.coral.service#${type}` }));
  let data;
  if (body) {
    try {
      data = JSON.parse(body);
    } catch {
      return refuse("SerializationException");
    }
  }
  const [api, operation, ...rest] = target.split(".");
  const known = rest.length === 0 && API_VERSIONS.has(api) ? OPERATIONS.get(operation) : undefined;
  if (known === undefined) return refuse("UnknownOperationException");
  if (!body) return refuse("SerializationException");
  const { action, validation } = known;
  try {
    data = validations.checkTypes(data, validation.types);
    validations.checkValidations(data, validation.types, validation.custom, store);
  } catch (err) {
    if (err.statusCode) return reply(err.statusCode, JSON.stringify(err.body));
    throw err;
  }
  action(store, data, (err, result) => {
    if (err?.statusCode) return reply(err.statusCode, JSON.stringify(err.body));
    if (err) throw err;
    reply(200, JSON.stringify(result));
  });
}

/**
 * Answers the requests posted on `port` (`{ id, target, body }`, DynamoDB's JSON protocol) with
 * `{ id, status, text }`, as `server` answers them over HTTP, without the socket: a thread of the
 * same process (the server's, the warehouse worker's) reaches the store without a loopback round trip,
 * whose socket writes were the largest single cost of a store request on both sides, nor the HTTP
 * handler's own work (bench/journal.md). The port is closed with the server.
 */
export function serveOnPort(server, port) {
  const store = stores.get(server);
  const closeWithServer = () => port.close();
  server.once("close", closeWithServer);
  port.once("close", () => server.off("close", closeWithServer));
  port.on("message", ({ id, target, body }) => {
    answer(store, target, body, (status, text) => port.postMessage({ id, status, text }));
  });
}
