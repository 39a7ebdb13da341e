import type { ExportFilters, ExportFormat } from "./export-request";

/** What to read: one project's rows over a range of UTC days, optionally filtered. */
export interface InteractionQuery {
  projectId: string;
  /** YYYY-MM-DD, both included. */
  start: string;
  end: string;
  filters: ExportFilters;
}

/** The query port: Athena in AWS, DuckDB over the local Parquet folder. */
export interface WarehouseQuery {
  /**
   * The matching rows encoded for `format` (see export-format.ts: JSON object text, or CSV line), batch
   * by batch as the engine produces them. Stopping the iteration early releases the query.
   */
  rows(query: InteractionQuery, format: ExportFormat): AsyncIterable<string[]>;
}

/**
 * A query engine that also hands over the rows already as UTF-8 bytes (DuckDB locally): see
 * `frameEncodedExport`. The export then makes no string per row, which is most of its cost.
 */
export interface EncodedRowSource {
  encodedRows(query: InteractionQuery, format: ExportFormat): AsyncIterable<Uint8Array>;
}

/** One FOCUS row's figures: a project's calls of one UTC day, vendor, model, key, billing mode and price version. */
export interface UsageGroup {
  day: string;
  vendor: string;
  model: string | null;
  keyId: string;
  billingMode: string;
  priceVersion: string | null;
  calls: number;
  /** Calls with a cost (the others were not priced). */
  pricedCalls: number;
  failedCalls: number;
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  /** The priced calls' cost, integer micro-USD. */
  costMicros: number;
  /** Their cost at list price (before a price plan's markup or discount), integer micro-USD. */
  listMicros: number;
  /**
   * Of `calls`, those a privacy deletion removed: counted from erased usage (core/erased-usage.ts),
   * whose figures the others include.
   */
  erasedCalls: number;
}

const GROUP_SUMS = [
  "calls",
  "pricedCalls",
  "failedCalls",
  "inputTokens",
  "outputTokens",
  "cachedInputTokens",
  "cacheWriteTokens",
  "reasoningTokens",
  "costMicros",
  "listMicros",
  "erasedCalls",
] as const;

const groupKey = (g: UsageGroup) =>
  JSON.stringify([g.day, g.vendor, g.model, g.keyId, g.billingMode, g.priceVersion]);

/**
 * The groups of the calls the warehouse holds plus those of erased usage: a group in both is one row
 * with the figures added; the result in day, vendor, model, key, billing mode and price version order.
 */
export function addErasedUsage(groups: readonly UsageGroup[], erased: readonly UsageGroup[]): UsageGroup[] {
  if (erased.length === 0) return [...groups];
  const byKey = new Map(groups.map((g) => [groupKey(g), { ...g }]));
  for (const e of erased) {
    const held = byKey.get(groupKey(e));
    if (!held) {
      byKey.set(groupKey(e), { ...e });
      continue;
    }
    for (const name of GROUP_SUMS) held[name] += e[name];
  }
  const order = (g: UsageGroup) => [
    g.day,
    g.vendor,
    g.model ?? "",
    g.keyId,
    g.billingMode,
    g.priceVersion ?? "",
  ];
  return [...byKey.values()].sort((a, b) => {
    const [x, y] = [order(a), order(b)];
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i]) return (x[i] as string) < (y[i] as string) ? -1 : 1;
    }
    return 0;
  });
}

/** The aggregate behind a FOCUS export (core/focus.ts), from both engines' shared SQL. */
export interface UsageGroupSource {
  /** The groups in day, vendor, model, key, billing mode and price version order. */
  usageGroups(query: InteractionQuery): Promise<UsageGroup[]>;
}
