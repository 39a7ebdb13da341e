/**
 * Usage by API key and by end user: daily counters per (project, day, key) and (project, day, user),
 * kept beside the model rollups (interactions-usage.ts) by the same writes, exactly once per
 * transaction. A privacy deletion never subtracts from them: a deleted user's rows move to rows with
 * a random id and no user id ("deleted user"), so the totals still agree with the ledger
 * (docs/privacy.md). The user id is the record's: at store level `none` that is already its keyed hash.
 */
import { errors } from "./errors";
import { isRefusal, statusClass } from "./interactions";
import { boundedKeyPart, parseUsageRange } from "./interactions-usage";
import { type InteractionRecord, recordDay } from "./record";

export const BREAKDOWN_DIMENSIONS = ["key", "user"] as const;
export type BreakdownDimension = (typeof BREAKDOWN_DIMENSIONS)[number];

export const BREAKDOWN_COUNTERS = [
  "requests",
  "errors",
  /** Of the errors, the calls dmt refused itself (counted from 2026-12; older rows read 0). */
  "refused",
  "input_tokens",
  "output_tokens",
  /** Every call's cost at list price (unpriced calls add 0). */
  "cost_micros",
  /** The part charged to credits: managed calls' cost. */
  "charged_micros",
] as const;
export type BreakdownCounter = (typeof BREAKDOWN_COUNTERS)[number];
export type BreakdownCounters = Record<BreakdownCounter, number>;

/** One row's place: a dimension, a UTC day and the key id or user id (null: a deleted user). */
export interface BreakdownKey {
  dimension: BreakdownDimension;
  day: string;
  id: string | null;
}

const PREFIX: Record<BreakdownDimension, string> = { key: "k#", user: "u#" };
/** Marks a real id in a row id; a deleted user's row has `DELETED` and a random id instead. */
const REAL = "=";
const DELETED = "!";

/**
 * The row's id in the rollups table. It sorts by dimension, then day, so a period is one key range;
 * the id part is bounded (long ids hashed) and tagged, so no user id can pass for a deleted user's row.
 */
export function breakdownRowId(key: BreakdownKey, randomId?: string): string {
  const part = key.id === null ? `${DELETED}${randomId ?? ""}` : `${REAL}${boundedKeyPart(key.id)}`;
  return `${PREFIX[key.dimension]}${key.day}#${part}`;
}

/** The key range of a dimension's rows from `from` to `to` (UTC days, both included). */
export function breakdownRange(dimension: BreakdownDimension, from: string, to: string) {
  // `$` follows `#`: every row of day `to` sorts before it, whatever its id's characters.
  return { low: `${PREFIX[dimension]}${from}#`, high: `${PREFIX[dimension]}${to}$` };
}

/** The rows a record adds to: its key's, and its user's when it names one. */
export function breakdownKeysOf(record: InteractionRecord): BreakdownKey[] {
  const day = recordDay(record);
  const keys: BreakdownKey[] = [{ dimension: "key", day, id: record.key_id }];
  if (record.user_id !== null) keys.push({ dimension: "user", day, id: record.user_id });
  return keys;
}

export function breakdownDeltaOf(record: InteractionRecord): BreakdownCounters {
  const cost = record.cost_micros ?? 0;
  return {
    requests: 1,
    errors: statusClass(record) === "error" ? 1 : 0,
    refused: isRefusal(record) ? 1 : 0,
    input_tokens: record.input_tokens,
    output_tokens: record.output_tokens,
    cost_micros: cost,
    charged_micros: record.billing_mode === "managed" ? cost : 0,
  };
}

/** One stored row: its key and counters. */
export type BreakdownRow = BreakdownKey & BreakdownCounters;

/** A line of the breakdown table: one key or user over the period, or all deleted users together. */
export type BreakdownLine = { id: string | null; deleted: boolean } & BreakdownCounters;

export interface BreakdownReport {
  by: BreakdownDimension;
  from: string;
  to: string;
  /** Dearest first (cost, then requests); at most BREAKDOWN_LINES, the rest summed in `other`. */
  lines: BreakdownLine[];
  /** The lines past the first BREAKDOWN_LINES, summed; absent when there are none. */
  other?: BreakdownCounters & { count: number };
  /** The whole period: the same as the model rollups' sums (deletions included). */
  totals: BreakdownCounters;
}

export const BREAKDOWN_LINES = 50;

const zero = (): BreakdownCounters =>
  Object.fromEntries(BREAKDOWN_COUNTERS.map((c) => [c, 0])) as BreakdownCounters;
const addInto = (sum: BreakdownCounters, row: BreakdownCounters) => {
  for (const c of BREAKDOWN_COUNTERS) sum[c] += row[c];
};

/** The period's lines from its rows: each id summed over the days, deleted users as one line. */
export function breakdownReport(
  rows: readonly BreakdownRow[],
  by: BreakdownDimension,
  from: string,
  to: string,
): BreakdownReport {
  const lines = new Map<string, BreakdownLine>();
  const totals = zero();
  for (const row of rows) {
    if (row.dimension !== by || row.day < from || row.day > to) continue;
    const id = row.id === null ? "deleted" : `=${row.id}`;
    let line = lines.get(id);
    if (!line) {
      line = { id: row.id, deleted: row.id === null, ...zero() };
      lines.set(id, line);
    }
    addInto(line, row);
    addInto(totals, row);
  }
  const sorted = [...lines.values()].sort((a, b) => b.cost_micros - a.cost_micros || b.requests - a.requests);
  const report: BreakdownReport = { by, from, to, lines: sorted.slice(0, BREAKDOWN_LINES), totals };
  const rest = sorted.slice(BREAKDOWN_LINES);
  if (rest.length > 0) {
    const other = { ...zero(), count: rest.length };
    for (const line of rest) addInto(other, line);
    report.other = other;
  }
  return report;
}

/** `by` (key or user), `from` and `to` of `GET .../usage/breakdown`: the Usage page's period. */
export function parseBreakdownQuery(
  params: Record<string, string[]>,
  now: number,
): { by: BreakdownDimension; from: string; to: string } {
  for (const name of Object.keys(params)) {
    if (name !== "by" && name !== "from" && name !== "to") {
      throw errors.invalidField(name, "is not a parameter; use by, from, to.");
    }
  }
  const { by, ...range } = params;
  if (by === undefined) throw errors.missingField("by");
  if (by.length !== 1) throw errors.invalidField("by", "must be given once.");
  const value = by[0] ?? "";
  if (!(BREAKDOWN_DIMENSIONS as readonly string[]).includes(value)) {
    throw errors.invalidField("by", `must be one of ${BREAKDOWN_DIMENSIONS.join(", ")}.`);
  }
  return { by: value as BreakdownDimension, ...parseUsageRange(range, now) };
}
