import { parquetWriteBuffer, type SchemaElement } from "hyparquet-writer";
import {
  type ColumnKind,
  type InteractionRecord,
  RECORD_COLUMNS,
  RECORD_SCHEMA_VERSION,
} from "../core/record";

/** Parquet physical and logical types of each column kind. Timestamps are TIMESTAMP(MILLIS, UTC). */
const PARQUET_TYPES: Record<ColumnKind, Omit<SchemaElement, "name" | "repetition_type">> = {
  string: { type: "BYTE_ARRAY", converted_type: "UTF8" },
  int32: { type: "INT32" },
  int64: { type: "INT64" },
  double: { type: "DOUBLE" },
  boolean: { type: "BOOLEAN" },
  timestamp: {
    type: "INT64",
    converted_type: "TIMESTAMP_MILLIS",
    logical_type: { type: "TIMESTAMP", isAdjustedToUTC: true, unit: "MILLIS" },
  },
};

const SCHEMA: SchemaElement[] = [
  { name: "root", num_children: RECORD_COLUMNS.length },
  ...RECORD_COLUMNS.map(
    (c): SchemaElement => ({
      name: c.name,
      ...PARQUET_TYPES[c.kind],
      repetition_type: c.nullable ? "OPTIONAL" : "REQUIRED",
    }),
  ),
];

/**
 * Min/max statistics only where a filter can use them to skip a file: the export filters and the time.
 * Elsewhere they cost a quarter of the encoding time and prune nothing.
 */
const PRUNING = new Set<string>(["started_at", "model", "user_id", "vendor", "status_code", "billing_mode"]);
/** Columns whose values are (nearly) all distinct: a dictionary never pays, so they are written plain. */
const DISTINCT = new Set<string>(["transaction_id", "request_id", "request_body", "response_body"]);

/** One Parquet file (snappy, one row group) holding the records in the order given. */
export function encodeRecords(records: readonly InteractionRecord[]): Uint8Array {
  const columnData = RECORD_COLUMNS.map((c) => {
    const values = records.map((r) => r[c.name]);
    return {
      name: c.name,
      data: c.kind === "int64" ? values.map((v) => (v === null ? null : BigInt(v as number))) : values,
      statistics: PRUNING.has(c.name),
      ...(DISTINCT.has(c.name) ? { encoding: "PLAIN" as const } : {}),
    };
  });
  const buffer = parquetWriteBuffer({
    columnData,
    schema: SCHEMA,
    codec: "SNAPPY",
    rowGroupSize: Math.max(records.length, 1),
    kvMetadata: [{ key: "dmt.schema_version", value: String(RECORD_SCHEMA_VERSION) }],
    createdBy: "dmt warehouse",
  });
  return new Uint8Array(buffer);
}
