/**
 * The one query builder for both engines. The SQL text is fixed by the code: column names come from the
 * record schema, and every value (project, days, filter values) is a positional `?` parameter.
 */

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
  };
}
