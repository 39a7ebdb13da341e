/**
 * Athena lists a partition's files when it plans a query and reads them later; a compaction's swap
 * that removes an input in between fails the query (docs/warehouse.md, "Readers during a swap"). The
 * failure names the file the reader could not open; the query, run again, lists the swapped folder.
 * Athena returns no rows before a query has succeeded, so running it again never repeats a row.
 */
const MISSING_FILE = /NoSuchKey|specified key does not exist|FileNotFoundException|No such file/i;

/** Pauses before each new run of a query that met a missing file: a day's swap takes about a minute. */
export const MISSING_FILE_RETRY_MS = [5_000, 15_000, 30_000] as const;

/** A query that failed on a file removed while it ran. */
export class MissingFileFailure extends Error {}

/** The error for a failed or cancelled query: MissingFileFailure when its reason is a missing file. */
export function queryFailure(id: string, state: string, reason: string | undefined): Error {
  const message = `Athena query ${id} ${state.toLowerCase()}: ${reason ?? ""}`;
  return state === "FAILED" && MISSING_FILE.test(reason ?? "")
    ? new MissingFileFailure(message)
    : new Error(message);
}
