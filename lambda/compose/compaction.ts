import { parquetCodec } from "../adapters/parquet/codec";
import type { CompactionReport, PartitionLeases } from "../core/compaction";
import type { TombstoneReader } from "../core/deletion";
import type { Store } from "../core/ports";
import {
  type CompactionDeps,
  type CompactionOptions,
  compactPlanned,
  type PlannedPartition,
  planCompaction,
  runCompaction,
} from "../warehouse/compaction";
import type { Infrastructure } from "./infrastructure";

type CompactionInfra = Pick<
  Infrastructure,
  "warehouse" | "warehouseFiles" | "deliveries" | "clock" | "logger" | "metrics"
> & {
  /** The project list (the store ports' `keys`) and the deletion tombstones. */
  store: { keys: Pick<Store, "listProjects">; tombstones: TombstoneReader };
  /**
   * The `warehouseLeases` table (adapters/dynamodb/partition-leases.ts). Not one of the store ports,
   * all of which every function's bundle carries (the proxy's has no room to spare).
   */
  leases: PartitionLeases;
};

function compactionDeps(infra: CompactionInfra): CompactionDeps {
  return {
    projects: infra.store.keys,
    objects: infra.warehouse,
    files: infra.warehouseFiles,
    codec: parquetCodec,
    ledger: infra.deliveries,
    leases: infra.leases,
    tombstones: infra.store.tombstones,
    logger: infra.logger,
    clock: infra.clock,
  };
}

/** A run's or a worker's counts, to the metrics. */
function countPartitions(
  metrics: Infrastructure["metrics"],
  partitions: CompactionReport["partitions"],
): void {
  const count = (outcome: string) => partitions.filter((p) => p.outcome === outcome).length;
  metrics.add("PartitionsCompacted", "Count", count("compacted"));
  metrics.add("PartitionsFailed", "Count", count("failed"));
  metrics.add(
    "FilesRemoved",
    "Count",
    partitions.reduce((sum, p) => sum + Math.max(0, p.filesBefore - p.filesAfter), 0),
  );
}

/**
 * The compaction run (docs/warehouse.md): the daily scheduled function in AWS, `dmt compaction run`
 * locally. Each closed day's small consumer files become one file (or a few of up to 32 MB), exactly once
 * through the delivery ledger, under a lease per partition in the store. Its counts go to the metrics.
 */
export function composeCompaction(
  infra: CompactionInfra,
): (options?: CompactionOptions) => Promise<CompactionReport> {
  const deps = compactionDeps(infra);
  return async (options = {}) => {
    const report = await runCompaction(deps, options);
    countPartitions(infra.metrics, report.partitions);
    return report;
  };
}

/**
 * The same run in two steps, for AWS (lib/compaction.ts): `plan` lists the partitions to do, which the
 * function puts on a queue; `partition` merges one of them (a worker's invocation), under the lease of
 * the run that planned it, so that a partition is done by one worker at a time however many run.
 */
export function composeCompactionSteps(infra: CompactionInfra): {
  plan(options?: CompactionOptions): Promise<PlannedPartition[]>;
  partition(
    holder: string,
    partition: PlannedPartition,
  ): Promise<CompactionReport["partitions"][number] | undefined>;
} {
  const deps = compactionDeps(infra);
  return {
    async plan(options = {}) {
      const planned = await planCompaction(deps, options);
      infra.metrics.add("PartitionsPlanned", "Count", planned.length);
      return planned;
    },
    async partition(holder, partition) {
      const done = await compactPlanned(deps, holder, partition);
      countPartitions(infra.metrics, done ? [done] : []);
      return done;
    },
  };
}
