/**
 * Interaction records to Parquet: one file, one row group, data pages v2, snappy. Text is
 * dictionary-encoded but for the nearly distinct columns; numbers and booleans are plain.
 *
 * The pages of the record schema's flat columns are assembled here; hyparquet-writer's own pieces
 * (its `src/*.js` exports) write the page headers, the footer (thrift), the run-length/bit-packed
 * levels and the snappy blocks. Its generic column writer, given the same columns, took 1.8 times as
 * long and left three times the garbage (a view, a copy or an iterator object per value), more than
 * the consumer's throughput could afford (bench/warehouse.bench.ts).
 */
import {
  type ColumnChunk,
  type PageHeader,
  parquetReadObjects,
  type SchemaElement,
  type Statistics,
} from "hyparquet";
import { ByteWriter } from "hyparquet-writer";
import { writePageHeader } from "hyparquet-writer/src/datapage.js";
import { writeRleBitPackedHybrid } from "hyparquet-writer/src/encoding.js";
import { writeMetadata } from "hyparquet-writer/src/metadata.js";
import { snappyCompress } from "hyparquet-writer/src/snappy.js";
import {
  type ColumnDefinition,
  type ColumnKind,
  type InteractionRecord,
  RECORD_COLUMNS,
  RECORD_SCHEMA_VERSION,
  type RecordColumnName,
} from "../../core/record";
import type { RecordCodec } from "../../core/record-codec";

/** Parquet physical and logical types of each column kind. Timestamps are TIMESTAMP(MILLIS, UTC). */
const PARQUET_TYPES = {
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
} as const satisfies Record<ColumnKind, Omit<SchemaElement, "name" | "repetition_type">>;

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

/** Min/max statistics only where a filter can use them to skip a file: the export filters and the time. */
const PRUNING: ReadonlySet<string> = new Set([
  "started_at",
  "model",
  "user_id",
  "vendor",
  "status_code",
  "billing_mode",
] satisfies RecordColumnName[]);
/**
 * Text columns whose values are (nearly) all distinct, written plain. The other text columns are
 * dictionary-encoded: a few values (vendor, model, key, user) repeated row after row.
 */
const DISTINCT: ReadonlySet<string> = new Set([
  "transaction_id",
  "request_id",
  "vendor_request_id",
  "request_body",
  "response_body",
] satisfies RecordColumnName[]);
/** A plain data page ends after this many bytes of values, so a reader never needs a huge page. */
const PAGE_BYTES = 1 << 20;
const MAGIC = 0x31524150; // "PAR1", little-endian

/**
 * Copies every record's fields into one array per column, in one pass. The loop is generated from the
 * schema so each field is read with a constant key, which V8 reads straight off the record; a loop
 * over the names (`record[name]`) looks each field up and takes five times as long.
 */
const fillColumns = new Function(
  "records",
  "columns",
  `for (let row = 0; row < records.length; row++) {
    const record = records[row];
    ${RECORD_COLUMNS.map((c, i) => `columns[${i}][row] = record[${JSON.stringify(c.name)}];`).join("\n")}
  }`,
) as (records: readonly InteractionRecord[], columns: unknown[][]) => void;

/** PLAIN-encoded values of one page at a time, in one buffer that grows as needed and is reused. */
class PlainValues {
  private bytes = Buffer.allocUnsafe(64 * 1024);
  length = 0;
  private bits = 0;
  private bitCount = 0;

  add(kind: ColumnKind, value: unknown): void {
    switch (kind) {
      case "string": {
        const text = value as string;
        this.reserve(4 + 3 * text.length); // a UTF-16 unit is at most 3 UTF-8 bytes
        const size = this.bytes.write(text, this.length + 4);
        this.bytes.writeUInt32LE(size, this.length);
        this.length += 4 + size;
        return;
      }
      case "int32":
        this.reserve(4);
        this.length = this.bytes.writeInt32LE(value as number, this.length);
        return;
      case "int64":
      case "timestamp": {
        // Record values are non-negative safe integers: two 32-bit halves, no BigInt.
        const n = value as number;
        this.reserve(8);
        this.bytes.writeUInt32LE(n % 0x1_0000_0000, this.length);
        this.length = this.bytes.writeUInt32LE(Math.floor(n / 0x1_0000_0000), this.length + 4);
        return;
      }
      case "double":
        this.reserve(8);
        this.length = this.bytes.writeDoubleLE(value as number, this.length);
        return;
      case "boolean":
        // Bit-packed, least significant bit first.
        if (value) this.bits |= 1 << this.bitCount;
        if (++this.bitCount === 8) this.flushBits();
        return;
    }
  }

  /** The page's bytes, valid until the next value is added. */
  take(): Uint8Array {
    if (this.bitCount > 0) this.flushBits();
    const page = this.bytes.subarray(0, this.length);
    this.length = 0;
    return page;
  }

  private flushBits(): void {
    this.reserve(1);
    this.bytes[this.length++] = this.bits;
    this.bits = 0;
    this.bitCount = 0;
  }

  private reserve(size: number): void {
    if (this.length + size <= this.bytes.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(2 * this.bytes.length, this.length + size));
    this.bytes.copy(bigger, 0, 0, this.length);
    this.bytes = bigger;
  }
}

/** A text column's distinct values in order of appearance, and each non-null row's index among them. */
function dictionaryOf(values: readonly unknown[]): { dictionary: string[]; indexes: Int32Array } {
  const positions = new Map<string, number>();
  const dictionary: string[] = [];
  const indexes = new Int32Array(values.length);
  let count = 0;
  let previous: string | undefined;
  let position = 0;
  for (let row = 0; row < values.length; row++) {
    const value = values[row] as string | null;
    if (value === null) continue;
    // Neighbouring rows often repeat a value (one project's key, endpoint, model): no lookup then.
    if (value !== previous) {
      const known = positions.get(value);
      if (known === undefined) {
        position = dictionary.length;
        positions.set(value, position);
        dictionary.push(value);
      } else {
        position = known;
      }
      previous = value;
    }
    indexes[count++] = position;
  }
  return { dictionary, indexes: indexes.subarray(0, count) };
}

/** Min and max of the non-null values; text compared as UTF-8 bytes, the order Parquet uses. */
function statistics(kind: ColumnKind, values: readonly unknown[], nulls: number): Statistics {
  let min: Statistics["min_value"];
  let max: Statistics["max_value"];
  if (kind === "string") {
    let minBytes: Buffer | undefined;
    let maxBytes: Buffer | undefined;
    for (const value of values as (string | null)[]) {
      if (value === null) continue;
      const bytes = Buffer.from(value);
      if (!minBytes || Buffer.compare(bytes, minBytes) < 0) [minBytes, min] = [bytes, value];
      if (!maxBytes || Buffer.compare(bytes, maxBytes) > 0) [maxBytes, max] = [bytes, value];
    }
  } else {
    let low: number | undefined;
    let high: number | undefined;
    for (let row = 0; row < values.length; row++) {
      const value = values[row] as number | null;
      if (value === null) continue;
      if (low === undefined || value < low) low = value;
      if (high === undefined || value > high) high = value;
    }
    const int64 = kind === "int64" || kind === "timestamp";
    min = int64 && low !== undefined ? BigInt(low) : low;
    max = int64 && high !== undefined ? BigInt(high) : high;
  }
  return { min_value: min, max_value: max, null_count: BigInt(nulls) };
}

/**
 * Writes one page: its header, the definition levels (data pages v2 keep them uncompressed), then the
 * snappy-compressed values. Returns the page's uncompressed size, header included.
 */
function writePage(
  out: ByteWriter,
  header: Pick<PageHeader, "type" | "dictionary_page_header" | "data_page_header_v2">,
  levels: Uint8Array,
  values: Uint8Array,
): number {
  const compressed = snappyCompress(values);
  const headerStart = out.offset;
  writePageHeader(out, {
    ...header,
    uncompressed_page_size: levels.length + values.length,
    compressed_page_size: levels.length + compressed.length,
  });
  const headerSize = out.offset - headerStart;
  out.appendBytes(levels);
  out.appendBytes(compressed);
  return headerSize + levels.length + values.length;
}

/** The definition levels of rows `from` to `to` (1 present, 0 null), run-length/bit-packed. */
function definitionLevels(values: readonly unknown[], from: number, to: number): Uint8Array {
  const levels = new Uint8Array(to - from);
  for (let row = from; row < to; row++) levels[row - from] = values[row] === null ? 0 : 1;
  const out = new ByteWriter(64);
  writeRleBitPackedHybrid(out, levels, 1);
  return out.getBytes();
}

/**
 * One column chunk. Dictionary-encoded text: a dictionary page and one data page of indexes (a few
 * bits per row). Everything else: plain data pages of about PAGE_BYTES each.
 */
function writeColumnChunk(
  out: ByteWriter,
  plain: PlainValues,
  column: ColumnDefinition,
  values: readonly unknown[],
): ColumnChunk {
  const chunkStart = out.offset;
  const encoded = column.kind === "string" && !DISTINCT.has(column.name) ? dictionaryOf(values) : undefined;
  let uncompressedSize = 0;
  let dictionaryPageOffset: bigint | undefined;
  if (encoded) {
    dictionaryPageOffset = BigInt(chunkStart);
    for (const value of encoded.dictionary) plain.add("string", value);
    uncompressedSize += writePage(
      out,
      {
        type: "DICTIONARY_PAGE",
        dictionary_page_header: { num_values: encoded.dictionary.length, encoding: "PLAIN" },
      },
      new Uint8Array(),
      plain.take(),
    );
  }
  const dataPageOffset = BigInt(out.offset);

  let nulls = 0;
  let pageStart = 0;
  let pageNulls = 0;
  const endPage = (end: number) => {
    let page: Uint8Array;
    if (encoded) {
      // Indexes are bit-packed at the width the largest one needs.
      const bitWidth = 32 - Math.clz32(Math.max(encoded.dictionary.length - 1, 1));
      const indexes = new ByteWriter(1024);
      indexes.appendUint8(bitWidth);
      writeRleBitPackedHybrid(indexes, encoded.indexes, bitWidth);
      page = indexes.getBytes();
    } else {
      page = plain.take();
    }
    const rows = end - pageStart;
    const levels = column.nullable ? definitionLevels(values, pageStart, end) : new Uint8Array();
    uncompressedSize += writePage(
      out,
      {
        type: "DATA_PAGE_V2",
        data_page_header_v2: {
          num_values: rows,
          num_nulls: pageNulls,
          num_rows: rows,
          encoding: encoded ? "RLE_DICTIONARY" : "PLAIN",
          definition_levels_byte_length: levels.length,
          repetition_levels_byte_length: 0,
          is_compressed: true,
        },
      },
      levels,
      page,
    );
    pageStart = end;
    pageNulls = 0;
  };
  for (let row = 0; row < values.length; row++) {
    const value = values[row];
    if (value === null) {
      nulls++;
      pageNulls++;
    } else if (!encoded) {
      plain.add(column.kind, value);
      if (plain.length >= PAGE_BYTES) endPage(row + 1);
    }
  }
  if (pageStart < values.length || values.length === 0) endPage(values.length);

  return {
    file_offset: BigInt(chunkStart),
    meta_data: {
      type: PARQUET_TYPES[column.kind].type,
      encodings: encoded ? ["PLAIN", "RLE", "RLE_DICTIONARY"] : ["PLAIN", "RLE"],
      path_in_schema: [column.name],
      codec: "SNAPPY",
      num_values: BigInt(values.length),
      total_uncompressed_size: BigInt(uncompressedSize),
      total_compressed_size: BigInt(out.offset - chunkStart),
      data_page_offset: dataPageOffset,
      dictionary_page_offset: dictionaryPageOffset,
      // Over the dictionary when there is one: the same min and max, a few values to compare.
      statistics: PRUNING.has(column.name)
        ? statistics(column.kind, encoded?.dictionary ?? values, nulls)
        : undefined,
    },
  };
}

/** One Parquet file (snappy, one row group) holding the records in the order given. */
export function encodeRecords(records: readonly InteractionRecord[]): Uint8Array {
  const columns = RECORD_COLUMNS.map(() => new Array<unknown>(records.length));
  fillColumns(records, columns);
  const out = new ByteWriter(64 * 1024);
  out.appendUint32(MAGIC);
  const plain = new PlainValues();
  const chunks = RECORD_COLUMNS.map((column, i) => writeColumnChunk(out, plain, column, columns[i] ?? []));
  let totalByteSize = 0n;
  for (const chunk of chunks) totalByteSize += chunk.meta_data?.total_uncompressed_size ?? 0n;
  writeMetadata(out, {
    version: 2,
    created_by: "dmt warehouse",
    schema: SCHEMA,
    num_rows: BigInt(records.length),
    row_groups: [{ columns: chunks, total_byte_size: totalByteSize, num_rows: BigInt(records.length) }],
    key_value_metadata: [{ key: "dmt.schema_version", value: String(RECORD_SCHEMA_VERSION) }],
    metadata_length: 0, // not written: the footer's length follows the footer
  });
  out.appendUint32(MAGIC);
  return out.getBytes();
}

// Decoding: what a deletion reads back before rewriting a file.
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
 * The records of a warehouse file (encodeRecords wrote it), in file order, as the
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

/** The warehouse's record codec (the port in `core/record-codec.ts`). */
export const parquetCodec: RecordCodec = { encode: encodeRecords, decode: decodeRecords };
