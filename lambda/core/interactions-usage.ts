/**
 * Daily rollups: per project, UTC day, vendor, billing mode and model, the sums of the interactions'
 * figures. The consumer adds each record once (adapters/dynamodb/interactions.ts holds the protocol);
 * deletion and retention leave them as they are, so usage keeps agreeing with the credit ledger. The
 * Usage page reads a few dozen rollups instead of the warehouse.
 */
import { createHash } from "node:crypto";
import { BILLING_MODES, type BillingMode } from "./billing-mode";
import { errors } from "./errors";
import { DAY_MS, dayOf, isRefusal, parseDay, startOfDay, statusClass } from "./interactions";
import { type InteractionRecord, recordDay } from "./record";
import type { VendorName } from "./vendor-names";

export const ROLLUP_COUNTERS = [
  "requests",
  "errors",
  /** Of the errors, the calls dmt refused itself (counted from 2026-12; older rollups read 0). */
  "refused",
  "input_tokens",
  "output_tokens",
  "cached_input_tokens",
  "cost_micros",
  /** Requests without a price (a model missing from the price list): their cost is not in cost_micros. */
  "unpriced",
  "latency_ms",
] as const;
export type RollupCounter = (typeof ROLLUP_COUNTERS)[number];
export type RollupCounters = Record<RollupCounter, number>;

export interface RollupKey {
  day: string;
  vendor: VendorName;
  billing_mode: BillingMode;
  model: string | null;
}

export type Rollup = RollupKey & RollupCounters;

export function rollupKeyOf(record: InteractionRecord): RollupKey {
  return {
    day: recordDay(record),
    // parseRecord admitted only these values; the record type spells them as strings.
    vendor: record.vendor as VendorName,
    billing_mode: record.billing_mode as BillingMode,
    model: record.model,
  };
}

/**
 * A store key for free text (models, user ids): the text while it is short, else its hash, so that a
 * key always fits the store's limits whatever a client sent.
 */
export function boundedKeyPart(text: string): string {
  return text.length <= 200 ? text : `sha256:${createHash("sha256").update(text, "utf8").digest("hex")}`;
}

/** The rollup's id within its project; it sorts by day first, so a day range is one key range. */
export function rollupId(key: RollupKey): string {
  return `${key.day}#${key.vendor}#${key.billing_mode}#${key.model === null ? "" : boundedKeyPart(key.model)}`;
}

export function deltaOf(record: InteractionRecord): RollupCounters {
  return {
    requests: 1,
    errors: statusClass(record) === "error" ? 1 : 0,
    refused: isRefusal(record) ? 1 : 0,
    input_tokens: record.input_tokens,
    output_tokens: record.output_tokens,
    cached_input_tokens: record.cached_input_tokens,
    cost_micros: record.cost_micros ?? 0,
    unpriced: record.cost_micros === null ? 1 : 0,
    latency_ms: record.latency_ms,
  };
}

export function zeroCounters(): RollupCounters {
  return Object.fromEntries(ROLLUP_COUNTERS.map((c) => [c, 0])) as RollupCounters;
}

/** The sum of counters. */
export function sumCounters(items: readonly RollupCounters[]): RollupCounters {
  const sum = zeroCounters();
  for (const item of items) for (const c of ROLLUP_COUNTERS) sum[c] += item[c];
  return sum;
}

/** Records grouped by rollup: one counter update per group. */
export function groupByRollup<R extends InteractionRecord>(
  records: readonly R[],
): Map<string, { key: RollupKey; records: R[] }> {
  const groups = new Map<string, { key: RollupKey; records: R[] }>();
  for (const record of records) {
    const key = rollupKeyOf(record);
    const id = rollupId(key);
    const group = groups.get(id);
    if (group) group.records.push(record);
    else groups.set(id, { key, records: [record] });
  }
  return groups;
}

/** Longest span the Usage page reads at once, both ends included. */
export const USAGE_MAX_DAYS = 366;
export const USAGE_DEFAULT_DAYS = 30;

/** `from`/`to` (UTC days) of `GET .../usage`; by default the last 30 days up to today. */
export function parseUsageRange(params: Record<string, string[]>, now: number): { from: string; to: string } {
  for (const [name, values] of Object.entries(params)) {
    if (name !== "from" && name !== "to")
      throw errors.invalidField(name, "is not a parameter; use from, to.");
    if (values.length !== 1) throw errors.invalidField(name, "must be given once.");
  }
  const to = params.to?.[0] === undefined ? startOfDay(now) : parseDay(params.to[0], "to");
  const from =
    params.from?.[0] === undefined
      ? to - (USAGE_DEFAULT_DAYS - 1) * DAY_MS
      : parseDay(params.from[0], "from");
  if (from > to) throw errors.invalidField("from", `${dayOf(from)} is after to ${dayOf(to)}.`);
  const days = (to - from) / DAY_MS + 1;
  if (days > USAGE_MAX_DAYS) {
    throw errors.invalidField(
      "from",
      `the range covers ${days} days; at most ${USAGE_MAX_DAYS} are shown at once.`,
    );
  }
  return { from: dayOf(from), to: dayOf(to) };
}

/** One line of the charts: a vendor's model, one value per day of the report. */
export interface UsageSeries {
  vendor: VendorName;
  model: string | null;
  requests: number[];
  errors: number[];
  /** Of the errors, the calls dmt refused itself. */
  refused: number[];
  input_tokens: number[];
  output_tokens: number[];
  cost_micros: number[];
}

export interface UsageReport {
  from: string;
  to: string;
  days: string[];
  /** Dearest first (by cost over the range, then requests). */
  series: UsageSeries[];
  /** The range's sums per billing mode: managed cost is what credits paid, the others list prices. */
  totals: Record<BillingMode, RollupCounters>;
}

/** The Usage page's figures from rollups: every day of the range present, zero where nothing ran. */
export function usageReport(rollups: readonly Rollup[], from: string, to: string): UsageReport {
  const start = parseDay(from, "from");
  const count = (parseDay(to, "to") - start) / DAY_MS + 1;
  const days = Array.from({ length: count }, (_, i) => dayOf(start + i * DAY_MS));
  const index = new Map(days.map((d, i) => [d, i]));
  const series = new Map<string, UsageSeries>();
  const totals = Object.fromEntries(BILLING_MODES.map((m) => [m, zeroCounters()])) as UsageReport["totals"];
  for (const rollup of rollups) {
    const at = index.get(rollup.day);
    if (at === undefined) continue;
    const id = JSON.stringify([rollup.vendor, rollup.model]);
    let line = series.get(id);
    if (!line) {
      const zeros = () => days.map(() => 0);
      line = {
        vendor: rollup.vendor,
        model: rollup.model,
        requests: zeros(),
        errors: zeros(),
        refused: zeros(),
        input_tokens: zeros(),
        output_tokens: zeros(),
        cost_micros: zeros(),
      };
      series.set(id, line);
    }
    for (const field of [
      "requests",
      "errors",
      "refused",
      "input_tokens",
      "output_tokens",
      "cost_micros",
    ] as const) {
      line[field][at] = (line[field][at] ?? 0) + rollup[field];
    }
    const total = totals[rollup.billing_mode];
    for (const c of ROLLUP_COUNTERS) total[c] += rollup[c];
  }
  const total = (values: number[]) => values.reduce((a, b) => a + b, 0);
  return {
    from,
    to,
    days,
    series: [...series.values()].sort(
      (a, b) => total(b.cost_micros) - total(a.cost_micros) || total(b.requests) - total(a.requests),
    ),
    totals,
  };
}
