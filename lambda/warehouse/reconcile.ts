import type { WarehouseQuery } from "../core/export-query";
import {
  addUsage,
  compareUsage,
  type DailyModelUsage,
  type DayRange,
  type Drift,
  isReported,
  type ReconciledVendor,
  type RecordTokens,
  recordUsage,
  type VendorUsageReport,
} from "../core/reconcile";

export interface ReconcileDeps {
  /** The warehouse's export query: DuckDB locally, Athena in AWS. */
  query: WarehouseQuery;
  /** Every project, whose managed calls the vendor's organization served. */
  projects(): Promise<{ projectId: string }[]>;
  report: VendorUsageReport;
}

/**
 * Our managed calls' tokens per model and day, read through the export query (project by project, the
 * way the warehouse is partitioned), against the vendor's report for the same days.
 */
export async function reconcile(
  deps: ReconcileDeps,
  vendor: ReconciledVendor,
  range: DayRange,
): Promise<Drift[]> {
  const [ours, theirs] = await Promise.all([ourUsage(deps, vendor, range), deps.report.daily(vendor, range)]);
  return compareUsage(ours, theirs);
}

async function ourUsage(
  deps: ReconcileDeps,
  vendor: ReconciledVendor,
  range: DayRange,
): Promise<DailyModelUsage[]> {
  // Summed as rows arrive: memory grows with days and models, not with calls.
  const sums = new Map<string, DailyModelUsage>();
  for (const { projectId } of await deps.projects()) {
    const query = {
      projectId,
      start: range.from,
      end: range.to,
      filters: { vendor, billing_mode: "managed" as const },
    };
    for await (const batch of deps.query.rows(query, "json")) {
      for (const text of batch) {
        const record = JSON.parse(text) as RecordTokens;
        if (isReported(vendor, record)) addUsage(sums, recordUsage(record));
      }
    }
  }
  return [...sums.values()];
}
