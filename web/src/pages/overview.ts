import {
  CategoryScale,
  Chart,
  Filler,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";
import { formatCents } from "../../../lambda/core/money";
import type { AlertRuleView, BreakdownDimension, BudgetView, Overview, PeriodSpend } from "../api";
import { type Child, h } from "../dom";
import { change, chartDay, chartMoney, count, counted, money, timeCell } from "../format";
import { type KeyDirectory, keyDirectory, keyRef } from "../key-ref";
import { vendorLabel } from "../labels";
import { keyNamesOf, scopeLabel, spendBar, WINDOWS } from "./budgets";
import { emptyState, loadInto, type Page, type PageContext, pageHead } from "./page";

/** Keys and end users the overview ranks. */
const TOP_SPENDERS = 5;

/** Budgets the overview lists: the nearest to their limits. */
const TOP_BUDGETS = 5;

Chart.register(LineController, LineElement, PointElement, CategoryScale, LinearScale, Filler, Tooltip);

/** The chart of the page last drawn: destroyed before the next one is drawn. */
let live: Chart | undefined;

function spendTile(label: string, spend: PeriodSpend, against: string, testId: string): HTMLElement {
  const delta = change(spend.micros, spend.previousMicros);
  const direction =
    spend.micros > spend.previousMicros ? "up" : spend.micros < spend.previousMicros ? "down" : "flat";
  return h(
    "div",
    { class: "tile", "data-testid": testId },
    h("span", { class: "tile-label" }, label),
    h("span", { class: "tile-value" }, money(spend.micros)),
    h(
      "span",
      { class: "tile-note" },
      h("span", { class: `trend ${direction}` }, delta),
      ` vs ${against} (`,
      money(spend.previousMicros),
      ")",
    ),
  );
}

function creditTiles(overview: Overview): HTMLElement[] {
  const { availableMicros, heldMicros, burnPerDayMicros, runwayDays } = overview.credits;
  const low = runwayDays !== null && runwayDays < 7;
  return [
    h(
      "div",
      { class: "tile", "data-testid": "overview-available" },
      h("span", { class: "tile-label" }, "Available credits"),
      h("span", { class: "tile-value" }, money(availableMicros)),
      h(
        "span",
        { class: "tile-note" },
        heldMicros > 0
          ? h("span", {}, money(heldMicros), " reserved for calls in flight")
          : "Nothing reserved",
      ),
    ),
    h(
      "div",
      { class: "tile", "data-testid": "overview-burn" },
      h("span", { class: "tile-label" }, "Burn rate"),
      h("span", { class: "tile-value" }, money(burnPerDayMicros), h("small", {}, " / day")),
      h("span", { class: "tile-note" }, "Average of the last 7 days"),
    ),
    h(
      "div",
      { class: `tile${low ? " warning" : ""}`, "data-testid": "overview-runway" },
      h("span", { class: "tile-label" }, "Runway"),
      h(
        "span",
        { class: "tile-value" },
        runwayDays === null ? "—" : runwayDays > 365 ? "Over a year" : counted(runwayDays, "day"),
      ),
      h(
        "span",
        { class: "tile-note" },
        runwayDays === null ? "No credits spent in the last 7 days" : "At the current burn rate",
      ),
    ),
  ];
}

function monthChart(overview: Overview): HTMLElement {
  const { days, cumulativeMicros } = overview.month;
  const total = cumulativeMicros.at(-1) ?? 0;
  const summary = `Spend this month: ${formatCents(total)} charged to credits by ${overview.today}.`;
  const canvas = h("canvas", { role: "img", "aria-label": summary });
  const axis = chartMoney(total);
  const card = h(
    "section",
    { class: "card chart-card", "data-testid": "overview-month" },
    h("h2", { class: "card-title" }, "Spend this month", h("span", { class: "card-figure" }, money(total))),
    h("div", { class: "chart-box" }, canvas),
    h("p", { class: "sr-only" }, summary),
  );
  live?.destroy();
  live = new Chart(canvas, {
    type: "line",
    data: {
      labels: days.map(chartDay),
      datasets: [
        {
          label: "Spent this month",
          data: cumulativeMicros,
          borderColor: "#4f46e5",
          backgroundColor: "rgba(79, 70, 229, 0.12)",
          fill: true,
          tension: 0.2,
          // One day alone still shows as a point, not an empty chart.
          pointRadius: days.length === 1 ? 4 : 0,
        },
      ],
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: window.matchMedia("(prefers-reduced-motion: reduce)").matches ? false : { duration: 300 },
      interaction: { mode: "index", intersect: false },
      scales: {
        x: { grid: { display: false }, ticks: { maxRotation: 0, autoSkipPadding: 12 } },
        y: { beginAtZero: true, ticks: { callback: (v) => axis(Number(v)) } },
      },
      plugins: {
        legend: { display: false },
        tooltip: { callbacks: { label: (item) => `Spent by then: ${axis(Number(item.raw))}` } },
      },
    },
  });
  return card;
}

function topModels(overview: Overview): HTMLElement {
  const body =
    overview.topModels.length === 0
      ? h("p", { class: "hint padded" }, "No calls in the last 30 days.")
      : h(
          "ol",
          { class: "ranking" },
          ...overview.topModels.map((m) =>
            h(
              "li",
              {},
              h(
                "span",
                { class: "ranking-name" },
                h("span", { class: "vendor" }, vendorLabel(m.vendor)),
                h("code", { class: "model" }, m.model ?? "—"),
              ),
              h("span", { class: "ranking-figure" }, money(m.costMicros)),
              h("span", { class: "ranking-note" }, callsNote(m.requests, m.refused)),
            ),
          ),
        );
  return h(
    "section",
    { class: "card", "data-testid": "overview-top-models" },
    h("h2", { class: "card-title" }, "Top models by cost", h("span", { class: "card-sub" }, "Last 30 days")),
    body,
  );
}

/** "12 calls", or "12 calls, 2 refused" when dmt refused some of them itself. */
const callsNote = (requests: number, refused: number) =>
  refused > 0 ? `${counted(requests, "call")}, ${count(refused)} refused` : counted(requests, "call");

/**
 * The top keys or end users by cost over the overview's last 30 days (the usage rows by key and by
 * user, core/breakdowns.ts), loaded apart; deleted users show as one line.
 */
function topSpenders(ctx: PageContext, overview: Overview, by: BreakdownDimension): HTMLElement {
  const body = h("div", {}, h("p", { class: "hint padded" }, "Loading…"));
  const keys: Promise<KeyDirectory> = by === "key" ? keyDirectory(ctx) : Promise.resolve(new Map());
  void Promise.all([
    ctx.api.breakdown(ctx.project.projectId, by, overview.spend.last30.from, overview.spend.last30.to),
    keys,
  ])
    .then(([report, names]) => {
      const lines = report.lines.slice(0, TOP_SPENDERS);
      body.replaceChildren(
        lines.length === 0
          ? h(
              "p",
              { class: "hint padded" },
              by === "key"
                ? "No calls in the last 30 days."
                : "No call named an end user in the last 30 days.",
            )
          : h(
              "ol",
              { class: "ranking" },
              ...lines.map((line) =>
                h(
                  "li",
                  {},
                  h(
                    "span",
                    { class: "ranking-name" },
                    line.deleted
                      ? h("span", { class: "muted" }, "Deleted users")
                      : by === "key"
                        ? keyRef(line.id ?? "", names)
                        : h("span", { class: "user-id", title: line.id ?? "" }, line.id ?? ""),
                  ),
                  h("span", { class: "ranking-figure" }, money(line.cost_micros)),
                  h("span", { class: "ranking-note" }, callsNote(line.requests, line.refused)),
                ),
              ),
            ),
      );
    })
    .catch(() =>
      body.replaceChildren(h("p", { class: "hint padded" }, "Could not be loaded; the Usage page has it.")),
    );
  return h(
    "section",
    { class: "card", "data-testid": `overview-top-${by === "key" ? "keys" : "users"}` },
    h(
      "h2",
      { class: "card-title" },
      by === "key" ? "Top keys by cost" : "Top end users by cost",
      h("span", { class: "card-sub" }, "Last 30 days"),
    ),
    body,
  );
}

/** How much of its limit a budget has spent, 0 to 1 (a per-user budget has no single figure: 0). */
const shareOf = (b: BudgetView) =>
  b.spent_usd === undefined || Number(b.limit_usd) <= 0 ? 0 : Number(b.spent_usd) / Number(b.limit_usd);

/**
 * The budgets nearest to their limits, with their spend bars; hidden while the project has none (the
 * Budgets page sets them). Loaded apart, so the overview does not wait for it.
 */
function budgetsSection(ctx: PageContext): HTMLElement {
  const section = h("section", { class: "card", "data-section": "budgets", hidden: true });
  void Promise.all([ctx.api.budgets(ctx.project.projectId), keyNamesOf(ctx)])
    .then(([budgets, names]) => {
      if (budgets.length === 0) return;
      const nearest = [...budgets].sort((a, b) => shareOf(b) - shareOf(a)).slice(0, TOP_BUDGETS);
      section.append(
        h(
          "h2",
          { class: "card-title" },
          "Budgets nearest their limits",
          h("span", { class: "card-sub" }, `${count(budgets.length)} in all`),
        ),
        h(
          "ul",
          { class: "budget-list" },
          ...nearest.map((b) =>
            h(
              "li",
              { "data-budget": b.id },
              h(
                "span",
                { class: "budget-name" },
                `${scopeLabel(b, names)} · ${WINDOWS[b.window]}`,
                b.soft ? " (soft)" : "",
              ),
              spendBar(b),
            ),
          ),
        ),
      );
      section.hidden = false;
    })
    // The overview stands without it; the Budgets page says what went wrong.
    .catch(() => undefined);
  return section;
}

/** One alert rule as a line: what it watches, and whether it has fired in its current crossing. */
function alertLine(rule: AlertRuleView): HTMLElement {
  if (rule.kind === "budget_thresholds") {
    return h(
      "li",
      { "data-rule": rule.ruleId },
      h("span", { class: "budget-name" }, "Budget thresholds"),
      h("span", {}, `${rule.thresholds.map((t) => `${t}%`).join(", ")} of each budget`),
    );
  }
  return h(
    "li",
    { "data-rule": rule.ruleId },
    h("span", { class: "budget-name" }, `Low balance: under ${formatCents(rule.thresholdMicros)}`),
    // Fired once per crossing; it re-arms when the balance is back above the amount.
    rule.armed || rule.firedAt === undefined
      ? h("span", { class: "muted" }, "Watching")
      : h("span", { class: "alert-fired" }, "Fired ", timeCell(rule.firedAt, "")),
  );
}

/**
 * The project's alert rules (Settings → Alerts and Webhooks sets them) and whether the low-balance
 * one has fired; without rules, where to set one. Loaded apart, so the overview does not wait for it.
 */
function alertsSection(ctx: PageContext): HTMLElement {
  const section = h("section", { class: "card", "data-section": "alerts", hidden: true });
  void ctx.api
    .alertRules(ctx.project.projectId)
    .then((rules) => {
      section.append(
        h("h2", { class: "card-title" }, "Alerts", h("span", { class: "card-sub" }, "Settings → Alerts")),
        rules.length === 0
          ? h(
              "p",
              { class: "card-note" },
              "No alerts set. An alert sends an event (and your webhooks a signed request) when credits run low or a budget passes a share of its limit.",
            )
          : h("ul", { class: "budget-list" }, ...rules.map(alertLine)),
      );
      section.hidden = false;
    })
    // The overview stands without it; Settings says what went wrong.
    .catch(() => undefined);
  return section;
}

/** The sections loaded apart from the overview's figures. */
function laterSections(ctx: PageContext): HTMLElement[] {
  return [budgetsSection(ctx), alertsSection(ctx)];
}

function draw(ctx: PageContext, overview: Overview): Child[] {
  const spent = overview.spend.last30.micros + overview.spend.last30.previousMicros;
  return [
    h(
      "div",
      { class: "tiles", "data-testid": "overview-spend" },
      spendTile("Spend today", overview.spend.today, "yesterday", "overview-today"),
      spendTile("This month", overview.spend.month, "the same days last month", "overview-month-spend"),
      spendTile("Last 30 days", overview.spend.last30, "the 30 before", "overview-30"),
    ),
    h("div", { class: "tiles" }, ...creditTiles(overview)),
    ...laterSections(ctx),
    spent === 0 && overview.credits.availableMicros === 0
      ? h(
          "section",
          { class: "card" },
          emptyState(
            "chart",
            "Nothing spent yet",
            "Grant credits, create an API key, and the calls made with it are counted here within seconds.",
          ),
        )
      : h(
          "div",
          { class: "grid overview-grid" },
          monthChart(overview),
          topModels(overview),
          topSpenders(ctx, overview, "key"),
          topSpenders(ctx, overview, "user"),
        ),
    overview.listPriceUnchargedMicros > 0
      ? h(
          "p",
          { class: "hint" },
          "Calls with your own vendor keys in the last 30 days: ",
          money(overview.listPriceUnchargedMicros),
          " at list price, not charged to credits.",
        )
      : null,
  ];
}

export const overviewPage: Page = {
  path: "/dashboard/overview",
  title: "Overview",
  icon: "home",
  render(ctx, main) {
    const body = h("div", { class: "overview" });
    main.replaceChildren(
      pageHead("Overview", "What this project spends, what is left, and where it goes. Days are UTC."),
      body,
    );
    loadInto(
      body,
      { loading: "Loading the overview…", failed: "The overview", rows: 6 },
      () => ctx.api.overview(ctx.project.projectId),
      (overview) => draw(ctx, overview),
    );
  },
};
