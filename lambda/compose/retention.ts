import { parquetCodec } from "../adapters/parquet/codec";
import type { Store } from "../core/ports";
import type { RetentionAudit, RetentionIndex } from "../core/retention";
import { type RetentionOptions, runRetention } from "../warehouse/retention";
import type { Infrastructure } from "./infrastructure";

/**
 * The retention run (docs/privacy.md): the daily scheduled function in AWS, `dmt retention run`
 * locally. Expired day partitions leave the warehouse, older bodies are dropped, the dashboard's
 * index follows; the rollups and the ledger are not touched. Its counts go to the metrics.
 */
export function composeRetention(
  infra: Pick<Infrastructure, "warehouse" | "warehouseFiles" | "clock" | "logger" | "metrics"> & {
    /** The project list (the store ports' `keys`) and the dashboard's index. */
    store: { keys: Pick<Store, "listProjects">; interactions: RetentionIndex };
  },
): (options?: RetentionOptions) => Promise<RetentionAudit> {
  const { metrics } = infra;
  return async (options = {}) => {
    const audit = await runRetention(
      {
        projects: infra.store.keys,
        objects: infra.warehouse,
        files: infra.warehouseFiles,
        codec: parquetCodec,
        index: infra.store.interactions,
        logger: infra.logger,
        clock: infra.clock,
      },
      options,
    );
    const sum = (pick: (p: RetentionAudit["projects"][number]) => number) =>
      audit.projects.reduce((total, p) => total + pick(p), 0);
    metrics.add(
      "PartitionsRemoved",
      "Count",
      sum((p) => p.partitionsRemoved.length),
    );
    metrics.add(
      "RowsRemoved",
      "Count",
      sum((p) => p.rowsRemoved),
    );
    metrics.add(
      "BodiesDropped",
      "Count",
      sum((p) => p.rowsBlanked),
    );
    return audit;
  };
}
