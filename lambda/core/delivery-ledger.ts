/**
 * The delivery ledger: which records already became rows. Queues deliver at least once (SQS may hand
 * the same message to two consumers at once, and brings failed ones back mixed with new ones), and a
 * producer may send a record twice; the ledger makes each record one row, by two-phase delivery
 * between the ledger, the object store and the consumer (lambda/warehouse/consumer.ts).
 *
 * State. Each transaction id is absent (never claimed) or claimed on one file (its latest claim); a
 * file is open, committed (its ids are written) or abandoned (its put failed and it is not there).
 * Every attempt to write a file gets a new name, so a file holds exactly the ids claimed on it by its
 * one writer.
 *
 * Consumer, per batch:
 *   d1  lookup   every id's state; for each open file some id is claimed on: does the object exist?
 *                - committed, or claimed on a file that exists: the row is there: commit that file (d4)
 *                  and acknowledge the record
 *                - claimed on a missing file whose writer may still be writing it (`live`): the
 *                  message fails and comes back later (SQS: after the visibility timeout)
 *                - absent, or claimed on a missing file whose writer has ended: write it
 *   d2  claim    the ids for a new file F, each only if it is still as d1 saw it (compare-and-set per
 *                id; a retry of our own claim passes); ids another consumer claimed meanwhile fail
 *   d3  put      F, with the ids claimed in d2 only
 *   d4  commit   F (one write per file): later deliveries need not look for F
 *   d5  abandon  F when its put failed and F is not there: its ids are free before the lease ends
 *
 * Guarantee: every acknowledged record has a row, and no id gets two, provided that
 *   - a writer's put lands, if ever, while its claim is live: in Lambda the consumer's timeout bounds
 *     the invocation, and a claim stays live for a lease longer than that timeout plus clock skew
 *     (CLAIM_LEASE_MS below); the file ledger serves one process, in which a claim is
 *     live from d2 until d4 or d5;
 *   - the object store is strongly consistent and its puts are atomic (S3, and the folder store's
 *     rename), and a put answered with an error that d5 then finds missing never lands later;
 *   - the ledger keeps entries longer than records are redelivered (15 days in DynamoDB, SQS keeps
 *     messages 14; the file ledger 1-2 days, the local queue redelivers within seconds);
 *   - a file disappears only when a deletion removed all its rows, and the deletion's tombstones
 *     (kept longer than SQS keeps messages) drop those records should they come again; or when
 *     compaction moved its rows into a merged file, having committed it first (a consumer that finds
 *     a claimed file gone reads its claims again: lambda/warehouse/consumer.ts).
 * Why: a row of id x is only in a file F that x was claimed on before F's put (d2 before d3). x's claim
 * leaves F only in d2, after d1 found F missing with its writer ended: then F never lands, so x's row
 * is in no file. d2 is a compare-and-set, so of consumers that saw the same state one moves x's claim.
 * A record is acknowledged only once its own put succeeded, or d1 found its file committed or there.
 */
export interface DeliveryLedger {
  /** The state of each of `ids` that was ever claimed; absent ids are not in the map. */
  lookup(ids: readonly string[]): Promise<Map<string, Delivery>>;
  /**
   * Claims ids for `file`, each only if its claim is still the one `lookup` saw: none, or `replaces`.
   * The ids claimed; the others were claimed by someone else meanwhile.
   */
  claim(file: string, requests: readonly ClaimRequest[]): Promise<Set<string>>;
  /** `file` is in the object store: the ids claimed on it are written. */
  commit(file: string): Promise<void>;
  /** `file` was not written and will not be: the claims on it end now. */
  abandon(file: string): Promise<void>;
}

export type Delivery =
  | { state: "written" }
  /** `live`: the claim's writer may still be writing `file`. */
  | { state: "claimed"; file: string; live: boolean };

export interface ClaimRequest {
  id: string;
  /** The file the id was claimed on when it was looked up; absent when it was not claimed. */
  replaces?: string;
}

export const WRITTEN: Delivery = { state: "written" };

/**
 * How long a claim keeps other consumers off its ids when its file is not there (the DynamoDB and
 * memory ledgers): the writer's Lambda invocation ends within the consumer's timeout (60 s,
 * lib/warehouse.ts), and a minute more covers clocks that disagree. Shorter than the queue's
 * visibility timeout (6 min), so a message that failed finds the claims of its first delivery ended
 * when it comes back.
 */
export const CLAIM_LEASE_MS = 2 * 60_000;
