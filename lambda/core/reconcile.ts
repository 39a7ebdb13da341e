/**
 * Reconciliation with a vendor: our managed calls' tokens per model and UTC day, set against the
 * vendor's own usage report for the organization whose key serves them. Pure: the report is fetched
 * by an adapter (`VendorUsageReport`), our side is read through the warehouse query port.
 *
 * The reports (docs/metering.md cites them):
 * - OpenAI: `GET /v1/organization/usage/completions?start_time&end_time&bucket_width=1d&group_by=model`,
 *   `Authorization: Bearer <admin key>`; a page `{ data: [{ start_time, results: [{ model,
 *   input_tokens, output_tokens, input_cached_tokens }] }], has_more, next_page }`. `input_tokens`
 *   includes the cached ones, as ours does.
 * - Anthropic: `GET /v1/organizations/usage_report/messages?starting_at&ending_at&bucket_width=1d&group_by[]=model`,
 *   `x-api-key: <admin key>`, `anthropic-version`; a page `{ data: [{ starting_at, results: [{ model,
 *   uncached_input_tokens, cache_read_input_tokens, cache_creation: { ephemeral_5m_input_tokens,
 *   ephemeral_1h_input_tokens }, output_tokens }] }], has_more, next_page }`. Their input is the sum, as
 *   ours is (core/usage.ts).
 */

export const RECONCILED_VENDORS = ["openai", "anthropic"] as const;
export type ReconciledVendor = (typeof RECONCILED_VENDORS)[number];

/** The endpoints (paths under the vendor prefix) each report counts. */
const REPORTED_ENDPOINTS: Record<ReconciledVendor, ReadonlySet<string>> = {
  openai: new Set(["/v1/chat/completions", "/v1/responses", "/v1/completions"]),
  anthropic: new Set(["/v1/messages"]),
};

/** The admin key each report wants, by its environment variable and its prefix. */
export const ADMIN_KEYS: Record<ReconciledVendor, { env: string; prefix: string }> = {
  openai: { env: "OPENAI_ADMIN_KEY", prefix: "sk-admin-" },
  anthropic: { env: "ANTHROPIC_ADMIN_KEY", prefix: "sk-ant-admin" },
};

export interface TokenCounts {
  input: number;
  output: number;
  /** Of `input`, tokens read from a prompt cache. */
  cached: number;
}

export interface DailyModelUsage extends TokenCounts {
  /** UTC day, YYYY-MM-DD. */
  day: string;
  model: string;
}

/** Days, both included. */
export interface DayRange {
  from: string;
  to: string;
}

/** The vendor's usage report, one page after another (an adapter over HTTP). */
export interface VendorUsageReport {
  daily(vendor: ReconciledVendor, range: DayRange): Promise<DailyModelUsage[]>;
}

export interface Drift {
  day: string;
  model: string;
  ours: TokenCounts;
  theirs: TokenCounts;
  /** Theirs less ours: positive when the vendor counts more than we do. */
  difference: TokenCounts;
}

/** A bad argument, worded for the command line. */
export class ReconcileInputError extends Error {
  override name = "ReconcileInputError";
}

const DAY = /^\d{4}-\d{2}-\d{2}$/;
const DAY_MS = 86_400_000;
/** Longest range one command reconciles: a report's day buckets per page are capped at 31. */
export const MAX_RANGE_DAYS = 366;

function parseDay(name: string, value: string): number {
  const time = DAY.test(value) ? Date.parse(`${value}T00:00:00Z`) : Number.NaN;
  // Date.parse rolls 2026-02-30 over to March: a real day prints back the same.
  if (Number.isNaN(time) || new Date(time).toISOString().slice(0, 10) !== value) {
    throw new ReconcileInputError(`--${name} must be a day like 2026-01-31, not '${value}'`);
  }
  return time;
}

export function parseVendor(value: string): ReconciledVendor {
  if (!(RECONCILED_VENDORS as readonly string[]).includes(value)) {
    throw new ReconcileInputError(`--vendor must be one of ${RECONCILED_VENDORS.join(", ")}, not '${value}'`);
  }
  return value as ReconciledVendor;
}

export function parseDayRange(from: string, to: string): DayRange {
  const start = parseDay("from", from);
  const end = parseDay("to", to);
  if (start > end) throw new ReconcileInputError(`--from ${from} is after --to ${to}`);
  if ((end - start) / DAY_MS + 1 > MAX_RANGE_DAYS) {
    throw new ReconcileInputError(`reconcile at most ${MAX_RANGE_DAYS} days at a time`);
  }
  return { from, to };
}

const nextDay = (day: string) => new Date(Date.parse(`${day}T00:00:00Z`) + DAY_MS).toISOString().slice(0, 10);

/** The first page's request (`page` the cursor of the next ones); the key is added by the adapter. */
export function usageReportUrl(
  vendor: ReconciledVendor,
  upstream: string,
  range: DayRange,
  page?: string,
): string {
  const base = upstream.replace(/\/+$/, "");
  const params = new URLSearchParams();
  if (vendor === "openai") {
    params.set("start_time", String(Date.parse(`${range.from}T00:00:00Z`) / 1000));
    params.set("end_time", String(Date.parse(`${nextDay(range.to)}T00:00:00Z`) / 1000));
    params.set("bucket_width", "1d");
    params.append("group_by", "model");
    params.set("limit", "31");
  } else {
    params.set("starting_at", `${range.from}T00:00:00Z`);
    params.set("ending_at", `${nextDay(range.to)}T00:00:00Z`);
    params.set("bucket_width", "1d");
    params.append("group_by[]", "model");
    params.set("limit", "31");
  }
  if (page !== undefined) params.set("page", page);
  const path =
    vendor === "openai" ? "/v1/organization/usage/completions" : "/v1/organizations/usage_report/messages";
  return `${base}${path}?${params}`;
}

/** The headers that carry the admin key (and Anthropic's version). */
export function usageReportHeaders(vendor: ReconciledVendor, adminKey: string): Record<string, string> {
  return vendor === "openai"
    ? { authorization: `Bearer ${adminKey}` }
    : { "x-api-key": adminKey, "anthropic-version": "2023-06-01" };
}

const num = (value: unknown): number => (typeof value === "number" && Number.isFinite(value) ? value : 0);
const obj = (value: unknown): Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

export class UsageReportFormatError extends Error {
  override name = "UsageReportFormatError";
}

/** One page of a report: its rows per day and model, and the cursor of the next page if there is one. */
export function parseUsageReportPage(
  vendor: ReconciledVendor,
  page: unknown,
): { rows: DailyModelUsage[]; nextPage?: string } {
  const body = obj(page);
  if (!Array.isArray(body.data)) {
    throw new UsageReportFormatError(`${vendor} usage report: the answer has no data array`);
  }
  const rows: DailyModelUsage[] = [];
  for (const bucket of body.data.map(obj)) {
    const day =
      vendor === "openai"
        ? new Date(num(bucket.start_time) * 1000).toISOString().slice(0, 10)
        : String(bucket.starting_at ?? "").slice(0, 10);
    if (!DAY.test(day)) throw new UsageReportFormatError(`${vendor} usage report: a bucket without a start`);
    for (const result of (Array.isArray(bucket.results) ? bucket.results : []).map(obj)) {
      const model = typeof result.model === "string" ? result.model : "(unknown)";
      if (vendor === "openai") {
        rows.push({
          day,
          model,
          input: num(result.input_tokens),
          output: num(result.output_tokens),
          cached: num(result.input_cached_tokens),
        });
      } else {
        const creation = obj(result.cache_creation);
        const cached = num(result.cache_read_input_tokens);
        rows.push({
          day,
          model,
          input:
            num(result.uncached_input_tokens) +
            cached +
            num(creation.ephemeral_5m_input_tokens) +
            num(creation.ephemeral_1h_input_tokens),
          output: num(result.output_tokens),
          cached,
        });
      }
    }
  }
  const more = body.has_more === true && typeof body.next_page === "string" && body.next_page !== "";
  return more ? { rows, nextPage: body.next_page as string } : { rows };
}

/** The fields of an exported record (a JSON row) that reconciliation reads. */
export interface RecordTokens {
  vendor: string;
  endpoint: string;
  model: string | null;
  billing_mode: string;
  started_at: string;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
}

/** Whether a record is one the vendor's report counts: a managed call of the reported endpoints. */
export function isReported(vendor: ReconciledVendor, record: RecordTokens): boolean {
  return (
    record.vendor === vendor &&
    record.billing_mode === "managed" &&
    REPORTED_ENDPOINTS[vendor].has(record.endpoint)
  );
}

export function recordUsage(record: RecordTokens): DailyModelUsage {
  return {
    day: record.started_at.slice(0, 10),
    model: record.model ?? "(unknown)",
    input: record.input_tokens,
    output: record.output_tokens,
    cached: record.cached_input_tokens,
  };
}

const keyOf = (row: { day: string; model: string }) => `${row.day}\u0000${row.model}`;

/** Adds a row into sums per day and model (the row is copied, never changed). */
export function addUsage(sums: Map<string, DailyModelUsage>, row: DailyModelUsage): void {
  const sum = sums.get(keyOf(row));
  if (sum) {
    sum.input += row.input;
    sum.output += row.output;
    sum.cached += row.cached;
  } else sums.set(keyOf(row), { ...row });
}

function totals(rows: DailyModelUsage[]): Map<string, DailyModelUsage> {
  const sums = new Map<string, DailyModelUsage>();
  for (const row of rows) addUsage(sums, row);
  return sums;
}

const ZERO: TokenCounts = { input: 0, output: 0, cached: 0 };
const counts = (row: TokenCounts | undefined): TokenCounts =>
  row ? { input: row.input, output: row.output, cached: row.cached } : { ...ZERO };

/** Every day and model either side has, in order, with both sides' totals and their difference. */
export function compareUsage(ours: DailyModelUsage[], theirs: DailyModelUsage[]): Drift[] {
  const a = totals(ours);
  const b = totals(theirs);
  const keys = [...new Set([...a.keys(), ...b.keys()])].sort();
  return keys.map((key) => {
    const row = (a.get(key) ?? b.get(key)) as DailyModelUsage;
    const mine = counts(a.get(key));
    const vendor = counts(b.get(key));
    return {
      day: row.day,
      model: row.model,
      ours: mine,
      theirs: vendor,
      difference: {
        input: vendor.input - mine.input,
        output: vendor.output - mine.output,
        cached: vendor.cached - mine.cached,
      },
    };
  });
}

export const hasDrift = (drift: Drift) =>
  drift.difference.input !== 0 || drift.difference.output !== 0 || drift.difference.cached !== 0;
