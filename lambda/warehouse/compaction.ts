import { randomBytes } from "node:crypto";
import {
  COMPACTION_LOOKBACK_DAYS,
  type CompactionReport,
  compactedFileKey,
  type MergeJournal,
  PARTITION_LEASE_MS,
  type PartitionLeases,
  planMerges,
} from "../core/compaction";
import {
  FileChangedError,
  type TombstoneReader,
  tombstoneMatcher,
  type WarehouseFiles,
} from "../core/deletion";
import type { DeliveryLedger } from "../core/delivery-ledger";
import { errorFields, type Logger } from "../core/logger";
import type { Project } from "../core/model";
import type { ObjectInfo, ObjectStore } from "../core/object-store";
import { type InteractionRecord, partitionPrefix } from "../core/record";
import type { RecordCodec } from "../core/record-codec";
import { bodiesExpired, recordsExpired, retentionCutoffs, withoutBodies } from "../core/retention";

/**
 * The compaction run (docs/warehouse.md, "Compaction"): for each project and closed day of the last
 * COMPACTION_LOOKBACK_DAYS, merges the consumer's small files into files of up to about 32 MB. The
 * scheduled function in AWS and `dmt compaction run` locally call it with their own adapters.
 *
 * One merge, under the partition's lease:
 *   c1 journal  the output's name and the inputs, on the lease
 *   c2 merge    read the inputs, leaving out those holding rows a deletion's tombstone covers (the
 *               deletion rewrites them); drop repeated transaction ids and bodies past the project's
 *               body retention; put the output (`compact-<hash>.parquet`)
 *   c3 recheck  tombstones again: a deletion that began during c2 may have looked for the user's rows
 *               before the output existed, so an output holding any is removed and the merge given up
 *   c4 swap     commit each input in the delivery ledger (its records stay "written" once it is gone),
 *               then remove it; clear the journal
 * Readers see every row once throughout: between c2 and the end of c4 a row may be in an input and the
 * output, and the export queries take a compacted file's row only where no consumer file holds it.
 * A run killed anywhere leaves either its inputs alone (before c2's put: the next run merges them
 * again, under the same name) or a journal whose output exists: the next holder finishes c4 first.
 */
export interface CompactionDeps {
  /** The projects, with their retention settings. */
  projects: { listProjects(): Promise<Project[]> };
  /** The warehouse bucket (folder locally): listing, and writing the merged files. */
  objects: Pick<ObjectStore, "list" | "put" | "delete" | "exists">;
  /** Reads inputs with their version and removes them with every older version (deletion's adapters). */
  files: WarehouseFiles;
  codec: RecordCodec;
  ledger: Pick<DeliveryLedger, "commit">;
  leases: PartitionLeases;
  tombstones: TombstoneReader;
  logger: Logger;
  clock: () => number;
}

export interface CompactionOptions {
  /** Only this project. */
  projectId?: string;
  /** No partition is started after this time (epoch ms): the function's timeout. */
  stopAt?: number;
}

const DAY_MS = 86_400_000;
/** Inputs committed and removed at once: a few S3 and DynamoDB calls each, ~3,000 in a day's merge. */
const SWAP_CONCURRENCY = 16;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** A merge left with nothing to do: its inputs went meanwhile, or a deletion covers all its rows. */
class NothingToMerge extends Error {}

/** One partition a run is to merge: a project's closed day with at least two files. */
export interface PlannedPartition {
  projectId: string;
  day: string;
  /** The day is past the project's body retention: the merge drops the bodies. */
  dropBodies: boolean;
}

/**
 * Every partition a run has to do (each project's closed days of the lookback with two files or more),
 * newest day first: the list a run works through in turn, or that AWS fans out one worker per
 * partition (lib/compaction.ts). Stops listing at `stopAt`.
 */
export async function planCompaction(
  deps: Pick<CompactionDeps, "projects" | "objects" | "clock">,
  options: CompactionOptions = {},
): Promise<PlannedPartition[]> {
  const now = deps.clock();
  const projects = (await deps.projects.listProjects()).filter(
    (p) => options.projectId === undefined || p.projectId === options.projectId,
  );
  // Closed days only, newest first: a late record most likely belongs to yesterday.
  const days = Array.from({ length: COMPACTION_LOOKBACK_DAYS }, (_, i) => dayOf(now - (i + 1) * DAY_MS));
  const planned: PlannedPartition[] = [];
  for (const project of projects) {
    const cutoffs = retentionCutoffs(project, now);
    for (const day of days) {
      if (options.stopAt !== undefined && deps.clock() >= options.stopAt) return planned;
      // An expired day is the retention run's to remove, not to write again.
      if (recordsExpired(cutoffs, day)) continue;
      const files = await listPartition(deps, partitionPrefix(project.projectId, day));
      if (files.length < 2) continue;
      planned.push({ projectId: project.projectId, day, dropBodies: bodiesExpired(cutoffs, day) });
    }
  }
  return planned;
}

/** Merges one planned partition under its lease (`holder` names the run); what a worker does. */
export async function compactPlanned(
  deps: CompactionDeps,
  holder: string,
  partition: PlannedPartition,
): Promise<CompactionReport["partitions"][number] | undefined> {
  const files = await listPartition(deps, partitionPrefix(partition.projectId, partition.day));
  // Merged meanwhile by another run: nothing left to do.
  if (files.length < 2) return undefined;
  try {
    return await compactPartition(deps, holder, partition, files);
  } catch (err) {
    deps.logger.error("compaction of a partition failed; the next run finishes it", {
      metric: "compaction.failed",
      projectId: partition.projectId,
      day: partition.day,
      ...errorFields(err),
    });
    return {
      projectId: partition.projectId,
      day: partition.day,
      outcome: "failed",
      filesBefore: files.length,
      filesAfter: files.length,
      rows: 0,
    };
  }
}

/** A whole run in one process (the local host, `dmt compaction run`): each partition as it is found. */
export async function runCompaction(
  deps: CompactionDeps,
  options: CompactionOptions = {},
): Promise<CompactionReport> {
  const now = deps.clock();
  const report: CompactionReport = { runId: newRunId(), partitions: [] };
  const projects = (await deps.projects.listProjects()).filter(
    (p) => options.projectId === undefined || p.projectId === options.projectId,
  );
  // Closed days only, newest first: a late record most likely belongs to yesterday.
  const days = Array.from({ length: COMPACTION_LOOKBACK_DAYS }, (_, i) => dayOf(now - (i + 1) * DAY_MS));
  for (const project of projects) {
    const cutoffs = retentionCutoffs(project, now);
    for (const day of days) {
      if (options.stopAt !== undefined && deps.clock() >= options.stopAt) return report;
      // An expired day is the retention run's to remove, not to write again.
      if (recordsExpired(cutoffs, day)) continue;
      const partition = { projectId: project.projectId, day, dropBodies: bodiesExpired(cutoffs, day) };
      const files = await listPartition(deps, partitionPrefix(project.projectId, day));
      if (files.length < 2) continue;
      try {
        const done = await compactPartition(deps, report.runId, partition, files);
        if (done) report.partitions.push(done);
      } catch (err) {
        deps.logger.error("compaction of a partition failed; the next run finishes it", {
          metric: "compaction.failed",
          projectId: project.projectId,
          day,
          ...errorFields(err),
        });
        report.partitions.push({
          projectId: project.projectId,
          day,
          outcome: "failed",
          filesBefore: files.length,
          filesAfter: files.length,
          rows: 0,
        });
      }
    }
  }
  return report;
}

/** A run's id: the holder of its leases. */
export const newRunId = (): string => `cmp_${randomBytes(8).toString("hex")}`;

async function listPartition(deps: Pick<CompactionDeps, "objects">, prefix: string): Promise<ObjectInfo[]> {
  const files: ObjectInfo[] = [];
  for await (const object of deps.objects.list(prefix)) {
    if (object.key.endsWith(".parquet") && !object.key.slice(prefix.length).includes("/")) files.push(object);
  }
  return files;
}

async function compactPartition(
  deps: CompactionDeps,
  holder: string,
  partition: { projectId: string; day: string; dropBodies: boolean },
  listed: ObjectInfo[],
): Promise<CompactionReport["partitions"][number] | undefined> {
  const { projectId, day } = partition;
  const prefix = partitionPrefix(projectId, day);
  const leaseId = `${projectId}/${day}`;
  const lease = await deps.leases.acquire(leaseId, holder, deps.clock() + PARTITION_LEASE_MS);
  if (!lease.acquired) {
    deps.logger.info("compaction: another run holds the partition", { projectId, day });
    return {
      projectId,
      day,
      outcome: "busy",
      filesBefore: listed.length,
      filesAfter: listed.length,
      rows: 0,
    };
  }
  try {
    if (lease.journal) {
      deps.logger.warn("compaction: finishing the merge of a run that ended", { projectId, day });
      await swap(deps, leaseId, holder, prefix, lease.journal);
    }
    // Listed again under the lease: another run may have merged the day meanwhile.
    const files = await listPartition(deps, prefix);
    const merges = planMerges(files);
    if (merges.length === 0) return undefined;
    let rows = 0;
    for (const inputs of merges) {
      try {
        rows += await merge(deps, leaseId, holder, partition, prefix, inputs);
      } catch (err) {
        if (!(err instanceof NothingToMerge)) throw err;
      }
    }
    const after = await listPartition(deps, prefix);
    deps.logger.info("compaction: partition compacted", {
      metric: "compaction.partition",
      projectId,
      day,
      filesBefore: files.length,
      filesAfter: after.length,
      rows,
    });
    return {
      projectId,
      day,
      outcome: "compacted",
      filesBefore: files.length,
      filesAfter: after.length,
      rows,
    };
  } finally {
    await deps.leases.release(leaseId, holder);
  }
}

/** One merge (c1–c4); the rows written. */
async function merge(
  deps: CompactionDeps,
  leaseId: string,
  holder: string,
  partition: { projectId: string; dropBodies: boolean },
  prefix: string,
  inputs: string[],
): Promise<number> {
  const seenTombstones = await deps.tombstones.forProjects([partition.projectId]);
  const covered = tombstoneMatcher(seenTombstones);
  const byTransaction = new Map<string, InteractionRecord>();
  const versions = new Map<string, string>();
  for (const key of inputs) {
    const file = await deps.files.read(key);
    // Removed since listed: a deletion took all its rows.
    if (!file) continue;
    const records = await deps.codec.decode(file.bytes);
    // A file holding a deletion's rows stays out of the merge, for the deletion to rewrite: its rewrite
    // keeps the removed calls' money as erased usage, which a merge dropping them would lose.
    if (records.some(covered)) continue;
    versions.set(key, file.version);
    for (const record of records) {
      if (byTransaction.has(record.transaction_id)) continue;
      byTransaction.set(record.transaction_id, partition.dropBodies ? withoutBodies(record) : record);
    }
  }
  // What is left for a merge: a deletion's rows stay in their files, for the deletion to remove.
  const present = [...versions.keys()];
  if (present.length < 2 || byTransaction.size === 0) throw new NothingToMerge();
  const records = [...byTransaction.values()];
  const output = compactedFileKey(prefix, present);
  const name = (key: string) => key.slice(prefix.length);
  const journal: MergeJournal = { output: name(output), inputs: present.map(name) };
  await deps.leases.journal(leaseId, holder, journal); // c1
  await deps.objects.put(output, deps.codec.encode(records)); // c2

  // c3: a tombstone that appeared during c2.
  const now = await deps.tombstones.forProjects([partition.projectId]);
  const known = new Set(seenTombstones.map((t) => t.requestId));
  if (now.some((t) => !known.has(t.requestId))) {
    const stillCovered = tombstoneMatcher(now);
    if (records.some(stillCovered)) {
      // A deletion's rows: the output goes, the inputs stay for the deletion to rewrite (which keeps
      // their money as erased usage); a later run merges what it leaves.
      await deps.objects.delete(output);
      await deps.leases.journal(leaseId, holder, undefined);
      throw new NothingToMerge();
    }
  }
  await swap(deps, leaseId, holder, prefix, journal, versions); // c4
  return records.length;
}

/**
 * c4: the output holds every input's rows; each input is committed, then removed with its old
 * versions. `versions`: what the merge read (a journal taken over reads them again).
 */
async function swap(
  deps: CompactionDeps,
  leaseId: string,
  holder: string,
  prefix: string,
  journal: MergeJournal,
  versions = new Map<string, string>(),
): Promise<void> {
  // A journal without its output: the run ended before its put, and the inputs are untouched.
  if (await deps.objects.exists(prefix + journal.output)) {
    const inputs = journal.inputs.map((name) => prefix + name);
    let failed = false;
    const next = async (): Promise<void> => {
      // After a failure no input is started: the journal stays, and the next holder finishes.
      for (let input = inputs.shift(); input !== undefined && !failed; input = inputs.shift()) {
        try {
          await deps.ledger.commit(input);
          await removeInput(deps.files, input, versions.get(input));
        } catch (err) {
          failed = true;
          throw err;
        }
      }
    };
    // Every input already started is waited for, even after one failed: the run must not report (or
    // its Lambda invocation end) while removals it began still change the partition.
    const outcomes = await Promise.allSettled(Array.from({ length: SWAP_CONCURRENCY }, next));
    const failure = outcomes.find((o): o is PromiseRejectedResult => o.status === "rejected");
    if (failure) throw failure.reason;
  }
  await deps.leases.journal(leaseId, holder, undefined);
}

/**
 * Removes an input whatever version it is at now: a deletion or the retention run may have rewritten
 * it since the merge read it, and its rows (fewer, or without bodies) are in the output either way.
 */
async function removeInput(files: WarehouseFiles, key: string, version: string | undefined): Promise<void> {
  for (let known = version; ; ) {
    known ??= (await files.read(key))?.version;
    if (known === undefined) return;
    try {
      await files.remove(key, known);
      return;
    } catch (err) {
      if (!(err instanceof FileChangedError)) throw err;
      known = undefined;
    }
  }
}
