/**
 * Export encodings: one JSON array, or CSV (RFC 4180) with a header row. Rows arrive in batches and
 * leave as chunks of the body, so an export of any size streams in bounded memory.
 */
import type { ErrorBody } from "./errors";
import type { ExportFormat } from "./export-request";
import { decimalUsd } from "./money";
import { RECORD_COLUMNS } from "./record";

export type ExportValue = string | number | boolean | null;

/**
 * The columns of an export, in order: the record's, with `cost_usd` beside `cost_micros` (the same
 * amount in dollars as `decimalUsd` writes it, `"0.000125"`; a JSON string, so no float rounds it). A
 * row is encoded one of two ways: as its JSON object text (keys in this order, timestamps as ISO 8601
 * UTC strings with milliseconds), or as one CSV line. Query engines produce rows already encoded
 * (DuckDB natively, in SQL), so the export only frames them.
 */
export const EXPORT_COLUMNS: readonly string[] = RECORD_COLUMNS.flatMap((c) =>
  c.name === "cost_micros" ? [c.name, "cost_usd"] : [c.name],
);

/** A row's value in an export column: `cost_usd` is derived from `cost_micros`. */
function exportValue(row: Readonly<Record<string, ExportValue>>, name: string): ExportValue {
  if (name !== "cost_usd") return row[name] ?? null;
  const micros = row.cost_micros;
  return typeof micros === "number" ? decimalUsd(micros) : null;
}
/** Columns whose text comes from callers or vendors: the ones formula neutralising applies to. */
export const TEXT_COLUMNS: ReadonlySet<string> = new Set(
  RECORD_COLUMNS.filter((c) => c.kind === "string").map((c) => c.name),
);

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  json: "application/json; charset=utf-8",
  csv: "text/csv; charset=utf-8",
};

export const CSV_HEADER = `${EXPORT_COLUMNS.join(",")}\r\n`;

const NEEDS_QUOTES = /[",\r\n]/;
/** Spreadsheets run a cell starting with one of these as a formula (CSV injection). */
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * One CSV cell. Text that a spreadsheet would run as a formula gets a leading `'` (OWASP's advice), so it
 * shows as the text it is; cells with commas, quotes or line breaks are quoted with quotes doubled.
 * Null is the empty cell.
 */
export function csvCell(value: ExportValue, text: boolean): string {
  if (value === null) return "";
  let cell = String(value);
  if (text && FORMULA_START.test(cell)) cell = `'${cell}`;
  return NEEDS_QUOTES.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell;
}

/** One row's CSV line, CRLF-terminated as RFC 4180 says. */
export function csvLine(row: Readonly<Record<string, ExportValue>>): string {
  return `${EXPORT_COLUMNS.map((name) => csvCell(exportValue(row, name), TEXT_COLUMNS.has(name))).join(",")}\r\n`;
}

/** One row's JSON text. */
export function jsonRow(row: Readonly<Record<string, ExportValue>>): string {
  const ordered: Record<string, ExportValue> = {};
  for (const name of EXPORT_COLUMNS) ordered[name] = exportValue(row, name);
  return JSON.stringify(ordered);
}

/**
 * Frames encoded rows as the export body: one JSON array, or CSV with its header. One chunk per batch;
 * the first chunk is produced only once the first batch arrived, so a query that fails at once fails
 * before any byte is sent. An empty export is `[]` or the header alone.
 */
export async function* frameExport(
  format: ExportFormat,
  batches: AsyncIterable<string[]>,
): AsyncGenerator<string> {
  let opening = format === "json" ? "[" : CSV_HEADER;
  let empty = true;
  for await (const batch of batches) {
    if (batch.length === 0) continue;
    const chunk =
      format === "json" ? `${opening}${empty ? "\n" : ",\n"}${batch.join(",\n")}` : opening + batch.join("");
    opening = "";
    empty = false;
    yield chunk;
  }
  if (format === "json") yield `${opening}${empty ? "]" : "\n]"}\n`;
  else if (opening) yield opening;
}

/**
 * The last bytes of an export cut short after its headers were sent (a failed query, the time limit),
 * so no client takes it for complete: JSON gets the error object as one more element and no closing
 * `]` (the document does not parse), CSV a last line `#error,<type>,<code>,<message>`. Rows end with
 * their own separator, so the marker starts a line.
 */
export function exportFailureMarker(format: ExportFormat, error: ErrorBody): string {
  if (format === "json") return `,\n${JSON.stringify(error)}\n`;
  const { type, code, message } = error.error;
  return `#error,${csvCell(type, false)},${csvCell(code, false)},${csvCell(message, false)}\r\n`;
}

const encoder = new TextEncoder();
const OPEN_BRACKET = 0x5b;

/**
 * `frameExport` for rows already encoded as UTF-8 bytes, back to back: JSON rows each preceded by
 * `,\n`, CSV lines as they are. The same body byte for byte: the array opens with `[` where the
 * first row's comma would be. As with `frameExport`, nothing is produced before the first batch.
 */
export async function* frameEncodedExport(
  format: ExportFormat,
  batches: AsyncIterable<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  let empty = true;
  for await (const batch of batches) {
    if (batch.byteLength === 0) continue;
    if (empty && format === "csv") yield encoder.encode(CSV_HEADER);
    if (empty && format === "json") {
      yield Uint8Array.of(OPEN_BRACKET);
      yield batch.subarray(1);
    } else {
      yield batch;
    }
    empty = false;
  }
  if (format === "json") yield encoder.encode(empty ? "[]\n" : "\n]\n");
  else if (empty) yield encoder.encode(CSV_HEADER);
}
