import {
  type DailyModelUsage,
  type DayRange,
  parseUsageReportPage,
  type ReconciledVendor,
  usageReportHeaders,
  usageReportUrl,
  type VendorUsageReport,
} from "../../core/reconcile";

/** Pages followed at most: a report of a year's days and many models stays far below it. */
const MAX_PAGES = 1000;

export class UsageReportError extends Error {
  override name = "UsageReportError";
}

/**
 * The vendor's usage report over HTTP (`fetch`), page by page. The admin key goes in a header and
 * nowhere else: an error names the vendor, the status and the vendor's message with the key blanked.
 */
export class HttpUsageReport implements VendorUsageReport {
  constructor(
    private readonly upstream: string,
    private readonly adminKey: string,
  ) {}

  async daily(vendor: ReconciledVendor, range: DayRange): Promise<DailyModelUsage[]> {
    const key = this.adminKey;
    const hide = (text: string) => text.split(key).join("[admin key]");
    const rows: DailyModelUsage[] = [];
    let page: string | undefined;
    for (let pages = 0; pages < MAX_PAGES; pages++) {
      const url = usageReportUrl(vendor, this.upstream, range, page);
      let response: Response;
      try {
        response = await fetch(url, { headers: usageReportHeaders(vendor, key) });
      } catch (err) {
        const cause = (err as { cause?: { message?: string } }).cause?.message ?? (err as Error).message;
        throw new UsageReportError(
          hide(`${vendor} usage report: ${new URL(url).origin} unreachable (${cause})`),
        );
      }
      const text = await response.text();
      if (!response.ok) {
        throw new UsageReportError(
          hide(`${vendor} usage report: HTTP ${response.status}: ${vendorMessage(text)}`),
        );
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        throw new UsageReportError(`${vendor} usage report: the answer is not JSON`);
      }
      const parsed = parseUsageReportPage(vendor, body);
      rows.push(...parsed.rows);
      if (parsed.nextPage === undefined) return rows;
      page = parsed.nextPage;
    }
    throw new UsageReportError(`${vendor} usage report: more than ${MAX_PAGES} pages`);
  }
}

/** The vendor's error message (both put it at `error.message`), one line, bounded. */
function vendorMessage(text: string): string {
  let message: unknown;
  try {
    message = (JSON.parse(text) as { error?: { message?: unknown } }).error?.message;
  } catch {
    message = undefined;
  }
  const line = (typeof message === "string" ? message : text).replace(/\s+/g, " ").trim();
  return line.length > 300 ? `${line.slice(0, 300)}...` : line || "(no message)";
}
