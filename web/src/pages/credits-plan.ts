import type { PlanSummary, ProjectPlanView } from "../api";
import { h } from "../dom";
import { formatTime } from "../format";
import { loadInto, type PageContext } from "./page";

/** "+20%", "-5%", "list price". */
const signed = (percent: string) =>
  Number(percent) === 0 ? "list price" : percent.startsWith("-") ? `${percent}%` : `+${percent}%`;

/** A plan's rules: the percentage for everything, then each vendor's and model glob's. */
function rules(plan: PlanSummary): HTMLElement {
  const rows = [
    ["Every model", signed(plan.percent)],
    ...Object.entries(plan.vendors).map(([vendor, p]) => [`${vendor} models`, signed(p ?? "0")]),
    ...Object.entries(plan.models).map(([glob, p]) => [glob, signed(p)]),
  ];
  return h(
    "table",
    { class: "table", "data-testid": "plan-rules" },
    h(
      "tbody",
      {},
      ...rows.map(([what, rate]) =>
        h("tr", {}, h("td", {}, what ?? ""), h("td", { class: "num" }, rate ?? "")),
      ),
    ),
  );
}

function planBody(view: ProjectPlanView): HTMLElement[] {
  const { current } = view;
  return [
    h(
      "p",
      { "data-testid": "plan-name" },
      h("strong", {}, current.name),
      h("span", { class: "muted" }, ` · plan ${current.planId}, version ${current.version}`),
    ),
    rules(current),
    h(
      "p",
      { class: "muted" },
      "Calls paid by credits are charged the vendor's list price adjusted by this plan; the most specific rule applies. Calls on your own vendor keys are not charged.",
    ),
    ...view.scheduled.map((next) =>
      h(
        "p",
        { class: "muted", "data-testid": "plan-scheduled" },
        `From ${formatTime(next.from)}: ${next.name} (version ${next.version}), ${signed(next.percent)} for every model`,
        Object.keys(next.vendors).length + Object.keys(next.models).length > 0 ? " with its own rules" : "",
        ".",
      ),
    ),
  ];
}

/** The Credits page's "Price plan" card: read-only for every member; operators change plans with the CLI. */
export function planSection(ctx: PageContext): HTMLElement {
  const body = h("div", { class: "plan-body" });
  loadInto(
    body,
    { loading: "Loading the price plan…", failed: "The price plan", rows: 2 },
    () => ctx.api.plan(ctx.project.projectId),
    planBody,
  );
  return h(
    "section",
    { class: "card", "data-testid": "price-plan" },
    h("h2", { class: "card-title" }, "Price plan"),
    body,
  );
}
