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
