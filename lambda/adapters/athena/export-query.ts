import {
  type AthenaClient,
  GetQueryExecutionCommand,
  GetQueryResultsCommand,
  type Row,
  StartQueryExecutionCommand,
} from "@aws-sdk/client-athena";
import { ERASED_USAGE_TABLE } from "../../core/erased-usage";
import { csvLine, type ExportValue, jsonRow } from "../../core/export-format";
import {
  addErasedUsage,
  type InteractionQuery,
  type UsageGroup,
  type WarehouseQuery,
} from "../../core/export-query";
import type { ExportFormat } from "../../core/export-request";
import { erasedGroupFromCells, usageGroupFromCells } from "../../core/focus";
import { type ColumnKind, RECORD_COLUMNS } from "../../core/record";
import {
  buildErasedUsageQuery,
  buildInteractionQuery,
  consumerFile,
  erasedUsageGroupSql,
  onceAcrossCompaction,
  type QueryParam,
  usageGroupSql,
} from "../sql/export-query";
import { queryFailure, stopQuery, succeededAcrossSwaps } from "./missing-file";

export interface AthenaOptions {
  /** The workgroup holds the result location, its encryption and the per-query scan limit. */
  workGroup: string;
  database: string;
  table: string;
  /** The table over erased usage (core/erased-usage.ts); default `erased_usage`. */
  erasedUsageTable?: string;
  catalog?: string;
  /** Rows per GetQueryResults page (Athena's maximum is 1000). */
  pageSize?: number;
  /** First and longest pause between state polls. */
  pollMs?: { first: number; max: number };
  /** Give up (and fail the export) after waiting this long for the query to finish. */
  timeoutMs?: number;
  sleep?: (ms: number) => Promise<void>;
  clock?: () => number;
}

const IDENTIFIER = /^[A-Za-z0-9_]{1,255}$/;

/**
 * Athena takes execution parameters as SQL literals, so a string parameter is sent quoted, with its
 * quotes doubled. The query text itself never contains a value.
 */
export function athenaLiteral(param: QueryParam): string {
  return param.type === "integer" ? String(param.value) : `'${param.value.replaceAll("'", "''")}'`;
}

type Convert = (text: string) => ExportValue;
const CONVERT: Record<ColumnKind, Convert> = {
  string: (t) => t,
  int32: Number,
  int64: Number,
  double: Number,
  boolean: (t) => t === "true",
  // Athena prints timestamps as `2026-01-02 03:04:05.678` (UTC, as written).
  timestamp: (t) => new Date(`${t.replace(" ", "T").replace(/ UTC$/, "")}Z`).toISOString(),
};

/** Queries in AWS: StartQueryExecution with ExecutionParameters, polling, then results page by page. */
export class AthenaWarehouseQuery implements WarehouseQuery {
  private readonly table: string;
  private readonly erasedTable: string;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly clock: () => number;

  constructor(
    private readonly client: AthenaClient,
    private readonly options: AthenaOptions,
  ) {
    const erasedTable = options.erasedUsageTable ?? ERASED_USAGE_TABLE;
    if (![options.database, options.table, erasedTable].every((name) => IDENTIFIER.test(name))) {
      throw new Error("Athena database and table names are letters, digits and underscores");
    }
    this.table = `"${options.database}"."${options.table}"`;
    this.erasedTable = `"${options.database}"."${erasedTable}"`;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.clock = options.clock ?? Date.now;
  }

  async *rows(query: InteractionQuery, format: ExportFormat): AsyncIterable<string[]> {
    const encode = format === "json" ? jsonRow : csvLine;
    const built = buildInteractionQuery(query);
    const sql = (where: string) => `SELECT ${built.columns} FROM ${this.table} WHERE ${where}`;
    for await (const page of this.run(sql, query)) {
      const rows: string[] = [];
      for (const row of page) {
        const data = row.Data ?? [];
        const object: Record<string, ExportValue> = {};
        RECORD_COLUMNS.forEach((column, i) => {
          const text = data[i]?.VarCharValue;
          object[column.name] = text === undefined ? null : CONVERT[column.kind](text);
        });
        rows.push(encode(object));
      }
      if (rows.length > 0) yield rows;
    }
  }

  /**
   * The FOCUS export's aggregate over the same rows `rows` reads (the shared `usageGroupSql`), plus the
   * erased usage of the same days (core/erased-usage.ts, the `erased_usage` table).
   */
  async usageGroups(query: InteractionQuery): Promise<UsageGroup[]> {
    const groups: UsageGroup[] = [];
    const sql = (where: string) =>
      usageGroupSql(this.table, where, (column, path) => `json_extract_scalar(${column}, '${path}')`);
    for await (const page of this.run(sql, query)) {
      for (const row of page) groups.push(usageGroupFromCells((row.Data ?? []).map((d) => d.VarCharValue)));
    }
    const erased = buildErasedUsageQuery(query);
    if (!erased) return groups;
    const erasedGroups: UsageGroup[] = [];
    const text = erasedUsageGroupSql(this.erasedTable, erased.where);
    for await (const page of this.results(text, erased.params)) {
      for (const row of page) {
        erasedGroups.push(erasedGroupFromCells((row.Data ?? []).map((d) => d.VarCharValue)));
      }
    }
    return addErasedUsage(groups, erasedGroups);
  }

  /**
   * Runs `sql` with the query's condition (each row once while a compaction swaps files) and yields the
   * result rows page by page, the header row left out.
   */
  private async *run(sql: (where: string) => string, query: InteractionQuery): AsyncGenerator<Row[]> {
    const built = buildInteractionQuery(query);
    // Each row once while a compaction swaps files: the ids in the consumer files of the same days.
    const consumerIds = `SELECT "transaction_id" FROM ${this.table} WHERE ${built.partition.where} AND ${consumerFile('"$path"')}`;
    yield* this.results(sql(`${built.where} AND ${onceAcrossCompaction('"$path"', consumerIds)}`), [
      ...built.params,
      ...built.partition.params,
    ]);
  }

  /** Runs the query text with its parameters and yields the result rows page by page, the header row left out. */
  private async *results(text: string, params: QueryParam[]): AsyncGenerator<Row[]> {
    const id = await succeededAcrossSwaps(
      this.client,
      new StartQueryExecutionCommand({
        QueryString: text,
        ExecutionParameters: params.map(athenaLiteral),
        WorkGroup: this.options.workGroup,
        QueryExecutionContext: { Database: this.options.database, Catalog: this.options.catalog },
      }),
      (started) => this.waitForSuccess(started),
      this.sleep,
    );
    let read = false;
    try {
      let NextToken: string | undefined;
      let header = true;
      do {
        const page = await this.client.send(
          new GetQueryResultsCommand({
            QueryExecutionId: id,
            NextToken,
            MaxResults: this.options.pageSize ?? 1000,
          }),
        );
        const rows = page.ResultSet?.Rows ?? [];
        // The first row of the first page repeats the column names.
        yield header ? rows.slice(1) : rows;
        header = false;
        NextToken = page.NextToken;
      } while (NextToken);
      read = true;
    } finally {
      // A reader that stopped early (the client left, the stream's time ran out, a page failed): the
      // query is stopped, whether it still runs or only its results remain to be read.
      if (!read) await stopQuery(this.client, id);
    }
  }

  private async waitForSuccess(id: string): Promise<void> {
    const poll = this.options.pollMs ?? { first: 100, max: 2000 };
    const deadline = this.clock() + (this.options.timeoutMs ?? 600_000);
    let pause = poll.first;
    for (;;) {
      const out = await this.client.send(new GetQueryExecutionCommand({ QueryExecutionId: id }));
      const status = out.QueryExecution?.Status;
      switch (status?.State) {
        case "SUCCEEDED":
          return;
        case "FAILED":
        case "CANCELLED":
          throw queryFailure(id, status.State, status.StateChangeReason);
      }
      if (this.clock() >= deadline) {
        // Stopped by run's finally.
        throw new Error(`Athena query ${id} did not finish in time`);
      }
      await this.sleep(pause);
      pause = Math.min(pause * 2, poll.max);
    }
  }
}
