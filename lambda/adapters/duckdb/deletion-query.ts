import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
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
import { keyIn, ReadSnapshots, type SnapshotFolder } from "./read-snapshot";

/**
 * The workflow's queries locally: DuckDB over every Parquet file of the project (all days), with
 * DuckDB's `filename` column naming the files that hold matching rows. The files are a read snapshot's
 * (read-snapshot.ts): a compaction's swap cannot remove one under the query.
 */
export class DuckDBDeletionQuery implements DeletionQuery {
  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly root: string,
    private readonly snapshots: ReadSnapshots,
  ) {}

  static async open(root: string, folder?: SnapshotFolder): Promise<DuckDBDeletionQuery> {
    const instance = await DuckDBInstance.create(":memory:", {
      threads: "1",
      memory_limit: "256MB",
      enable_external_file_cache: "false",
    });
    const snapshots = new ReadSnapshots(root, folder);
    await snapshots.sweep();
    return new DuckDBDeletionQuery(instance, root, snapshots);
  }

  async affectedFiles(target: DeletionTarget): Promise<AffectedFile[]> {
    const { rows, keyOf } = await this.run(
      target,
      `filename AS file, count(*)::BIGINT AS n`,
      "GROUP BY filename",
    );
    return rows
      .map((row) => ({ key: keyOf(row.file as string), rows: Number(row.n) }))
      .sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  async countMatching(target: DeletionTarget): Promise<number> {
    const { rows } = await this.run(target, "count(*)::BIGINT AS n", "");
    return Number(rows[0]?.n ?? 0);
  }

  /** The query's rows, and the warehouse key of a file it names. */
  private async run(target: DeletionTarget, select: string, tail: string) {
    const snapshot = await this.snapshots.take(await this.dayFolders(target.projectId));
    const keyOf = (file: string) => keyIn(snapshot, file);
    const { files } = snapshot;
    if (files.length === 0) return { rows: [], keyOf };
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
    try {
      const connection = await this.instance.connect();
      try {
        return { rows: (await connection.runAndReadAll(sql, values, types)).getRowObjects(), keyOf };
      } finally {
        connection.closeSync();
      }
    } finally {
      await snapshot.release();
    }
  }

  /** Every day folder of the project. */
  private async dayFolders(projectId: string): Promise<string[]> {
    // The project id names a folder; anything else could reach another one.
    if (!PROJECT_ID_PATTERN.test(projectId)) throw new Error("invalid project id");
    const projectDir = join(
      this.root,
      ...INTERACTIONS_PREFIX.split("/").filter(Boolean),
      `project=${projectId}`,
    );
    return (await listDir(projectDir))
      .filter((day) => day.isDirectory() && day.name.startsWith("dt="))
      .map((day) => join(projectDir, day.name));
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
