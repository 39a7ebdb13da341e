/**
 * The one query builder for both engines. The SQL text is fixed by the code: column names come from the
 * record schema, and every value (project, days, filter values) is a positional `?` parameter.
 */

import { COMPACTED_FILE_PREFIX } from "../../core/compaction";
import type { InteractionQuery } from "../../core/export-query";
import type { ExportFilters } from "../../core/export-request";
import { type ColumnKind, RECORD_COLUMNS } from "../../core/record";

export type QueryParam = { type: "string"; value: string } | { type: "integer"; value: number };

export interface BuiltQuery {
  /** The select list: every record column, quoted. */
  columns: string;
  /** The condition, with `?` placeholders in the order of `params`. */
  where: string;
  params: QueryParam[];
  /** Its first part alone: the project and days (the partitions read), and their parameters. */
  partition: { where: string; params: QueryParam[] };
}

/** Filter keys are record columns of the same name; their kinds decide the parameter type. */
const FILTER_COLUMNS: Record<keyof ExportFilters, ColumnKind> = {
  model: "string",
  user_id: "string",
  vendor: "string",
  status_code: "int32",
  billing_mode: "string",
};

const quote = (identifier: string) => `"${identifier}"`;

export function buildInteractionQuery(query: InteractionQuery): BuiltQuery {
  // The partition columns first, so both engines prune to the project's folders for those days.
  const conditions = [
    `${quote("project")} = ?`,
    `${quote("dt")} BETWEEN ? AND ?`,
    `${quote("project_id")} = ?`,
  ];
  const params: QueryParam[] = [
    { type: "string", value: query.projectId },
    { type: "string", value: query.start },
    { type: "string", value: query.end },
    { type: "string", value: query.projectId },
  ];
  // The partition columns alone: what a subquery over the same partitions needs.
  const partition = { where: conditions.slice(0, 2).join(" AND "), params: params.slice(0, 3) };
  for (const key of Object.keys(FILTER_COLUMNS) as (keyof ExportFilters)[]) {
    const value = query.filters[key];
    if (value === undefined) continue;
    conditions.push(`${quote(key)} = ?`);
    params.push(
      FILTER_COLUMNS[key] === "int32"
        ? { type: "integer", value: value as number }
        : { type: "string", value: value as string },
    );
  }
  return {
    columns: RECORD_COLUMNS.map((c) => quote(c.name)).join(", "),
    where: conditions.join(" AND "),
    params,
    partition,
  };
}

/**
 * The condition that counts each row once while a compaction swaps files (core/compaction.ts): a
 * compacted file's row is left out where a consumer file still holds its transaction. `path` is the
 * engine's file-name column; `consumerIds` a subquery of the transaction ids in the consumer files.
 */
export function onceAcrossCompaction(path: string, consumerIds: string): string {
  return `NOT (${path} LIKE '%/${COMPACTED_FILE_PREFIX}%' AND ${quote("transaction_id")} IN (${consumerIds}))`;
}

/** A file name column's condition: not a compacted file. */
export function consumerFile(path: string): string {
  return `${path} NOT LIKE '%/${COMPACTED_FILE_PREFIX}%'`;
}

/** What the FOCUS aggregate groups by, calls and erased usage alike: day, vendor, model, key, billing mode, price version. */
const GROUP_KEYS = [
  quote("dt"),
  quote("vendor"),
  `coalesce(${quote("model")}, '')`,
  quote("key_id"),
  quote("billing_mode"),
  `coalesce(${quote("price_version")}, '')`,
];

/**
 * The FOCUS export's aggregate (core/focus.ts): one row per UTC day, vendor, model, key, billing mode
 * and price version, over the rows `where` selects. Every value leaves as text (Athena's results are
 * text anyway), so sums of int64 reach JavaScript exactly, as digits.
 */
export function usageGroupSql(source: string, where: string, jsonText: JsonText): string {
  const text = (sql: string) => `CAST(${sql} AS VARCHAR)`;
  const sum = (column: string) => text(`coalesce(sum(CAST(${quote(column)} AS BIGINT)), 0)`);
  const keys = GROUP_KEYS;
  const failed = `CASE WHEN ${quote("status_code")} >= 400 OR ${quote("error_type")} IS NOT NULL THEN 1 ELSE 0 END`;
  const values = [
    ...keys,
    text("count(*)"),
    text(`count(${quote("cost_micros")})`),
    text(`sum(${failed})`),
    ...USAGE_SUMS.map(sum),
    // A price plan's list amount (docs/plans.md) is in the breakdown; calls priced before plans have
    // none, and their list amount is their cost.
    text(
      `coalesce(sum(coalesce(CAST(${jsonText(quote("cost_breakdown"), "$.list_micros")} AS BIGINT), ${quote("cost_micros")})), 0)`,
    ),
  ];
  const positions = keys.map((_, i) => i + 1).join(", ");
  return `SELECT ${values.join(", ")} FROM ${source} WHERE ${where} GROUP BY ${positions} ORDER BY ${positions}`;
}

/** An engine's JSON scalar as text: DuckDB's `json_extract_string`, Athena's `json_extract_scalar`. */
export type JsonText = (column: string, path: string) => string;

/** The summed columns of `usageGroupSql`, after its keys and counts, in order. */
export const USAGE_SUMS = [
  "input_tokens",
  "output_tokens",
  "cached_input_tokens",
  "cache_write_tokens",
  "reasoning_tokens",
  "cost_micros",
] as const;

/**
 * The condition over erased usage (core/erased-usage.ts) that matches a FOCUS export's rows: the
 * project's partitions in the range, and the filters erased usage still has columns for. A filter on
 * a user or a status selects calls by what erasure removed, so it matches no erased usage: undefined.
 */
export function buildErasedUsageQuery(
  query: InteractionQuery,
): { where: string; params: QueryParam[] } | undefined {
  if (query.filters.user_id !== undefined || query.filters.status_code !== undefined) return undefined;
  const conditions = [`${quote("project")} = ?`, `${quote("dt")} BETWEEN ? AND ?`];
  const params: QueryParam[] = [
    { type: "string", value: query.projectId },
    { type: "string", value: query.start },
    { type: "string", value: query.end },
  ];
  for (const key of ["model", "vendor", "billing_mode"] as const) {
    const value = query.filters[key];
    if (value === undefined) continue;
    conditions.push(`${quote(key)} = ?`);
    params.push({ type: "string", value });
  }
  return { where: conditions.join(" AND "), params };
}

/**
 * Erased usage summed as `usageGroupSql` groups calls, in the same cell order (so `usageGroupFromCells`
 * reads both): day, vendor, model, key, billing mode, price version, then the counts and sums.
 */
export function erasedUsageGroupSql(source: string, where: string): string {
  const keys = GROUP_KEYS;
  const sums = ["calls", "priced_calls", "failed_calls", ...USAGE_SUMS, "list_micros"].map(
    (column) => `CAST(coalesce(sum(CAST(${quote(column)} AS BIGINT)), 0) AS VARCHAR)`,
  );
  const positions = keys.map((_, i) => i + 1).join(", ");
  return `SELECT ${[...keys, ...sums].join(", ")} FROM ${source} WHERE ${where} GROUP BY ${positions} ORDER BY ${positions}`;
}
