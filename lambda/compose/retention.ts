import { parquetCodec } from "../adapters/parquet/codec";
import type { Store } from "../core/ports";
import type { RetentionAudit, RetentionIndex } from "../core/retention";
import {
  type PlannedProject,
  planRetention,
  type RetentionDeps,
  type RetentionOptions,
  retainPlanned,
  runRetention,
} from "../warehouse/retention";
import type { Infrastructure } from "./infrastructure";

type RetentionInfra = Pick<
  Infrastructure,
  "warehouse" | "warehouseFiles" | "clock" | "logger" | "metrics"
> & {
  /** The project list and a project's limits (the store ports' `keys`), and the dashboard's index. */
  store: { keys: Pick<Store, "listProjects" | "getProject">; interactions: RetentionIndex };
};

function retentionDeps(infra: RetentionInfra): RetentionDeps {
  return {
    projects: infra.store.keys,
    objects: infra.warehouse,
    files: infra.warehouseFiles,
    codec: parquetCodec,
    index: infra.store.interactions,
    logger: infra.logger,
    clock: infra.clock,
  };
}

/** A run's or a worker's counts, to the metrics. */
function countProjects(metrics: Infrastructure["metrics"], audit: RetentionAudit): void {
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
}

/**
 * The retention run (docs/privacy.md): the daily scheduled function in AWS, `dmt retention run`
 * locally. Expired day partitions leave the warehouse, older bodies are dropped, the dashboard's
 * index follows; the rollups and the ledger are not touched. Its counts go to the metrics.
 */
export function composeRetention(
  infra: RetentionInfra,
): (options?: RetentionOptions) => Promise<RetentionAudit> {
  const deps = retentionDeps(infra);
  return async (options = {}) => {
    const audit = await runRetention(deps, options);
    countProjects(infra.metrics, audit);
    return audit;
  };
}

/**
 * The same run in two steps, for AWS (lib/retention.ts): `plan` lists the projects with a limit, which
 * the function puts on a queue; `project` retains one of them (a worker's invocation), with an audit
 * entry of its own. Every step is idempotent, so a message delivered twice does no harm.
 */
export function composeRetentionSteps(infra: RetentionInfra): {
  plan(options?: Pick<RetentionOptions, "projectId">): Promise<PlannedProject[]>;
  project(planned: PlannedProject): Promise<RetentionAudit | undefined>;
} {
  const deps = retentionDeps(infra);
  return {
    async plan(options = {}) {
      const planned = await planRetention(deps, options);
      infra.metrics.add("ProjectsPlanned", "Count", planned.length);
      return planned;
    },
    async project(planned) {
      const audit = await retainPlanned(deps, planned);
      if (audit) countProjects(infra.metrics, audit);
      infra.metrics.add("ProjectsFailed", "Count", audit?.status === "failed" ? 1 : 0);
      return audit;
    },
  };
}
