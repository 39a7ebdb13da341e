/**
 * Erased usage: what a privacy deletion leaves of the calls it removes (docs/deletion.md, "Erased
 * usage"). The money and the counts stay, summed per project, UTC day, key, vendor, model, billing mode
 * and price version; nothing that names a person or a call does (no user id, transaction id, request
 * id, time of day, body or user agent). FOCUS exports add these rows to what the warehouse still holds,
 * so their totals keep matching the credit statement after a deletion.
 *
 * Files: `erased-usage/project=<id>/dt=<day>/<name>.parquet` in the warehouse bucket (folder locally),
 * the same partitions as the interaction records, so retention removes them with the day they belong
 * to; in AWS the Glue table `erased_usage` describes them.
 */
import { createHash } from "node:crypto";
import type { InteractionRecord } from "./record";

export const ERASED_USAGE_PREFIX = "erased-usage/";
/** The Glue table over `erased-usage/` (AWS). */
export const ERASED_USAGE_TABLE = "erased_usage";

export function erasedUsagePartition(projectId: string, day: string): string {
  return `${ERASED_USAGE_PREFIX}project=${projectId}/dt=${day}/`;
}

/**
 * A file's key from what it sums: the same source (a warehouse file at one version, a batch's dropped
 * records) always gives the same key, so a step that runs again overwrites its file instead of adding
 * the same calls twice. `source` never appears in the key, only its hash.
 */
export function erasedUsageKey(projectId: string, day: string, requestId: string, source: string): string {
  const hash = createHash("sha256").update(source).digest("hex").slice(0, 32);
  return `${erasedUsagePartition(projectId, day)}${requestId}-${hash}.parquet`;
}

/** One row: calls of one day, key, vendor, model, billing mode and price version that were erased. */
export interface ErasedUsageRow {
  key_id: string;
  vendor: string;
  model: string | null;
  billing_mode: string;
  price_version: string | null;
  calls: number;
  /** Calls that had a cost (the others were not priced). */
  priced_calls: number;
  failed_calls: number;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  cache_write_tokens: number;
  reasoning_tokens: number;
  /** Integer micro-USD, as `cost_micros` (charged for managed calls, list price for byok and dual). */
  cost_micros: number;
  /** The same calls at list price (a price plan's `list_micros`, else their cost). */
  list_micros: number;
}

/** The file's columns, in order: the grouping first, then the sums (all int64). */
export const ERASED_USAGE_GROUPING = ["key_id", "vendor", "model", "billing_mode", "price_version"] as const;
export const ERASED_USAGE_SUMS = [
  "calls",
  "priced_calls",
  "failed_calls",
  "input_tokens",
  "output_tokens",
  "cached_input_tokens",
  "cache_write_tokens",
  "reasoning_tokens",
  "cost_micros",
  "list_micros",
] as const;

/** What a Glue table needs to describe the file. */
export function erasedUsageGlueColumns(): { name: string; type: string; comment: string }[] {
  return [
    ...ERASED_USAGE_GROUPING.map((name) => ({ name, type: "string", comment: `the erased calls' ${name}` })),
    ...ERASED_USAGE_SUMS.map((name) => ({
      name,
      type: "bigint",
      comment: `sum over the erased calls: ${name}`,
    })),
  ];
}

/** A call's list amount: a price plan's `list_micros` in the breakdown, else its cost (as the FOCUS SQL reads it). */
function listMicros(record: Pick<InteractionRecord, "cost_micros" | "cost_breakdown">): number {
  if (record.cost_breakdown) {
    try {
      const list = (JSON.parse(record.cost_breakdown) as { list_micros?: unknown }).list_micros;
      if (typeof list === "number" && Number.isSafeInteger(list)) return list;
      if (typeof list === "string" && /^-?\d+$/.test(list)) return Number(list);
    } catch {
      // A breakdown that is not JSON counts as no list amount: the cost is.
    }
  }
  return record.cost_micros ?? 0;
}

/** The removed records summed: per UTC day, the rows of that day's file. */
export function erasedUsageOf(
  records: readonly InteractionRecord[],
  dayOf: (record: InteractionRecord) => string,
): Map<string, ErasedUsageRow[]> {
  const byDay = new Map<string, Map<string, ErasedUsageRow>>();
  for (const r of records) {
    const day = dayOf(r);
    let groups = byDay.get(day);
    if (!groups) {
      groups = new Map();
      byDay.set(day, groups);
    }
    const id = JSON.stringify([r.key_id, r.vendor, r.model, r.billing_mode, r.price_version]);
    let row = groups.get(id);
    if (!row) {
      row = {
        key_id: r.key_id,
        vendor: r.vendor,
        model: r.model,
        billing_mode: r.billing_mode,
        price_version: r.price_version,
        calls: 0,
        priced_calls: 0,
        failed_calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        cached_input_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        cost_micros: 0,
        list_micros: 0,
      };
      groups.set(id, row);
    }
    row.calls++;
    if (r.cost_micros !== null) row.priced_calls++;
    // The FOCUS aggregate's rule (adapters/sql/export-query.ts): an error status or an error type.
    if (r.status_code >= 400 || r.error_type !== null) row.failed_calls++;
    row.input_tokens += r.input_tokens;
    row.output_tokens += r.output_tokens;
    row.cached_input_tokens += r.cached_input_tokens;
    row.cache_write_tokens += r.cache_write_tokens;
    row.reasoning_tokens += r.reasoning_tokens;
    row.cost_micros += r.cost_micros ?? 0;
    row.list_micros += listMicros(r);
  }
  return new Map([...byDay].map(([day, groups]) => [day, [...groups.values()]]));
}

/** Erased usage files: Parquet (`adapters/parquet/erased-usage.ts`). */
export interface ErasedUsageCodec {
  encode(rows: readonly ErasedUsageRow[]): Uint8Array;
  decode(bytes: Uint8Array): Promise<ErasedUsageRow[]>;
}
