// Types of dynalite-caches.mjs.

/** Reuses dynalite's parse of an expression for the same expression, names and value types. */
export function cacheDynaliteParses(): void;

/** Keeps dynalite's table definitions in memory until a table is written again. */
export function cacheDynaliteTables(): void;

/** Makes dynalite's LevelDB reads run on the store's thread, without a snapshot. */
export function readDynaliteInline(): void;

/** Sends the LevelDB writes dynalite makes in one turn of its event loop as one batch. */
export function batchDynaliteWrites(): void;

/** LevelDB's write buffer in the store, in bytes. */
export const STORE_WRITE_BUFFER_BYTES: number;

/** Opens dynalite's LevelDB with a write buffer of STORE_WRITE_BUFFER_BYTES unless told otherwise. */
export function bufferDynaliteWrites(): void;
