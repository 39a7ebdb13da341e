import { createHash } from "node:crypto";
import type { ObjectInfo } from "./object-store";

/**
 * Compaction of the warehouse (docs/warehouse.md): the consumer writes one small Parquet file per
 * project, day and batch; compaction merges a closed day's small files into large ones. These are its
 * rules, shared by the run (lambda/warehouse/compaction.ts) and the readers (the export queries).
 */

/** Compacted files are named `compact-<hash of their inputs>.parquet`; the consumer's start with a time. */
export const COMPACTED_FILE_PREFIX = "compact-";

/**
 * A merge stops adding inputs once they reach this. Athena's advice is ~128 MB a file; what bounds it
 * here is the deletion's rewrite step, which decodes one file whole in 2 GB (about a million rows,
 * docs/deletion.md), and 32 MB of Parquet holds up to about that many rows without bodies.
 */
export const COMPACTION_TARGET_BYTES = 32 * 1024 * 1024;

/**
 * At most this many inputs per merge: a day at the AWS batching settings (2,880 files) is one merge,
 * and its journal (the inputs' names within the partition, ~50 bytes each) fits a 400 KB store item.
 */
export const COMPACTION_MAX_INPUTS = 3_000;

/**
 * Days looked at, before today: a late record comes from the queue (SQS keeps messages 14 days) or
 * the proxy's spool, so a day older than this gets no new small files.
 */
export const COMPACTION_LOOKBACK_DAYS = 15;

/**
 * How long a run holds a partition. Longer than the function's timeout (15 minutes) plus clock skew:
 * a holder never outlives its lease, so two runs never compact one partition at once.
 */
export const PARTITION_LEASE_MS = 20 * 60_000;

export function isCompactedFile(key: string): boolean {
  return key.slice(key.lastIndexOf("/") + 1).startsWith(COMPACTED_FILE_PREFIX);
}

/** The merge of `inputs` in the partition at `prefix`: the same inputs always make the same name. */
export function compactedFileKey(prefix: string, inputs: readonly string[]): string {
  const hash = createHash("sha256")
    .update([...inputs].sort().join("\n"))
    .digest("hex")
    .slice(0, 24);
  return `${prefix}${COMPACTED_FILE_PREFIX}${hash}.parquet`;
}

/**
 * The merges of a partition's consumer files, oldest first: runs of consecutive files (by name, so by
 * time) up to the target size and input count. Compacted files are never inputs, and a lone file is
 * not worth a merge.
 */
export function planMerges(files: readonly ObjectInfo[]): string[][] {
  const small = files.filter((f) => !isCompactedFile(f.key)).sort((a, b) => (a.key < b.key ? -1 : 1));
  const merges: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const file of small) {
    if (
      current.length > 0 &&
      (bytes + file.size > COMPACTION_TARGET_BYTES || current.length >= COMPACTION_MAX_INPUTS)
    ) {
      merges.push(current);
      current = [];
      bytes = 0;
    }
    current.push(file.key);
    bytes += file.size;
  }
  merges.push(current);
  return merges.filter((m) => m.length > 1);
}

/**
 * A merge in progress, kept on the partition's lease: what a crashed run's successor finishes. Names
 * are within the partition's folder.
 */
export interface MergeJournal {
  output: string;
  inputs: string[];
}

/**
 * One lease per warehouse partition (`<project>/<day>`), in the store: compaction runs hold it while
 * they merge, so two never merge the same files. The lease also carries the merge in progress.
 */
export interface PartitionLeases {
  /**
   * Takes the partition for `holder` until `until` (epoch ms) if no live lease holds it. The merge a
   * holder that died left behind comes back with it, to be finished.
   */
  acquire(
    partition: string,
    holder: string,
    until: number,
  ): Promise<{ acquired: boolean; journal?: MergeJournal }>;
  /** Notes the merge `holder` is about to make (undefined: none is in progress). */
  journal(partition: string, holder: string, merge: MergeJournal | undefined): Promise<void>;
  /** Ends `holder`'s lease; one taken over by another holder meanwhile is left alone. */
  release(partition: string, holder: string): Promise<void>;
}

/** What a run did. */
export interface CompactionReport {
  runId: string;
  partitions: {
    projectId: string;
    day: string;
    /** `busy`: another run holds it; `failed`: see the log. */
    outcome: "compacted" | "busy" | "failed";
    filesBefore: number;
    filesAfter: number;
    rows: number;
  }[];
}
