/**
 * Erased usage files (core/erased-usage.ts) in Parquet: a few rows per file, written with
 * hyparquet-writer's generic writer (the record codec's hand-made pages are for the consumer's volume).
 * Sums are INT64 (Athena and DuckDB read them as BIGINT); the grouping is UTF8 text.
 */
import { parquetReadObjects } from "hyparquet";
import { parquetWriteBuffer } from "hyparquet-writer";
import {
  ERASED_USAGE_GROUPING,
  ERASED_USAGE_SUMS,
  type ErasedUsageCodec,
  type ErasedUsageRow,
} from "../../core/erased-usage";

function encode(rows: readonly ErasedUsageRow[]): Uint8Array {
  const buffer = parquetWriteBuffer({
    columnData: [
      ...ERASED_USAGE_GROUPING.map((name) => ({
        name,
        data: rows.map((r) => r[name]),
        type: "STRING" as const,
        nullable: name === "model" || name === "price_version",
      })),
      ...ERASED_USAGE_SUMS.map((name) => ({
        name,
        data: rows.map((r) => BigInt(r[name])),
        type: "INT64" as const,
        nullable: false,
      })),
    ],
  });
  return new Uint8Array(buffer);
}

async function decode(bytes: Uint8Array): Promise<ErasedUsageRow[]> {
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  const rows = (await parquetReadObjects({ file })) as Record<string, unknown>[];
  return rows.map((row) => {
    const out: Record<string, unknown> = {};
    for (const name of ERASED_USAGE_GROUPING) out[name] = row[name] ?? null;
    for (const name of ERASED_USAGE_SUMS) out[name] = Number(row[name] as bigint);
    return out as unknown as ErasedUsageRow;
  });
}

export const erasedUsageCodec: ErasedUsageCodec = { encode, decode };
