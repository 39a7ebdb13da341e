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
}

/** The aggregate behind a FOCUS export (core/focus.ts), from both engines' shared SQL. */
export interface UsageGroupSource {
  /** The groups in day, vendor, model, key, billing mode and price version order. */
  usageGroups(query: InteractionQuery): Promise<UsageGroup[]>;
}
