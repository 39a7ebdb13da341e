import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import {
  BIGINT,
  DuckDBInstance,
  type DuckDBType,
  type DuckDBValue,
  LIST,
  listValue,
  VARCHAR,
} from "@duckdb/node-api";
import type { AffectedFile, DeletionQuery, DeletionTarget } from "../../core/deletion";
import { PROJECT_ID_PATTERN } from "../../core/model";
import { INTERACTIONS_PREFIX } from "../../core/record";
import { buildDeletionCondition } from "../sql/deletion-condition";

/**
 * The workflow's queries locally: DuckDB over every Parquet file of the project (all days), with
 * DuckDB's `filename` column naming the files that hold matching rows.
 */
export class DuckDBDeletionQuery implements DeletionQuery {
  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly root: string,
  ) {}

  static async open(root: string): Promise<DuckDBDeletionQuery> {
    const instance = await DuckDBInstance.create(":memory:", {
      threads: "1",
      memory_limit: "256MB",
      enable_external_file_cache: "false",
    });
    return new DuckDBDeletionQuery(instance, root);
  }

  async affectedFiles(target: DeletionTarget): Promise<AffectedFile[]> {
    const rows = await this.run(target, `filename AS file, count(*)::BIGINT AS n`, "GROUP BY filename");
    return rows
      .map((row) => ({
        key: relative(this.root, row.file as string)
          .split(sep)
          .join("/"),
        rows: Number(row.n),
      }))
      .sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  async countMatching(target: DeletionTarget): Promise<number> {
    const rows = await this.run(target, "count(*)::BIGINT AS n", "");
    return Number(rows[0]?.n ?? 0);
  }

  private async run(target: DeletionTarget, select: string, tail: string) {
    const files = await this.projectFiles(target.projectId);
    if (files.length === 0) return [];
    const built = buildDeletionCondition(target, "duckdb");
    const sql =
      `SELECT ${select} FROM read_parquet(?, hive_partitioning = true, ` +
      `hive_types = {'project': VARCHAR, 'dt': VARCHAR}, union_by_name = true, filename = true) ` +
      `WHERE ${built.where} ${tail}`;
    const values: DuckDBValue[] = [
      listValue(files),
      ...built.params.map((p) => (p.type === "time" ? BigInt(p.value) : p.value)),
    ];
    const types: DuckDBType[] = [
      LIST(VARCHAR),
      ...built.params.map((p) => (p.type === "time" ? BIGINT : VARCHAR)),
    ];
    const connection = await this.instance.connect();
    try {
      return (await connection.runAndReadAll(sql, values, types)).getRowObjects();
    } finally {
      connection.closeSync();
    }
  }

  /** Every Parquet file of the project, whatever its day. */
  private async projectFiles(projectId: string): Promise<string[]> {
    // The project id names a folder; anything else could reach another one.
    if (!PROJECT_ID_PATTERN.test(projectId)) throw new Error("invalid project id");
    const projectDir = join(
      this.root,
      ...INTERACTIONS_PREFIX.split("/").filter(Boolean),
      `project=${projectId}`,
    );
    const files: string[] = [];
    for (const day of await listDir(projectDir)) {
      if (!day.isDirectory() || !day.name.startsWith("dt=")) continue;
      for (const entry of await listDir(join(projectDir, day.name))) {
        if (entry.isFile() && entry.name.endsWith(".parquet"))
          files.push(join(projectDir, day.name, entry.name));
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
    return await readdir(path, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw err;
  }
}
