import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import {
  DuckDBInstance,
  type DuckDBType,
  type DuckDBValue,
  INTEGER,
  LIST,
  listValue,
  VARCHAR,
} from "@duckdb/node-api";
import type { ExportFormat } from "../../core/export-request";
import { PROJECT_ID_PATTERN } from "../../core/model";
import { type ColumnKind, INTERACTIONS_PREFIX, RECORD_COLUMNS } from "../../core/record";
import { buildInteractionQuery } from "./builder";
import type { InteractionQuery, WarehouseQuery } from "./port";

export interface DuckDBOptions {
  /** Worker threads DuckDB may use (default 1: exports are I/O and serialisation, not joins). */
  threads?: number;
  /** DuckDB's own memory ceiling, e.g. "128MB". */
  memoryLimit?: string;
}

const ISO_UTC = (column: string) => `strftime(${column} AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S.%gZ')`;

/**
 * The CSV rules of export-format.ts (`csvCell`) in SQL: formula neutralising with a leading `'`, then
 * quoting when a comma, quote or line break is present. A test holds the two to the same output.
 */
const CSV_MACROS = [
  String.raw`CREATE OR REPLACE MACRO dmt_csv_quote(s) AS
     CASE WHEN regexp_matches(s, '[",\r\n]') THEN '"' || replace(s, '"', '""') || '"' ELSE s END`,
  String.raw`CREATE OR REPLACE MACRO dmt_csv_text(s) AS
     CASE WHEN s IS NULL THEN ''
          ELSE dmt_csv_quote(CASE WHEN regexp_matches(s, '^[=+\-@\t\r]') THEN '''' || s ELSE s END) END`,
];

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

/**
 * Rows leave DuckDB already encoded, one string per row: one value crosses into JavaScript per row
 * instead of one per cell, which keeps a million-row export fast and flat in memory.
 */
const ROW_SQL: Record<ExportFormat, string> = {
  json: `to_json(struct_pack(${RECORD_COLUMNS.map(
    (c) => `"${c.name}" := ${c.kind === "timestamp" ? ISO_UTC(`"${c.name}"`) : `"${c.name}"`}`,
  ).join(", ")}))::VARCHAR`,
  csv: `concat_ws(',', ${RECORD_COLUMNS.map((c) => {
    const column = `"${c.name}"`;
    if (c.kind === "string") return `dmt_csv_text(${column})`;
    if (c.kind === "timestamp") return `coalesce(${ISO_UTC(column)}, '')`;
    // Whole doubles as JavaScript writes them: 3, not DuckDB's 3.0.
    if (c.kind === "double") {
      return `coalesce(CASE WHEN ${column} = trunc(${column}) AND abs(${column}) < 1e15 THEN CAST(CAST(${column} AS BIGINT) AS VARCHAR) ELSE CAST(${column} AS VARCHAR) END, '')`;
    }
    return `coalesce(CAST(${column} AS VARCHAR), '')`;
  }).join(", ")}) || chr(13) || chr(10)`,
};

/**
 * Local queries: DuckDB over `<root>/interactions/project=<id>/dt=<day>/*.parquet`. We list the project's
 * day folders in the range ourselves (partition pruning), then hand the files to `read_parquet` as a
 * bound list parameter; hive partitioning exposes `project` and `dt` to the same WHERE clause Athena
 * runs. Each query uses its own connection, closed when the iteration ends or is abandoned.
 */
export class DuckDBWarehouseQuery implements WarehouseQuery {
  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly root: string,
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
      for (const statement of [SCHEMA_TABLE, ...CSV_MACROS]) await connection.run(statement);
    } finally {
      connection.closeSync();
    }
    return new DuckDBWarehouseQuery(instance, root);
  }

  async *rows(query: InteractionQuery, format: ExportFormat): AsyncIterable<string[]> {
    const files = await this.partitionFiles(query);
    if (files.length === 0) return;
    const built = buildInteractionQuery(query);
    const sql =
      `SELECT ${ROW_SQL[format]} FROM (FROM dmt_interactions UNION ALL BY NAME ` +
      `FROM read_parquet(?, hive_partitioning = true, hive_types = {'project': VARCHAR, 'dt': VARCHAR}, ` +
      `union_by_name = true)) WHERE ${built.where}`;
    const values: DuckDBValue[] = [listValue(files), ...built.params.map((p) => p.value)];
    const types: DuckDBType[] = [
      LIST(VARCHAR),
      ...built.params.map((p) => (p.type === "string" ? VARCHAR : INTEGER)),
    ];
    const connection = await this.instance.connect();
    try {
      const result = await connection.stream(sql, values, types);
      for (;;) {
        const chunk = await result.fetchChunk();
        if (!chunk || chunk.rowCount === 0) break;
        const rows = chunk.getColumnValues(0) as string[];
        // The chunk's strings live in native memory V8 cannot see, freed only when a GC finalises the
        // chunk; the values are copied out, so release them now rather than let chunks pile up.
        chunk.reset();
        yield rows;
      }
    } finally {
      connection.closeSync();
    }
  }

  /** The Parquet files of the project's day folders within the range. */
  private async partitionFiles(query: InteractionQuery): Promise<string[]> {
    // The project id names a folder; anything else could reach another one.
    if (!PROJECT_ID_PATTERN.test(query.projectId)) throw new Error("invalid project id");
    const projectDir = join(
      this.root,
      ...INTERACTIONS_PREFIX.split("/").filter(Boolean),
      `project=${query.projectId}`,
    );
    const days = (await listDir(projectDir))
      .filter((e) => e.isDirectory() && e.name.startsWith("dt="))
      .map((e) => e.name.slice(3))
      .filter((day) => day >= query.start && day <= query.end)
      .sort();
    const files: string[] = [];
    for (const day of days) {
      const dayDir = join(projectDir, `dt=${day}`);
      for (const entry of await listDir(dayDir)) {
        if (entry.isFile() && entry.name.endsWith(".parquet")) files.push(join(dayDir, entry.name));
      }
    }
    return files;
  }

  close(): void {
    this.instance.closeSync();
  }
}

async function listDir(path: string): Promise<Dirent[]> {
  try {
    return (await readdir(path, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}
