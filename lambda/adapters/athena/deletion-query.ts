import {
  type AthenaClient,
  GetQueryExecutionCommand,
  GetQueryResultsCommand,
  StartQueryExecutionCommand,
} from "@aws-sdk/client-athena";
import type { AffectedFile, DeletionQuery, DeletionTarget } from "../../core/deletion";
import { buildDeletionCondition, type DeletionParam } from "../sql/deletion-condition";
import { queryFailure, succeededAcrossSwaps } from "./missing-file";

export interface AthenaDeletionOptions {
  workGroup: string;
  database: string;
  table: string;
  /** The warehouse bucket and key prefix: `"$path"` is turned back into an object key with them. */
  bucket: string;
  prefix?: string;
  pollMs?: { first: number; max: number };
  sleep?: (ms: number) => Promise<void>;
}

const IDENTIFIER = /^[A-Za-z0-9_]{1,255}$/;

/** Execution parameters are SQL literals: strings quoted (quotes doubled), times as timestamps (UTC). */
export function athenaDeletionLiteral(param: DeletionParam): string {
  if (param.type === "time") {
    return `TIMESTAMP '${new Date(param.value).toISOString().replace("T", " ").replace("Z", "")}'`;
  }
  return `'${param.value.replaceAll("'", "''")}'`;
}

/**
 * The workflow's queries in AWS. No time limit of its own: a step Lambda has minutes, and Step
 * Functions retries a step that times out.
 */
export class AthenaDeletionQuery implements DeletionQuery {
  private readonly table: string;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly pathPrefix: string;

  constructor(
    private readonly client: AthenaClient,
    private readonly options: AthenaDeletionOptions,
  ) {
    if (!IDENTIFIER.test(options.database) || !IDENTIFIER.test(options.table)) {
      throw new Error("Athena database and table names are letters, digits and underscores");
    }
    this.table = `"${options.database}"."${options.table}"`;
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    const prefix =
      options.prefix && !options.prefix.endsWith("/") ? `${options.prefix}/` : (options.prefix ?? "");
    this.pathPrefix = `s3://${options.bucket}/${prefix}`;
  }

  async affectedFiles(target: DeletionTarget): Promise<AffectedFile[]> {
    const rows = await this.run(target, `"$path", count(*)`, `GROUP BY "$path"`);
    return rows
      .map(([path, n]) => {
        if (!path?.startsWith(this.pathPrefix)) throw new Error("Athena named a file outside the warehouse");
        return { key: path.slice(this.pathPrefix.length), rows: Number(n) };
      })
      .sort((a, b) => (a.key < b.key ? -1 : 1));
  }

  async countMatching(target: DeletionTarget): Promise<number> {
    const rows = await this.run(target, "count(*)", "");
    return Number(rows[0]?.[0] ?? 0);
  }

  private async run(target: DeletionTarget, select: string, tail: string): Promise<(string | undefined)[][]> {
    const built = buildDeletionCondition(target, "athena");
    const start = new StartQueryExecutionCommand({
      QueryString: `SELECT ${select} FROM ${this.table} WHERE ${built.where} ${tail}`,
      ExecutionParameters: built.params.map(athenaDeletionLiteral),
      WorkGroup: this.options.workGroup,
      QueryExecutionContext: { Database: this.options.database },
    });
    const id = await succeededAcrossSwaps(
      this.client,
      start,
      (started) => this.waitForSuccess(started),
      this.sleep,
    );
    const rows: (string | undefined)[][] = [];
    let NextToken: string | undefined;
    do {
      const page = await this.client.send(new GetQueryResultsCommand({ QueryExecutionId: id, NextToken }));
      for (const row of page.ResultSet?.Rows ?? []) rows.push((row.Data ?? []).map((d) => d.VarCharValue));
      NextToken = page.NextToken;
    } while (NextToken);
    // The first row repeats the column names.
    return rows.slice(1);
  }

  private async waitForSuccess(id: string): Promise<void> {
    const poll = this.options.pollMs ?? { first: 200, max: 2000 };
    for (let pause = poll.first; ; pause = Math.min(pause * 2, poll.max)) {
      const out = await this.client.send(new GetQueryExecutionCommand({ QueryExecutionId: id }));
      const status = out.QueryExecution?.Status;
      if (status?.State === "SUCCEEDED") return;
      if (status?.State === "FAILED" || status?.State === "CANCELLED") {
        throw queryFailure(id, status.State, status.StateChangeReason);
      }
      await this.sleep(pause);
    }
  }
}
