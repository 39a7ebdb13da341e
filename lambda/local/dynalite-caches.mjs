// Work dynalite repeated on every request (a profile of the store's worker under proxied calls with
// X-Request-ID: 44% of its busy time parsing expressions, 24% reading the table's definition, and its
// LevelDB reads waiting for a lock; bench/journal.md):
// - an expression's parse is kept per expression, names (or only which names, when they can be stood
//   in for) and value *types*, and reused with the request's own names and values;
// - a table's definition is kept, as JSON and parsed, until the table is written again;
// - a LevelDB read runs on the store's own thread;
// - the LevelDB writes of one turn of the store's event loop go to LevelDB as one batch;
// - LevelDB holds more writes in memory before it writes them to a table file.
// Plain JavaScript: the store's worker (dynamo-worker.mjs) loads it without a TypeScript loader.
import { createRequire } from "node:module";

const fromDynalite = () => createRequire(createRequire(import.meta.url).resolve("dynalite"));

/**
 * classic-level (dynalite's LevelDB) reads on libuv's pool, after taking a snapshot on the calling
 * thread, which waits for LevelDB's lock whenever a write or a compaction holds it (12% of the store
 * thread's time under X-Request-ID calls at c=50). The store has a thread of its own (or is a short
 * command's), so the read runs there instead: the same read of the latest data, without the snapshot
 * and the two thread hops. Idempotent.
 */
export function readDynaliteInline() {
  const { ClassicLevel } = classicLevel();
  if (ClassicLevel.prototype._get.inline) return;
  const inline = async function (key, options) {
    return this._getSync(key, options);
  };
  inline.inline = true;
  ClassicLevel.prototype._get = inline;
}

/**
 * Each LevelDB write is a task of its own on libuv's pool: queueing it was the largest single item of
 * the store thread's time under proxied calls (classic-level's `_put`, 7%), and V8's four helper
 * threads woke about twice per proxied call each (context switches, from /proc). One item written by dynalite is several writes (the item and an
 * entry per index), and a BatchWriteItem dozens. So the puts and deletes made in one turn of the event
 * loop go to LevelDB as one batch, in the order they were made. Each resolves once the batch is
 * written: an answer is still sent only after its writes are in LevelDB, and a read made after it sees
 * them. A write that asks for `sync` goes on its own, as before. Idempotent.
 */
export function batchDynaliteWrites() {
  const { ClassicLevel } = classicLevel();
  if (ClassicLevel.prototype._put.batched) return;
  const { _put: put, _del: del } = ClassicLevel.prototype;
  /** The batch each database is gathering in this turn. */
  const gathering = new WeakMap();
  const enqueue = (db, operation) =>
    new Promise((resolve, reject) => {
      let batch = gathering.get(db);
      if (batch === undefined) {
        const gathered = { operations: [], waiting: [] };
        gathering.set(db, gathered);
        setImmediate(() => {
          gathering.delete(db);
          db._batch(gathered.operations, {}).then(
            () => {
              for (const w of gathered.waiting) w.resolve();
            },
            (err) => {
              for (const w of gathered.waiting) w.reject(err);
            },
          );
        });
        batch = gathered;
      }
      batch.operations.push(operation);
      batch.waiting.push({ resolve, reject });
    });
  const batchedPut = async function (key, value, options) {
    if (options?.sync) return put.call(this, key, value, options);
    return enqueue(this, { type: "put", key, value });
  };
  const batchedDel = async function (key, options) {
    if (options?.sync) return del.call(this, key, options);
    return enqueue(this, { type: "del", key });
  };
  batchedPut.batched = true;
  ClassicLevel.prototype._put = batchedPut;
  ClassicLevel.prototype._del = batchedDel;
}

/** LevelDB's write buffer in the store: what it holds in memory before it writes a table file. */
export const STORE_WRITE_BUFFER_BYTES = 32 << 20;

/**
 * LevelDB's default write buffer is 4 MB: under calls with a fresh X-Request-ID (a claim of ~0.4 KB
 * and a completion of ~1.4 KB, at random keys) it wrote a table file every few seconds and merged
 * each into those before, and its compaction thread's CPU per call grew with the store, to ~0.14 ms
 * after 20 s at c=50. With 32 MB (RocksDB's default is 64) it is ~0.04. The price: up to twice as much
 * memory, and a store stopped with a full buffer replays its log when next opened (~0.2 s for 20 MB).
 * Idempotent.
 */
export function bufferDynaliteWrites() {
  const { ClassicLevel } = classicLevel();
  if (ClassicLevel.prototype._open.buffered) return;
  const { _open: open } = ClassicLevel.prototype;
  const buffered = async function (options) {
    return open.call(this, { writeBufferSize: STORE_WRITE_BUFFER_BYTES, ...options });
  };
  buffered.buffered = true;
  ClassicLevel.prototype._open = buffered;
}

/** The classic-level module dynalite's LevelDB is. */
function classicLevel() {
  const fromLevel = createRequire(fromDynalite().resolve("level"));
  return createRequire(fromLevel.resolve("classic-level"))("classic-level");
}

/**
 * Most parses kept; the least recently used goes first, so that expressions kept per names (those
 * `standIns` cannot stand in for) do not push out the ones every call repeats.
 */
const MAX_PARSES = 2000;

/**
 * dynalite's expression parsers check names and the *types* of values only, except BETWEEN (which
 * compares its bounds) and attribute_type (which reads its argument): those are always parsed afresh.
 * The parse also marks which names and values the expression used, for dynalite's "unused" check; a
 * hit marks the same ones. Idempotent.
 */
export function cacheDynaliteParses() {
  const load = fromDynalite();
  for (const name of ["conditionParser", "updateParser", "projectionParser"]) {
    const parser = load(`./db/${name}`);
    if (parser.parse.cached) continue;
    parser.parse = cachedParse(parser.parse.bind(parser));
  }
}

function cachedParse(parse) {
  const parsed = new Map();
  const cached = (input, options) => {
    const context = options.context;
    if (/between|attribute_type/i.test(input)) return parse(input, options);
    const names = context.attrNames;
    const stand = standIns(input, names);
    const key = `${input}\0${stand ? `#${Object.keys(names).join("\0")}` : JSON.stringify(names ?? null)}\0${valueTypes(context.attrVals)}`;
    let entry = parsed.get(key);
    if (entry !== undefined) {
      // Most recently used last: the Map's order is the eviction order.
      parsed.delete(key);
      parsed.set(key, entry);
    } else {
      // Parsed on a context of its own, where every name and value starts unused: what the expression
      // uses, whatever other expressions of the request used before it.
      const probe = {
        ...context,
        ...(stand && { attrNames: stand }),
        unusedAttrNames: Object.fromEntries(Object.keys(names ?? {}).map((k) => [k, true])),
        unusedAttrVals: Object.fromEntries(Object.keys(context.attrVals ?? {}).map((k) => [k, true])),
      };
      const tree = parse(input, { context: probe }); // a syntax error throws, as before: never kept
      // A refusal (a message) is made again on the request's own context: never kept.
      if (tree === null || typeof tree !== "object") return parse(input, options);
      entry = {
        tree,
        values: context.attrVals ?? {},
        standIns: stand,
        names: Object.keys(names ?? {}).filter((k) => !(k in probe.unusedAttrNames)),
        vals: Object.keys(context.attrVals ?? {}).filter((k) => !(k in probe.unusedAttrVals)),
      };
      if (parsed.size >= MAX_PARSES) parsed.delete(parsed.keys().next().value);
      parsed.set(key, entry);
    }
    for (const name of entry.names) delete context.unusedAttrNames?.[name];
    for (const val of entry.vals) delete context.unusedAttrVals?.[val];
    const swap = new Map(Object.keys(entry.values).map((k) => [entry.values[k], context.attrVals[k]]));
    const named =
      entry.standIns && new Map(Object.keys(entry.standIns).map((k) => [entry.standIns[k], names[k]]));
    return withValues(entry.tree, swap, named);
  };
  cached.cached = true;
  return cached;
}

/**
 * A parse depends on its attribute names only through which path pieces are equal (the overlap and
 * conflict checks), and on whether each is defined (a name must not be empty). When the request's
 * names are all different, none is empty and none is also written literally in the expression, the
 * expression is parsed with a stand-in for each name (a string no expression can hold) and the parse
 * is reused for other such names: the rollups' markers name one attribute per record. Otherwise
 * (undefined) the names are part of the cache key.
 */
function standIns(input, names) {
  if (!names) return undefined;
  const values = Object.values(names);
  if (values.some((v) => typeof v !== "string" || v === "")) return undefined;
  if (new Set(values).size !== values.length) return undefined;
  const literals = new Set(input.match(/(?<![#:\w])[A-Za-z_][A-Za-z0-9_]*/g));
  if (values.some((v) => literals.has(v))) return undefined;
  return Object.fromEntries(Object.keys(names).map((k, i) => [k, `\0${i}`]));
}

/** Each value's name and type (an attribute value has one key, its type), in the request's order. */
function valueTypes(values) {
  if (!values) return "";
  let out = "";
  for (const name of Object.keys(values)) out += `${name}=${Object.keys(values[name] ?? {}).join("|")};`;
  return out;
}

/**
 * A copy of a parse tree whose value objects are swapped for the request's (the tree holds them as is),
 * and its names' stand-ins for the request's names (as path pieces, and as the keys of the parse's
 * `nestedPaths` and `pathHeads`).
 */
function withValues(node, swap, named) {
  if (typeof node === "string") return named?.get(node) ?? node;
  if (node === null || typeof node !== "object") return node;
  const value = swap.get(node);
  if (value !== undefined) return value;
  if (Array.isArray(node)) return node.map((child) => withValues(child, swap, named));
  const copy = Object.getPrototypeOf(node) === null ? Object.create(null) : {};
  for (const key of Object.keys(node)) copy[named?.get(key) ?? key] = withValues(node[key], swap, named);
  return copy;
}

/**
 * Every item request reads its table's definition from LevelDB, and a BatchGetItem or BatchWriteItem
 * once per item. The store's definitions are kept until the table is written or deleted: as JSON for
 * the table operations (a fresh object each read: deleteTable and updateTable change the one they
 * get), and parsed once, frozen, for the item operations, which only read it (parsing the interactions
 * table's definition took ~20 µs, and a record's index work reads it about three times). Idempotent.
 */
export function cacheDynaliteTables() {
  const db = fromDynalite()("./db");
  if (db.create.cached) return;
  const create = db.create;
  db.create = (options) => {
    const store = create(options);
    cacheTableReads(store);
    return store;
  };
  db.create.cached = true;
}

function cacheTableReads(store) {
  const { tableDb } = store;
  /** A table's definition by name: `json`, and `shared` once an item operation has asked for it. */
  const definitions = new Map();
  // Counts a write's start and its end: a read that either overtook keeps nothing (it may have read
  // the definition from before the write).
  let writes = 0;
  const written = (key) => {
    writes++;
    definitions.delete(key);
  };
  const { get, put, del } = tableDb;
  tableDb.get = function (key, ...rest) {
    const [done] = rest;
    if (rest.length !== 1 || typeof done !== "function") return get.call(this, key, ...rest);
    const cached = definitions.get(key);
    if (cached !== undefined) return process.nextTick(done, null, JSON.parse(cached.json));
    const before = writes;
    return get.call(this, key, (err, table) => {
      if (!err && table && typeof table === "object" && before === writes) {
        definitions.set(key, { json: JSON.stringify(table), shared: undefined });
      }
      done(err, table);
    });
  };
  const writing = (write) =>
    function (key, ...rest) {
      written(key);
      const done = rest.at(-1);
      if (typeof done === "function") {
        return write.call(this, key, ...rest.slice(0, -1), (...results) => {
          written(key);
          done(...results);
        });
      }
      const result = write.call(this, key, ...rest);
      result?.then?.(
        () => written(key),
        () => written(key),
      );
      return result;
    };
  tableDb.put = writing(put);
  tableDb.del = writing(del);

  // The item operations call `getTable(name, done)`; the table operations pass a status flag.
  const { getTable } = store;
  store.getTable = function (name, checkStatus, done) {
    const cached = typeof checkStatus === "function" ? definitions.get(name) : undefined;
    if (cached === undefined) return getTable.call(this, name, checkStatus, done);
    cached.shared ??= deepFreeze(JSON.parse(cached.json));
    // getTable's own check: a table being made or deleted is not found.
    const { TableStatus } = cached.shared;
    if (TableStatus === "CREATING" || TableStatus === "DELETING")
      return getTable.call(this, name, checkStatus);
    process.nextTick(checkStatus, null, cached.shared);
  };
}

function deepFreeze(value) {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
