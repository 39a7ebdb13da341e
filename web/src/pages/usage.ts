import { BarController, BarElement, CategoryScale, Chart, LinearScale, Tooltip } from "chart.js";
import { formatCents } from "../../../lambda/core/money";
import type { BreakdownDimension, BreakdownLine, BreakdownReport, UsageReport, UsageSeries } from "../api";
import { h, replace } from "../dom";
import { chartDay, chartMoney, count, counted, money, shortCount } from "../format";
import { type KeyDirectory, keyDirectory, keyRef } from "../key-ref";
import { vendorLabel } from "../labels";
import {
  emptyState,
  errorMessage,
  errorState,
  failureState,
  loadingState,
  type Page,
  type PageContext,
  pageHead,
} from "./page";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Tooltip);

const RANGES: [days: string, label: string][] = [
  ["7", "Last 7 days"],
  ["30", "Last 30 days"],
  ["90", "Last 90 days"],
];
/** Series drawn on their own; the rest are summed as "Other" so a chart stays readable. */
const MAX_SERIES = 7;
const COLOURS = ["#4f46e5", "#0ea5e9", "#10b981", "#f59e0b", "#ef4444", "#8b5cf6", "#ec4899", "#94a3b8"];
const DAY_MS = 86_400_000;

type Metric = "requests" | "tokens" | "cost";

const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

function seriesLabel(series: Pick<UsageSeries, "vendor" | "model">): string {
  return `${vendorLabel(series.vendor)} · ${series.model ?? "no model"}`;
}

function valuesOf(series: UsageSeries, metric: Metric): number[] {
  if (metric === "requests") return series.requests;
  if (metric === "cost") return series.cost_micros;
  return series.input_tokens.map((v, i) => v + (series.output_tokens[i] ?? 0));
}

/** The busiest series, then one "Other" line for the rest. */
function chartLines(report: UsageReport, metric: Metric): { label: string; values: number[] }[] {
  const lines = report.series
    .slice(0, MAX_SERIES)
    .map((s) => ({ label: seriesLabel(s), values: valuesOf(s, metric) }));
  const rest = report.series.slice(MAX_SERIES);
  if (rest.length > 0) {
    lines.push({
      label: `Other (${rest.length})`,
      values: report.days.map((_, i) => sum(rest.map((s) => valuesOf(s, metric)[i] ?? 0))),
    });
  }
  return lines;
}

const formatters: Record<Metric, (v: number) => string> = {
  requests: count,
  tokens: shortCount,
  cost: formatCents,
};

/** A legend in the page, beside the chart: it wraps instead of being clipped, whatever the series. */
function legend(lines: { label: string }[]): HTMLElement {
  return h(
    "ul",
    { class: "chart-legend" },
    ...lines.map((line, i) => {
      const swatch = h("span", { class: "swatch", "aria-hidden": "true" });
      // Set through the CSSOM: the CSP refuses style attributes.
      swatch.style.background = COLOURS[i % COLOURS.length] ?? "";
      return h("li", {}, swatch, line.label);
    }),
  );
}

/**
 * A stacked bar chart of every day of the range (a 30-day range draws 30 days, the quiet ones as
 * gaps), with a text summary for screen readers and tests.
 */
function chartCard(report: UsageReport, metric: Metric, title: string, live: Chart[]): HTMLElement {
  const lines = chartLines(report, metric);
  const totals = report.days.map((_, i) => sum(lines.map((l) => l.values[i] ?? 0)));
  const total = sum(totals);
  const peak = totals.indexOf(Math.max(...totals));
  const format = formatters[metric];
  const axis = metric === "cost" ? chartMoney(Math.max(...totals)) : format;
  const summary =
    total === 0
      ? `${title}: nothing in this range.`
      : `${title}: ${format(total)} in total; busiest day ${report.days[peak]} with ${format(totals[peak] ?? 0)}.`;
  const canvas = h("canvas", { role: "img", "aria-label": summary });
  const card = h(
    "section",
    {
      class: "card chart-card",
      "data-metric": metric,
      "data-total": String(total),
      "data-days": String(report.days.length),
    },
    h("h2", { class: "card-title" }, title, h("span", { class: "card-figure" }, format(total))),
    h("div", { class: "chart-box" }, canvas),
    legend(lines),
    h("p", { class: "sr-only" }, summary),
  );
  const chart = new Chart(canvas, {
    type: "bar",
    data: {
      labels: report.days.map(chartDay),
      datasets: lines.map((line, i) => ({
        label: line.label,
        data: line.values,
        backgroundColor: COLOURS[i % COLOURS.length],
        borderRadius: 3,
        maxBarThickness: 28,
      })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: window.matchMedia("(prefers-reduced-motion: reduce)").matches ? false : { duration: 300 },
      interaction: { mode: "index", intersect: false },
      scales: {
        x: { stacked: true, grid: { display: false }, ticks: { maxRotation: 0, autoSkipPadding: 12 } },
        y: { stacked: true, beginAtZero: true, ticks: { callback: (v) => axis(Number(v)), precision: 0 } },
      },
      plugins: {
        // The legend is the page's own list below the chart (never clipped by the canvas).
        legend: { display: false },
        tooltip: {
          callbacks: {
            label: (item) =>
              `${item.dataset.label}: ${metric === "cost" ? axis(Number(item.raw)) : count(Number(item.raw))}`,
          },
        },
      },
    },
  });
  live.push(chart);
  return card;
}

function tile(label: string, value: string | HTMLElement, note: string, testId: string): HTMLElement {
  return h(
    "div",
    { class: "tile" },
    h("span", { class: "tile-label" }, label),
    h("span", { class: "tile-value", "data-testid": testId }, value),
    h("span", { class: "tile-note" }, note),
  );
}

function tiles(report: UsageReport): HTMLElement {
  const { managed, byok, dual } = report.totals;
  const all = [managed, byok, dual];
  const requests = sum(all.map((t) => t.requests));
  const errors = sum(all.map((t) => t.errors));
  const refused = sum(all.map((t) => t.refused));
  const input = sum(all.map((t) => t.input_tokens));
  const output = sum(all.map((t) => t.output_tokens));
  const own = byok.requests + dual.requests;
  return h(
    "div",
    { class: "tiles" },
    tile(
      "Requests",
      count(requests),
      requests === 0
        ? "No calls"
        : `${((100 * errors) / requests).toFixed(1)}% failed${refused > 0 ? ` · ${count(refused)} refused by dmt` : ""}`,
      "usage-requests",
    ),
    tile(
      "Tokens",
      shortCount(input + output),
      `${shortCount(input)} in · ${shortCount(output)} out`,
      "usage-tokens",
    ),
    tile(
      "Charged to credits",
      money(managed.cost_micros),
      `${counted(managed.requests, "call")} with the service's keys`,
      "usage-charged",
    ),
    tile(
      "Own vendor keys",
      count(own),
      `${formatCents(byok.cost_micros + dual.cost_micros)} at list price, not charged`,
      "usage-byok",
    ),
  );
}

const COLUMN_HINTS: Record<string, string> = {
  Failed: "Calls that ended in an error, refused ones included",
  Refused:
    "Of the failed calls, those dmt refused itself before any vendor: credits, budget, rate limit or policy",
};

/** A table of figures; `charged`: with what credits paid (known per key and user, not per model). */
function usageTable(
  caption: string,
  head: string,
  rows: HTMLTableRowElement[],
  charged: boolean,
): HTMLElement {
  const columns = [head, "Requests", "Failed", "Refused", "Input tokens", "Output tokens", "Cost"];
  if (charged) columns.push("Charged to credits");
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "table breakdown" },
      h("caption", { class: "sr-only" }, caption),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ...columns.map((t, i) =>
            h("th", { scope: "col", class: i > 0 ? "num" : "", title: COLUMN_HINTS[t] ?? "" }, t),
          ),
        ),
      ),
      h("tbody", {}, ...rows),
    ),
  );
}

const figures = (
  f: {
    requests: number;
    errors: number;
    refused: number;
    input_tokens: number;
    output_tokens: number;
    cost_micros: number;
  },
  charged?: number,
) => [
  h("td", { class: "num" }, count(f.requests)),
  h("td", { class: "num" }, count(f.errors)),
  h("td", { class: "num" }, count(f.refused)),
  h("td", { class: "num" }, count(f.input_tokens)),
  h("td", { class: "num" }, count(f.output_tokens)),
  h("td", { class: "num" }, money(f.cost_micros)),
  charged === undefined ? null : h("td", { class: "num" }, money(charged)),
];

function modelTable(report: UsageReport): HTMLElement {
  return usageTable(
    `Usage from ${report.from} to ${report.to} by vendor and model, dearest first`,
    "Vendor and model",
    report.series.map((s) =>
      h(
        "tr",
        {},
        h(
          "td",
          {},
          h("span", { class: "vendor" }, vendorLabel(s.vendor)),
          h("code", { class: "model" }, s.model ?? "—"),
        ),
        ...figures({
          requests: sum(s.requests),
          errors: sum(s.errors),
          refused: sum(s.refused),
          input_tokens: sum(s.input_tokens),
          output_tokens: sum(s.output_tokens),
          cost_micros: sum(s.cost_micros),
        }),
      ),
    ),
    false,
  );
}

function lineName(line: BreakdownLine, by: BreakdownDimension, keys: KeyDirectory): HTMLElement {
  if (line.deleted) {
    return h(
      "span",
      { class: "muted", title: "Users deleted on request: their figures stay" },
      "Deleted users",
    );
  }
  const id = line.id ?? "";
  if (by === "user") return h("span", { class: "user-id", title: id }, id);
  return keyRef(id, keys);
}

/**
 * By end user, the calls that named none: all calls (the key breakdown's totals) less the users'.
 * Without it the table would sum to less than the project.
 */
function withoutUser(report: BreakdownReport, all: BreakdownReport["totals"]): BreakdownReport["totals"] {
  return {
    requests: all.requests - report.totals.requests,
    errors: all.errors - report.totals.errors,
    refused: all.refused - report.totals.refused,
    input_tokens: all.input_tokens - report.totals.input_tokens,
    output_tokens: all.output_tokens - report.totals.output_tokens,
    cost_micros: all.cost_micros - report.totals.cost_micros,
    charged_micros: all.charged_micros - report.totals.charged_micros,
  };
}

function dimensionTable(
  report: BreakdownReport,
  keys: KeyDirectory,
  allCalls?: BreakdownReport["totals"],
): HTMLElement {
  const anonymous = report.by === "user" && allCalls ? withoutUser(report, allCalls) : undefined;
  const label = report.by === "key" ? "API key" : "End user";
  if (report.lines.length === 0 && (anonymous?.requests ?? 0) === 0) {
    return emptyState(
      "chart",
      report.by === "key" ? "No calls in this range" : "No call in this range named a user",
      report.by === "key"
        ? "Calls are counted per key a few seconds after they finish."
        : "A call names its end user with the X-User-ID header or the vendor's user field.",
    );
  }
  const rows = report.lines.map((line) =>
    h(
      "tr",
      { "data-id": line.id ?? "deleted" },
      h("td", {}, lineName(line, report.by, keys)),
      ...figures(line, line.charged_micros),
    ),
  );
  if (anonymous && anonymous.requests > 0) {
    rows.push(
      h(
        "tr",
        { "data-id": "none" },
        h("td", { class: "muted", title: "Calls that named no end user" }, "No end user"),
        ...figures(anonymous, anonymous.charged_micros),
      ),
    );
  }
  if (report.other) {
    rows.push(
      h(
        "tr",
        { "data-id": "other" },
        h("td", { class: "muted" }, `Other (${count(report.other.count)})`),
        ...figures(report.other, report.other.charged_micros),
      ),
    );
  }
  return usageTable(
    `Usage from ${report.from} to ${report.to} by ${label.toLowerCase()}, dearest first`,
    label,
    rows,
    true,
  );
}

const VIEWS: [view: "model" | BreakdownDimension, label: string][] = [
  ["model", "By model"],
  ["key", "By API key"],
  ["user", "By end user"],
];

/**
 * The period's figures as a table, by model (from the report), by API key or by end user (each read
 * once when first chosen), dearest first.
 */
function breakdownCard(ctx: PageContext, report: UsageReport): HTMLElement {
  const holder = h("div", { "aria-live": "polite" });
  const loaded = new Map<BreakdownDimension, Promise<BreakdownReport>>();
  const keys = keyDirectory(ctx);
  let shown: "model" | BreakdownDimension = "model";
  const buttons = VIEWS.map(([view, label]) =>
    h(
      "button",
      {
        type: "button",
        class: "segment",
        "aria-pressed": String(view === shown),
        "data-view": view,
        on: { click: () => void show(view) },
      },
      label,
    ),
  );
  async function show(view: "model" | BreakdownDimension): Promise<void> {
    shown = view;
    for (const b of buttons) b.setAttribute("aria-pressed", String(b.dataset.view === view));
    if (view === "model") {
      replace(holder, modelTable(report));
      return;
    }
    replace(holder, loadingState("Loading the breakdown…", 3));
    const read = (dimension: BreakdownDimension) => {
      let pending = loaded.get(dimension);
      if (!pending) {
        pending = ctx.api.breakdown(ctx.project.projectId, dimension, report.from, report.to);
        loaded.set(dimension, pending);
      }
      return pending;
    };
    try {
      // By user, the key breakdown's totals (every call) give the calls that named no user.
      const [lines, names, all] = await Promise.all([
        read(view),
        keys,
        view === "user" ? read("key") : undefined,
      ]);
      if (shown === view) replace(holder, dimensionTable(lines, names, all?.totals));
    } catch (err) {
      loaded.delete(view);
      loaded.delete("key");
      if (shown === view)
        replace(
          holder,
          failureState("The breakdown", err, () => void show(view)),
        );
    }
  }
  void show("model");
  return h(
    "section",
    { class: "card", "data-section": "breakdown" },
    h(
      "div",
      { class: "card-title with-actions" },
      h("h2", {}, "Breakdown"),
      h("div", { class: "segments", role: "group", "aria-label": "Break down by" }, ...buttons),
    ),
    holder,
  );
}

/** Charts of the page last drawn: destroyed before the next are drawn. */
let live: Chart[] = [];

export const usagePage: Page = {
  path: "/dashboard/usage",
  title: "Usage",
  icon: "chart",
  render(ctx, main) {
    const body = h("div", { class: "usage", "aria-live": "polite" });
    const range = h(
      "select",
      { id: "usage-range", class: "range-select", "aria-label": "Range" },
      ...RANGES.map(([days, label]) => h("option", { value: days, selected: days === "30" }, label)),
    );
    range.addEventListener("change", () => void load());
    replace(
      main,
      pageHead(
        "Usage",
        "Requests, tokens and cost per day (UTC), by vendor and model, by API key and by end user.",
        range,
      ),
      body,
    );

    async function load(): Promise<void> {
      for (const chart of live) chart.destroy();
      live = [];
      replace(body, h("section", { class: "card" }, loadingState("Loading usage…", 5)));
      const today = Date.parse(isoDay(Date.now()));
      const to = isoDay(today);
      const from = isoDay(today - (Number(range.value) - 1) * DAY_MS);
      try {
        const report = await ctx.api.usage(ctx.project.projectId, from, to);
        const requests = sum(Object.values(report.totals).map((t) => t.requests));
        if (requests === 0) {
          replace(
            body,
            h(
              "section",
              { class: "card" },
              emptyState(
                "chart",
                "No usage in this range",
                "Calls made with this project's API keys are counted here a few seconds after they finish.",
              ),
            ),
          );
          return;
        }
        replace(body, tiles(report));
        body.append(
          h(
            "div",
            { class: "grid charts" },
            chartCard(report, "requests", "Requests per day", live),
            chartCard(report, "tokens", "Tokens per day", live),
            chartCard(report, "cost", "Cost per day", live),
          ),
          breakdownCard(ctx, report),
        );
      } catch (err) {
        replace(
          body,
          errorState(`Usage could not be loaded: ${errorMessage(err)}`, () => void load()),
        );
      }
    }
    void load();
  },
};
