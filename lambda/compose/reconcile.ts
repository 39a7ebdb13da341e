import { HttpUsageReport } from "../adapters/undici/usage-report";
import type { WarehouseQuery } from "../core/export-query";
import type { DayRange, Drift, ReconciledVendor } from "../core/reconcile";
import { reconcile } from "../warehouse/reconcile";

export interface ReconcileParts {
  /** The warehouse's export query (DuckDB over the data dir locally). */
  query: WarehouseQuery;
  projects(): Promise<{ projectId: string }[]>;
  /** The vendor's base URL: the upstream the proxy uses (the simulator's, when one is configured). */
  upstream: string;
  /** The organization's admin key for the vendor's usage report. */
  adminKey: string;
}

/** `dmt reconcile`: the warehouse's managed calls against the vendor's usage report over HTTP. */
export function composeReconcile(
  parts: ReconcileParts,
): (vendor: ReconciledVendor, range: DayRange) => Promise<Drift[]> {
  const report = new HttpUsageReport(parts.upstream, parts.adminKey);
  return (vendor, range) =>
    reconcile({ query: parts.query, projects: parts.projects, report }, vendor, range);
}
