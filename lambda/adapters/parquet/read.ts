import { parquetReadObjects } from "hyparquet";
import { type ColumnKind, type InteractionRecord, RECORD_COLUMNS } from "../../core/record";

/** hyparquet's values back to the record's: timestamps arrive as Date, INT64 as bigint. */
const FROM_PARQUET: Partial<Record<ColumnKind, (value: unknown) => unknown>> = {
  timestamp: (v) => (v as Date).getTime(),
  int64: (v) => Number(v as bigint),
};

const CONVERTED = RECORD_COLUMNS.flatMap((c) => {
  const convert = FROM_PARQUET[c.kind];
  return convert ? [[c.name, convert] as const] : [];
});

/**
 * The records of a warehouse file (lambda/adapters/parquet/codec.ts wrote it), in file order, as the
 * writer took them: re-encoding the ones a deletion keeps gives the same values, bodies byte for byte.
 */
export async function decodeRecords(bytes: Uint8Array): Promise<InteractionRecord[]> {
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const rows = await parquetReadObjects({ file });
  for (const row of rows) {
    for (const [name, convert] of CONVERTED) {
      const value = row[name];
      row[name] = value === null || value === undefined ? null : convert(value);
    }
    // A column an older schema lacked reads as absent: the record holds null there.
    for (const c of RECORD_COLUMNS) row[c.name] ??= null;
  }
  return rows as InteractionRecord[];
}
