/**
 * How many rows an export will hold, known before its query runs: the daily rollups' call counts
 * (core/interactions-usage.ts) for the range, narrowed by the filters the rollups are keyed by (vendor,
 * billing mode, model). A `user_id` or `status_code` filter is not in the rollups: the estimate is then
 * the count without it, an upper bound. Rollups keep deleted and retired calls (nothing subtracts), so
 * the estimate never undercounts.
 *
 * Used to refuse, up front, an export that could not finish within the host's limit (docs/aws.md,
 * "Exports in AWS: refused up front"). Locally nothing is refused: the local server has no limit.
 */
import { errors } from "./errors";
import type { ExportFilters } from "./export-request";
import type { UsageRollups } from "./usage-rollups";

/**
 * Rows a second of a CSV export through the data API's Lambda handler, as Lambda runs it (1 million
 * rows, Athena's pages of 1000 through the stand-in): bench/results/lambda-export-csv.json, 2026-12-07.
 */
export const MEASURED_LAMBDA_ROWS_PER_SECOND = 7_968;

/**
 * The most rows a streamed export (`POST /api/v1/exports` in AWS, 15 minutes) is let start:
 * 10 minutes of paging (15, less 5 for the query, which Athena runs in well under a minute for a
 * project's few GB, and the 10 s kept for the end marker) at half the measured rate (the margin for a
 * slower Athena page, wider JSON rows and a busier function): 600 s x 3,984 rows/s = 2.39 million,
 * rounded down.
 */
export const STREAMED_EXPORT_MAX_ROWS = 2_000_000;

/**
 * The most rows a dashboard download (AWS) is let prepare: the dashboard API answers within the HTTP
 * API's 29 s, the query included (up to 20 s, typically a few), so ~20 s of paging and upload at half
 * the measured rate is 80,000 rows; 50,000 leaves the S3 upload its share (~24 MB of CSV).
 */
export const DASHBOARD_DOWNLOAD_MAX_ROWS = 50_000;

export interface ExportSize {
  projectId: string;
  start: string;
  end: string;
  filters: ExportFilters;
}

/** The rows the export will hold at most, from the rollups of its days. */
export async function estimateExportRows(
  rollups: Pick<UsageRollups, "query">,
  size: ExportSize,
): Promise<number> {
  const { filters } = size;
  let rows = 0;
  for (const rollup of await rollups.query(size.projectId, size.start, size.end)) {
    if (filters.vendor !== undefined && rollup.vendor !== filters.vendor) continue;
    if (filters.billing_mode !== undefined && rollup.billing_mode !== filters.billing_mode) continue;
    if (filters.model !== undefined && rollup.model !== filters.model) continue;
    rows += rollup.requests;
  }
  return rows;
}

/** What refuses an export too large for the host's limit; its error names the way out. */
export interface ExportSizeLimit {
  maxRows: number;
  /** The error for an export estimated at `rows`. */
  refusal(rows: number, maxRows: number): Error;
}

/** Throws the limit's refusal when the export's estimate is over it. */
export async function checkExportSize(
  rollups: Pick<UsageRollups, "query">,
  limit: ExportSizeLimit,
  size: ExportSize,
): Promise<void> {
  const rows = await estimateExportRows(rollups, size);
  if (rows > limit.maxRows) throw limit.refusal(rows, limit.maxRows);
}

/** The data API's streamed exports in AWS: refused over what 15 minutes stream. */
export const streamedExportLimit = (minutes: number): ExportSizeLimit => ({
  maxRows: STREAMED_EXPORT_MAX_ROWS,
  refusal: (rows, maxRows) => errors.exportTooLarge(rows, maxRows, minutes),
});

/** The dashboard's downloads in AWS: refused over what the dashboard API prepares in its 29 s. */
export const dashboardDownloadLimit: ExportSizeLimit = {
  maxRows: DASHBOARD_DOWNLOAD_MAX_ROWS,
  refusal: (rows, maxRows) => errors.downloadTooLarge(rows, maxRows, STREAMED_EXPORT_MAX_ROWS),
};
