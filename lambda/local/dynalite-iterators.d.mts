// Types of dynalite-iterators.mjs.

/** The abstract-level module under dynalite's LevelDB (only what the tests use is typed). */
export function dynaliteAbstractLevel(): {
  AbstractLevel: {
    prototype: { attachResource(resource: object): void; detachResource(resource: object): void };
  };
  AbstractIterator: { prototype: object };
};

/** Makes dynalite close the LevelDB iterators of its queries and scans once they end. */
export function closeDynaliteIterators(): void;
