import { HttpUsageReport } from "../lambda/adapters/undici/usage-report";
import type { WarehouseQuery } from "../lambda/core/export-query";
import type { DayRange, Drift, ReconciledVendor } from "../lambda/core/reconcile";
import { reconcile } from "../lambda/warehouse/reconcile";

export interface ReconcileParts {
  /** The warehouse's export query (DuckDB over the data dir locally). */
  query: WarehouseQuery;
  projects(): Promise<{ projectId: string }[]>;
  /** The vendor's base URL: the upstream the proxy uses (the simulator's, when one is configured). */
  upstream: string;
  /** The organization's admin key for the vendor's usage report. */
  adminKey: string;
}

/**
 * `dmt reconcile`, assembled where the CLI runs (an operator command, not a deployable): the
 * warehouse's managed calls against the vendor's usage report over HTTP.
 */
export function composeReconcile(
  parts: ReconcileParts,
): (vendor: ReconciledVendor, range: DayRange) => Promise<Drift[]> {
  const report = new HttpUsageReport(parts.upstream, parts.adminKey);
  return (vendor, range) =>
    reconcile({ query: parts.query, projects: parts.projects, report }, vendor, range);
}
