import { parquetCodec } from "../adapters/parquet/codec";
import type { CompactionReport, PartitionLeases } from "../core/compaction";
import type { TombstoneReader } from "../core/deletion";
import type { Store } from "../core/ports";
import { type CompactionOptions, runCompaction } from "../warehouse/compaction";
import type { Infrastructure } from "./infrastructure";

/**
 * The compaction run (docs/warehouse.md): the daily scheduled function in AWS, `dmt compaction run`
 * locally. Each closed day's small consumer files become one file (or a few of up to 32 MB), exactly once
 * through the delivery ledger, under a lease per partition in the store. Its counts go to the metrics.
 */
export function composeCompaction(
  infra: Pick<
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
  },
): (options?: CompactionOptions) => Promise<CompactionReport> {
  const { metrics } = infra;
  return async (options = {}) => {
    const report = await runCompaction(
      {
        projects: infra.store.keys,
        objects: infra.warehouse,
        files: infra.warehouseFiles,
        codec: parquetCodec,
        ledger: infra.deliveries,
        leases: infra.leases,
        tombstones: infra.store.tombstones,
        logger: infra.logger,
        clock: infra.clock,
      },
      options,
    );
    const count = (outcome: string) => report.partitions.filter((p) => p.outcome === outcome).length;
    metrics.add("PartitionsCompacted", "Count", count("compacted"));
    metrics.add("PartitionsFailed", "Count", count("failed"));
    metrics.add(
      "FilesRemoved",
      "Count",
      report.partitions.reduce((sum, p) => sum + Math.max(0, p.filesBefore - p.filesAfter), 0),
    );
    return report;
  };
}
