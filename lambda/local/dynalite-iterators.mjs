// dynalite 4 reads a Query, a Scan or ListTables through a stream over an abstract-level 3 iterator,
// and closes it only through `iterator.return()`, a method abstract-level's iterators do not have
// (theirs is `close()`). So no iterator was ever closed: each stayed in the database's resources, and
// its LevelDB iterator kept the memtables and the version of the files it started on. The process's
// memory grew with every byte written (about 10 KB of native memory per proxied call, invisible to
// V8), and compaction deleted no file: the store's folder, mapped into memory by LevelDB, grew as well.
// Plain JavaScript: the store's worker (dynamo-worker.mjs) loads it without a TypeScript loader.
import { createRequire } from "node:module";

/** The abstract-level module that dynalite's LevelDB (level, then classic-level) is built on. */
export function dynaliteAbstractLevel() {
  const fromDynalite = createRequire(createRequire(import.meta.url).resolve("dynalite"));
  const fromLevel = createRequire(fromDynalite.resolve("level"));
  return createRequire(fromLevel.resolve("classic-level"))("abstract-level");
}

/**
 * Gives the iterators of that abstract-level a `return()` that closes them, which dynalite's stream
 * calls once it has ended or is destroyed. Idempotent.
 */
export function closeDynaliteIterators() {
  // The base class of every kind of iterator (entries, keys, values); it is not exported.
  const common = Object.getPrototypeOf(dynaliteAbstractLevel().AbstractIterator.prototype);
  if (typeof common.return === "function") return;
  Object.defineProperty(common, "return", {
    configurable: true,
    writable: true,
    async value() {
      await this.close();
      return { done: true, value: undefined };
    },
  });
}
