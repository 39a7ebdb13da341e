import {
  type AthenaClient,
  type StartQueryExecutionCommand,
  StopQueryExecutionCommand,
} from "@aws-sdk/client-athena";

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
class MissingFileFailure extends Error {}

/** The error for a failed or cancelled query: MissingFileFailure when its reason is a missing file. */
export function queryFailure(id: string, state: string, reason: string | undefined): Error {
  const message = `Athena query ${id} ${state.toLowerCase()}: ${reason ?? ""}`;
  return state === "FAILED" && MISSING_FILE.test(reason ?? "")
    ? new MissingFileFailure(message)
    : new Error(message);
}

/**
 * Starts the query and waits for it (`wait` throws `queryFailure`'s errors); one that failed on a file a
 * compaction removed meanwhile is run again, each time with a new request. A query that did not
 * succeed is stopped.
 */
export async function succeededAcrossSwaps(
  client: AthenaClient,
  start: StartQueryExecutionCommand,
  wait: (id: string) => Promise<void>,
  sleep: (ms: number) => Promise<void>,
): Promise<string> {
  for (let retry = 0; ; retry++) {
    const id = (await client.send(start)).QueryExecutionId;
    if (!id) throw new Error("Athena returned no query execution id");
    try {
      await wait(id);
      return id;
    } catch (err) {
      await stopQuery(client, id);
      const pause = MISSING_FILE_RETRY_MS[retry];
      if (!(err instanceof MissingFileFailure) || pause === undefined) throw err;
      await sleep(pause);
    }
  }
}

/** Stops a query, whether it still runs or only its results remain; one already ended is no error. */
export async function stopQuery(client: AthenaClient, id: string): Promise<void> {
  await client.send(new StopQueryExecutionCommand({ QueryExecutionId: id })).catch(() => undefined);
}
