import { type BreakdownCounters, type BreakdownLine, breakdownReport } from "../../lambda/core/breakdowns";
import { parseUsageRange, type UsageReport, usageReport } from "../../lambda/core/interactions-usage";
import { keyNames } from "../../lambda/core/key-names";
import { formatCents } from "../../lambda/core/money";
import { command } from "./command";
import { table } from "./format";
import { oneOf, required, text } from "./options";

const BY = ["day", "model", "key", "user"] as const;
type By = (typeof BY)[number];

/** What every row and the totals count; `charged_micros` is known per key and user, not per day or model. */
interface Figures {
  requests: number;
  errors: number;
  /** Of the errors, the calls dmt refused itself (credits, budget, rate limit, policy). */
  refused: number;
  input_tokens: number;
  output_tokens: number;
  /** Every call's cost at list price, own vendor keys included (unpriced calls add 0). */
  cost_micros: number;
  /** What credits paid: managed calls' cost. */
  charged_micros?: number;
}

type Row = Figures &
  (
    | { day: string }
    | { vendor: string; model: string | null }
    | { key: string; name: string | null }
    | { user: string | null; deleted?: true; no_user?: true }
    | { other: number }
  );

export interface UsageResult {
  project: string;
  by: By;
  from: string;
  to: string;
  rows: Row[];
  /** The whole period, from the same rollups as the dashboard's Usage page. */
  totals: Required<Figures>;
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** The period's totals over every billing mode, as the Usage page's tiles add them. */
function totalsOf(report: UsageReport): Required<Figures> {
  const modes = Object.values(report.totals);
  const total = (field: keyof Figures & keyof (typeof modes)[number]) => sum(modes.map((m) => m[field]));
  return {
    requests: total("requests"),
    errors: total("errors"),
    refused: total("refused"),
    input_tokens: total("input_tokens"),
    output_tokens: total("output_tokens"),
    cost_micros: total("cost_micros"),
    charged_micros: report.totals.managed.cost_micros,
  };
}

function daily(report: UsageReport): Row[] {
  return report.days.map((day, i) => {
    const at = (
      field: "requests" | "errors" | "refused" | "input_tokens" | "output_tokens" | "cost_micros",
    ) => sum(report.series.map((s) => s[field][i] ?? 0));
    return {
      day,
      requests: at("requests"),
      errors: at("errors"),
      refused: at("refused"),
      input_tokens: at("input_tokens"),
      output_tokens: at("output_tokens"),
      cost_micros: at("cost_micros"),
    };
  });
}

function byModel(report: UsageReport): Row[] {
  return report.series.map((s) => ({
    vendor: s.vendor,
    model: s.model,
    requests: sum(s.requests),
    errors: sum(s.errors),
    refused: sum(s.refused),
    input_tokens: sum(s.input_tokens),
    output_tokens: sum(s.output_tokens),
    cost_micros: sum(s.cost_micros),
  }));
}

const figures = (f: BreakdownCounters): Figures => ({
  requests: f.requests,
  errors: f.errors,
  refused: f.refused,
  input_tokens: f.input_tokens,
  output_tokens: f.output_tokens,
  cost_micros: f.cost_micros,
  charged_micros: f.charged_micros,
});

/** The figures of `total` that `part` leaves: calls that named no end user. */
function rest(total: Required<Figures>, part: BreakdownCounters): Figures {
  return {
    requests: total.requests - part.requests,
    errors: total.errors - part.errors,
    refused: total.refused - part.refused,
    input_tokens: total.input_tokens - part.input_tokens,
    output_tokens: total.output_tokens - part.output_tokens,
    cost_micros: total.cost_micros - part.cost_micros,
    charged_micros: total.charged_micros - part.charged_micros,
  };
}

function lineRow(line: BreakdownLine, by: "key" | "user", names: Map<string, string>): Row {
  if (by === "key") return { key: line.id ?? "", name: names.get(line.id ?? "") ?? null, ...figures(line) };
  return line.deleted ? { user: null, deleted: true, ...figures(line) } : { user: line.id, ...figures(line) };
}

/** A row's first cells in the human table. */
function label(row: Row): string {
  if ("day" in row) return row.day;
  if ("vendor" in row) return `${row.vendor} ${row.model ?? "(no model)"}`;
  if ("key" in row) return row.name === null ? row.key : `${row.key} ("${row.name}")`;
  if ("other" in row) return `(${row.other} more)`;
  if (row.deleted) return "(deleted users)";
  if (row.no_user) return "(no end user)";
  return row.user ?? "";
}

const HEAD: Record<By, string> = { day: "day", model: "model", key: "key", user: "user" };

function printUsage(result: UsageResult): string {
  const charged = result.by === "key" || result.by === "user";
  const cells = result.rows.map((row) => ({
    [HEAD[result.by]]: label(row),
    requests: row.requests,
    failed: row.errors,
    refused: row.refused,
    "input tokens": row.input_tokens,
    "output tokens": row.output_tokens,
    cost: formatCents(row.cost_micros),
    ...(row.charged_micros !== undefined && { charged: formatCents(row.charged_micros) }),
  }));
  const columns = [HEAD[result.by], "requests", "failed", "refused", "input tokens", "output tokens", "cost"];
  const { totals } = result;
  return [
    `Usage of ${result.project}, ${result.from} to ${result.to} (UTC), by ${result.by}:`,
    table(cells, charged ? [...columns, "charged"] : columns),
    `Total: ${totals.requests} requests (${totals.errors} failed${totals.refused > 0 ? `, ${totals.refused} of them refused by dmt` : ""}), ${totals.input_tokens} input and ${totals.output_tokens} output tokens, ${formatCents(totals.cost_micros)} at list price, ${formatCents(totals.charged_micros)} charged to credits.`,
    "Amounts to the cent, as the dashboard shows them; --json has them exactly, in micro-USD.",
  ].join("\n");
}

/** `dmt usage`: the dashboard's Usage page on the command line, from the same rollups and functions. */
export const usageCommands = [
  command({
    name: "usage",
    summary:
      "a project's calls, tokens and cost per day, model, key or end user (the dashboard's Usage page)",
    details:
      "Cost is at list price, calls on the project's own vendor keys included; 'charged' is what credits paid.\nThe figures come from the daily rollups the dashboard reads, so both show the same numbers.",
    options: {
      project: required("<id>", "the project"),
      by: oneOf(BY, "one row per UTC day (default), vendor and model, API key, or end user"),
      from: text("YYYY-MM-DD", "the first day (UTC; default 29 days before --to)"),
      to: text("YYYY-MM-DD", "the last day (UTC; default today)"),
    },
    examples: [
      "dmt usage --project demo",
      "dmt usage --project demo --by key --from 2026-11-01 --to 2026-11-30 --json",
    ],
    run: async ({ values, open }): Promise<UsageResult> => {
      const by = values.by ?? "day";
      const { from, to } = parseUsageRange(
        {
          ...(values.from !== undefined && { from: [values.from] }),
          ...(values.to !== undefined && { to: [values.to] }),
        },
        Date.now(),
      );
      const services = await open();
      const projectId = await services.project(values.project);
      const { usage } = services;
      const report = usageReport(await usage.query(projectId, from, to), from, to);
      const totals = totalsOf(report);
      const result = { project: projectId, by, from, to, totals };
      if (by === "day") return { ...result, rows: daily(report) };
      if (by === "model") return { ...result, rows: byModel(report) };
      const [breakdown, keys] = await Promise.all([
        usage.breakdown(projectId, by, from, to).then((rows) => breakdownReport(rows, by, from, to)),
        by === "key" ? services.store.listKeys(projectId) : [],
      ]);
      const names = keyNames(keys);
      const rows = breakdown.lines.map((line) => lineRow(line, by, names));
      if (breakdown.other) rows.push({ other: breakdown.other.count, ...figures(breakdown.other) });
      // Calls that named no end user have no user row: one row for them, so the rows add up to the total.
      const unnamed = rest(totals, breakdown.totals);
      if (by === "user" && unnamed.requests > 0) rows.push({ user: null, no_user: true, ...unnamed });
      return { ...result, rows };
    },
    print: printUsage,
  }),
];
