import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import {
  type DuckDBDataChunk,
  DuckDBInstance,
  type DuckDBType,
  type DuckDBValue,
  INTEGER,
  LIST,
  listValue,
  VARCHAR,
} from "@duckdb/node-api";
import duckdb from "@duckdb/node-bindings";
import { isCompactedFile } from "../../core/compaction";
import { ERASED_USAGE_PREFIX } from "../../core/erased-usage";
import { EXPORT_COLUMNS } from "../../core/export-format";
import {
  addErasedUsage,
  type InteractionQuery,
  type UsageGroup,
  type WarehouseQuery,
} from "../../core/export-query";
import type { ExportFormat } from "../../core/export-request";
import { erasedGroupFromCells, usageGroupFromCells } from "../../core/focus";
import { PROJECT_ID_PATTERN } from "../../core/model";
import { type ColumnKind, INTERACTIONS_PREFIX, RECORD_COLUMNS } from "../../core/record";
import {
  buildErasedUsageQuery,
  buildInteractionQuery,
  erasedUsageGroupSql,
  onceAcrossCompaction,
  usageGroupSql,
} from "../sql/export-query";
import { ReadSnapshots, type SnapshotFolder } from "./read-snapshot";

export interface DuckDBOptions {
  /** Worker threads DuckDB may use (default 1: exports are I/O and serialisation, not joins). */
  threads?: number;
  /** DuckDB's own memory ceiling, e.g. "128MB". */
  memoryLimit?: string;
  /** The folder calls of the queries' read snapshots (read-snapshot.ts); tests order races with them. */
  folder?: SnapshotFolder;
}

const ISO_UTC = (column: string) => `strftime(${column} AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%gZ')`;

const DUCKDB_TYPES: Record<ColumnKind, string> = {
  string: "VARCHAR",
  int32: "INTEGER",
  int64: "BIGINT",
  double: "DOUBLE",
  boolean: "BOOLEAN",
  timestamp: "TIMESTAMPTZ",
};

/**
 * An empty table with every column of the current schema and the partition columns. Files are read
 * `UNION ALL BY NAME` with it, so files written before a column was added read as null there.
 */
const SCHEMA_TABLE = `CREATE OR REPLACE TABLE dmt_interactions (${[
  ...RECORD_COLUMNS.map((c) => `"${c.name}" ${DUCKDB_TYPES[c.kind]}`),
  '"project" VARCHAR',
  '"dt" VARCHAR',
].join(", ")})`;

/** A JSON value; `to_json` escapes text, and writes doubles as it does inside an object. */
function jsonValueSql(kind: ColumnKind, column: string): string {
  if (kind === "string" || kind === "double") return `coalesce(to_json(${column})::VARCHAR, 'null')`;
  if (kind === "timestamp") return `coalesce('"' || ${ISO_UTC(column)} || '"', 'null')`;
  return `coalesce(CAST(${column} AS VARCHAR), 'null')`;
}

/** Text a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR first) gets a leading `'`. */
const neutralisedSql = (column: string) =>
  `CASE WHEN ascii(${column}) IN (61, 43, 45, 64, 9, 13) THEN '''' || ${column} ELSE ${column} END`;

/** A CSV cell: text with a comma, quote or line break quoted, quotes doubled; null is empty. */
function csvCellSql(kind: ColumnKind, column: string): string {
  if (kind === "string") {
    const special = [`','`, `'"'`, "chr(10)", "chr(13)"].map((c) => `contains(${column}, ${c})`);
    return `coalesce(CASE WHEN ${special.join(" OR ")} THEN '"' || replace(${column}, '"', '""') || '"' ELSE ${column} END, '')`;
  }
  if (kind === "timestamp") return `coalesce(${ISO_UTC(column)}, '')`;
  // Whole doubles as JavaScript writes them: 3, not DuckDB's 3.0.
  if (kind === "double") {
    return `coalesce(CASE WHEN ${column} = trunc(${column}) AND abs(${column}) < 1e15 THEN CAST(CAST(${column} AS BIGINT) AS VARCHAR) ELSE CAST(${column} AS VARCHAR) END, '')`;
  }
  return `coalesce(CAST(${column} AS VARCHAR), '')`;
}

/**
 * Rows leave DuckDB already encoded, one string per row, so one value crosses into JavaScript per row
 * instead of one per cell. The encodings follow export-format.ts (`jsonRow`, `csvLine`); a test holds
 * them to the same output. `cells` is the select list between the filtered rows and `row`: CSV
 * neutralises formulas there, once per text and after the filters (which compare the stored text).
 * `separated` starts every JSON row with `,\n` (see `encodedRows`).
 */
function rowEncoding(format: ExportFormat, separated: boolean): { cells: string; row: string } {
  const columns = RECORD_COLUMNS.map((c) => ({ kind: c.kind, name: `"${c.name}"` }));
  // Each column's encoded value, with `cost_usd` after `cost_micros` (EXPORT_COLUMNS).
  const encoded = (value: (c: { kind: ColumnKind; name: string }) => string, costUsd: string) =>
    columns.flatMap((c) => (c.name === '"cost_micros"' ? [value(c), costUsd] : [value(c)]));
  if (format === "json") {
    const names = EXPORT_COLUMNS.map((name, i) => `'${i === 0 ? "{" : ","}"${name}":'`);
    const values = encoded(
      (c) => jsonValueSql(c.kind, c.name),
      `coalesce('"' || ${DECIMAL_USD_SQL} || '"', 'null')`,
    );
    const fields = values.map((value, i) => `${names[i]}, ${value}`);
    return { cells: "*", row: `concat(${separated ? "',', chr(10), " : ""}${fields.join(", ")}, '}')` };
  }
  return {
    cells: columns
      .map((c) => (c.kind === "string" ? `${neutralisedSql(c.name)} AS ${c.name}` : c.name))
      .join(", "),
    row: `concat_ws(',', ${encoded((c) => csvCellSql(c.kind, c.name), `coalesce(${DECIMAL_USD_SQL}, '')`).join(", ")}) || chr(13) || chr(10)`,
  };
}

/** `cost_micros` in dollars as `decimalUsd` writes it: two decimals at least, six at most; null stays null. */
const DECIMAL_USD_SQL = `(CAST("cost_micros" // 1000000 AS VARCHAR) || '.' || regexp_replace(lpad(CAST("cost_micros" % 1000000 AS VARCHAR), 6, '0'), '0{1,4}$', ''))`;

/**
 * How much of a streamed result DuckDB buffers ahead of the reader. It sizes a batch by its fixed-width
 * part (16 bytes a row), not by the text the row points to, so the default (about 1 MB) held some 50
 * batches of export text, over 100 MB for JSON. 64 KB is two batches; `chunks` reads one ahead anyway.
 */
const STREAMING_BUFFER = "64KB";

/**
 * Local queries: DuckDB over `<root>/interactions/project=<id>/dt=<day>/*.parquet`. We list the project's
 * day folders in the range ourselves (partition pruning), then hand the files to `read_parquet` as a
 * bound list parameter; hive partitioning exposes `project` and `dt` to the same WHERE clause Athena
 * runs. The files are those of a read snapshot (read-snapshot.ts), so a compaction's swap cannot remove
 * one under the query. Each query uses its own connection, closed (and its snapshot released) when the
 * iteration ends or is abandoned.
 */
export class DuckDBWarehouseQuery implements WarehouseQuery {
  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly root: string,
    private readonly snapshots: ReadSnapshots,
  ) {}

  static async open(root: string, options: DuckDBOptions = {}): Promise<DuckDBWarehouseQuery> {
    const instance = await DuckDBInstance.create(":memory:", {
      threads: String(options.threads ?? 1),
      memory_limit: options.memoryLimit ?? "128MB",
      // Files are read once per export; caching them would only hold memory.
      enable_external_file_cache: "false",
    });
    const connection = await instance.connect();
    try {
      await connection.run(SCHEMA_TABLE);
    } finally {
      connection.closeSync();
    }
    const snapshots = new ReadSnapshots(root, options.folder);
    await snapshots.sweep();
    return new DuckDBWarehouseQuery(instance, root, snapshots);
  }

  async *rows(query: InteractionQuery, format: ExportFormat): AsyncIterable<string[]> {
    for await (const chunk of this.chunks(query, rowEncoding(format, false))) {
      yield chunk.getColumnValues(0) as string[];
    }
  }

  /**
   * The rows of `rows` as UTF-8 bytes, back to back, for the export body (framed by
   * `frameEncodedExport`): each JSON row preceded by `,\n`, CSV lines as they are. No string is made
   * per row; a batch costs JavaScript a few copies.
   */
  async *encodedRows(query: InteractionQuery, format: ExportFormat): AsyncIterable<Uint8Array> {
    for await (const chunk of this.chunks(query, rowEncoding(format, true))) yield* textBytes(chunk);
  }

  /**
   * The query's result chunks, each valid until the next is asked for. The next chunk is fetched (on
   * a worker thread) while the caller handles the current one, so DuckDB and JavaScript overlap.
   */
  private async *chunks(
    query: InteractionQuery,
    encoding: { cells: string; row: string },
  ): AsyncGenerator<DuckDBDataChunk> {
    const source = await this.source(query);
    if (!source) return;
    const sql = `SELECT ${encoding.row} FROM (SELECT ${encoding.cells} FROM ${source.from} WHERE ${source.where})`;
    const { values, types } = source;
    let connection: Awaited<ReturnType<DuckDBInstance["connect"]>> | undefined;
    let next: Promise<DuckDBDataChunk | null> | undefined;
    try {
      connection = await this.instance.connect();
      await connection.run(`SET streaming_buffer_size = '${STREAMING_BUFFER}'`);
      const result = await connection.stream(sql, values, types);
      next = result.fetchChunk();
      for (;;) {
        const chunk = await next;
        next = undefined;
        if (!chunk || chunk.rowCount === 0) break;
        next = result.fetchChunk();
        yield chunk;
        // The chunk's text lives in native memory V8 cannot see, freed only when a GC finalises the
        // chunk; it has been copied out, so release it now rather than let chunks pile up.
        chunk.reset();
      }
    } finally {
      // A fetch still running must end before its connection closes; its error, if any, is moot.
      await next?.catch(() => null);
      connection?.closeSync();
      await source.release();
    }
  }

  /**
   * The FOCUS export's aggregate over the same rows `rows` reads (the shared `usageGroupSql`), plus the
   * erased usage of the same days (core/erased-usage.ts).
   */
  async usageGroups(query: InteractionQuery): Promise<UsageGroup[]> {
    const source = await this.source(query);
    let connection: Awaited<ReturnType<DuckDBInstance["connect"]>> | undefined;
    try {
      connection = await this.instance.connect();
      const held = source
        ? (
            await connection.runAndReadAll(
              usageGroupSql(
                source.from,
                source.where,
                (column, path) => `json_extract_string(${column}, '${path}')`,
              ),
              source.values,
              source.types,
            )
          )
            .getRows()
            .map((row) => usageGroupFromCells(row as (string | null)[]))
        : [];
      return addErasedUsage(held, await this.erasedGroups(connection, query));
    } finally {
      connection?.closeSync();
      await source?.release();
    }
  }

  /** The erased usage of the query's days, grouped as `usageGroupSql` groups calls. */
  private async erasedGroups(
    connection: Awaited<ReturnType<DuckDBInstance["connect"]>>,
    query: InteractionQuery,
  ): Promise<UsageGroup[]> {
    const erased = buildErasedUsageQuery(query);
    if (!erased) return [];
    // A snapshot as the records' (retention may remove a file while the query runs).
    const snapshot = await this.snapshots.take(await this.dayFolders(query, ERASED_USAGE_PREFIX));
    try {
      if (snapshot.files.length === 0) return [];
      const from = `read_parquet(?, hive_partitioning = true, hive_types = {'project': VARCHAR, 'dt': VARCHAR})`;
      const result = await connection.runAndReadAll(
        erasedUsageGroupSql(from, erased.where),
        [listValue(snapshot.files), ...erased.params.map((p) => p.value)],
        [LIST(VARCHAR), ...erased.params.map(() => VARCHAR)],
      );
      return result.getRows().map((row) => erasedGroupFromCells(row as (string | null)[]));
    } finally {
      await snapshot.release();
    }
  }

  /**
   * The rows of a query: the project's files in the range read as the current schema, the condition,
   * and its bound values, and the snapshot to release once read; undefined when there are no files.
   */
  private async source(query: InteractionQuery): Promise<
    | {
        from: string;
        where: string;
        values: DuckDBValue[];
        types: DuckDBType[];
        release: () => Promise<void>;
      }
    | undefined
  > {
    const snapshot = await this.snapshots.take(await this.dayFolders(query));
    const { files } = snapshot;
    if (files.length === 0) {
      await snapshot.release();
      return undefined;
    }
    const built = buildInteractionQuery(query);
    // Only days with a compacted file beside consumer files (a swap under way, or late records) pay
    // for counting rows once.
    const swapping = consumerFilesBesideCompacted(files);
    const once =
      swapping.length > 0
        ? ` AND ${onceAcrossCompaction("filename", "SELECT transaction_id FROM read_parquet(?, union_by_name = true)")}`
        : "";
    const from =
      `(FROM dmt_interactions UNION ALL BY NAME ` +
      `FROM read_parquet(?, hive_partitioning = true, hive_types = {'project': VARCHAR, 'dt': VARCHAR}, ` +
      `union_by_name = true${swapping.length > 0 ? ", filename = true" : ""}))`;
    const values: DuckDBValue[] = [
      listValue(files),
      ...built.params.map((p) => p.value),
      ...(swapping.length > 0 ? [listValue(swapping)] : []),
    ];
    const types: DuckDBType[] = [
      LIST(VARCHAR),
      ...built.params.map((p) => (p.type === "string" ? VARCHAR : INTEGER)),
      ...(swapping.length > 0 ? [LIST(VARCHAR)] : []),
    ];
    return { from, where: `${built.where}${once}`, values, types, release: snapshot.release };
  }

  /** The project's day folders within the range (of the records, or under `prefix`). */
  private async dayFolders(query: InteractionQuery, prefix = INTERACTIONS_PREFIX): Promise<string[]> {
    // The project id names a folder; anything else could reach another one.
    if (!PROJECT_ID_PATTERN.test(query.projectId)) throw new Error("invalid project id");
    const projectDir = join(this.root, ...prefix.split("/").filter(Boolean), `project=${query.projectId}`);
    return (await listDir(projectDir))
      .filter((e) => e.isDirectory() && e.name.startsWith("dt="))
      .map((e) => e.name.slice(3))
      .filter((day) => day >= query.start && day <= query.end)
      .sort()
      .map((day) => join(projectDir, `dt=${day}`));
  }

  close(): void {
    this.instance.closeSync();
  }
}

/** The consumer files of day folders that also hold a compacted file: a swap under way, or late records. */
function consumerFilesBesideCompacted(files: readonly string[]): string[] {
  const folderOf = (file: string) => dirname(file);
  const compactedIn = new Set(files.filter(isCompactedFile).map(folderOf));
  return files.filter((file) => !isCompactedFile(file) && compactedIn.has(folderOf(file)));
}

async function listDir(path: string): Promise<Dirent[]> {
  try {
    return (await readdir(path, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}

/** DuckDB's `duckdb_string_t`: 16 bytes, the length first; up to 12 bytes inline, else a pointer at 8. */
const STRING_ENTRY_BYTES = 16;
const INLINE_BYTES = 12;

/**
 * The texts of a chunk's one VARCHAR column (never null: the row encodings cannot make null), as
 * consecutive pieces. DuckDB builds a batch's texts one after another in its string heap, so rows
 * whose texts are exactly adjacent in memory are copied out with one call per run (a few per batch)
 * instead of one per row; a run only ever spans bytes that belong to its rows.
 */
function textBytes(chunk: DuckDBDataChunk): Uint8Array[] {
  const count = chunk.rowCount;
  const entries = duckdb.vector_get_data(
    duckdb.data_chunk_get_vector(chunk.chunk, 0),
    count * STRING_ENTRY_BYTES,
  );
  const view = new DataView(entries.buffer, entries.byteOffset, entries.byteLength);
  const lengthAt = (row: number) => view.getUint32(row * STRING_ENTRY_BYTES, true);
  const pointerAt = (row: number) =>
    view.getUint32(row * STRING_ENTRY_BYTES + 8, true) +
    view.getUint32(row * STRING_ENTRY_BYTES + 12, true) * 2 ** 32;
  const parts: Uint8Array[] = [];
  for (let start = 0; start < count; ) {
    const startEntry = start * STRING_ENTRY_BYTES;
    if (lengthAt(start) <= INLINE_BYTES) {
      parts.push(entries.subarray(startEntry + 4, startEntry + 4 + lengthAt(start)));
      start++;
      continue;
    }
    let end = start + 1;
    let runBytes = lengthAt(start);
    while (
      end < count &&
      lengthAt(end) > INLINE_BYTES &&
      pointerAt(end) === pointerAt(end - 1) + lengthAt(end - 1)
    ) {
      runBytes += lengthAt(end);
      end++;
    }
    parts.push(
      duckdb.get_data_from_pointer(
        entries.buffer as ArrayBuffer,
        entries.byteOffset + startEntry + 8,
        runBytes,
      ),
    );
    start = end;
  }
  return parts;
}
