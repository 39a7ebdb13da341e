import { decimalMicros } from "../../../lambda/core/money";
import type { BudgetInput, BudgetView } from "../api";
import { h } from "../dom";
import { formError, onSubmit } from "../form";
import { formatTime, money } from "../format";
import { emptyState, errorMessage, loadInto, type Page, type PageContext, pageHead } from "./page";

export const WINDOWS: Record<BudgetView["window"], string> = {
  day: "per day",
  month: "per month",
  total: "in total",
};

/** What a budget applies to; a key by its name with its id beside it (`names`: the project's keys). */
export function scopeLabel(budget: BudgetView, names: ReadonlyMap<string, string> = new Map()): string {
  if (budget.scope === "project") return "Project";
  if (budget.scope === "key") {
    const name = names.get(budget.key ?? "");
    return name === undefined ? `Key ${budget.key}` : `Key ${name} (${budget.key})`;
  }
  return budget.user === "*" ? "Each end user" : `End user ${budget.user}`;
}

/** The project's keys' names by id (revoked keys too); none when they cannot be read. */
export function keyNamesOf(ctx: PageContext): Promise<Map<string, string>> {
  return ctx.api
    .listKeys(ctx.project.projectId)
    .then((keys) => new Map(keys.map((k) => [k.keyId, k.name])))
    .catch(() => new Map<string, string>());
}

/** How much of the window's limit is spent, as a bar (held amounts shown apart), to the cent. */
export function spendBar(budget: BudgetView): HTMLElement {
  if (budget.spent_usd === undefined) return h("span", { class: "muted" }, "Counted per user");
  const limit = decimalMicros(budget.limit_usd);
  const spent = decimalMicros(budget.spent_usd);
  const held = decimalMicros(budget.held_usd ?? "0");
  const share = limit > 0 ? Math.min(1, spent / limit) : 0;
  const meter = h("meter", {
    min: "0",
    max: String(limit),
    value: String(Math.min(spent, limit)),
    high: String(limit * 0.8),
    optimum: "0",
    "aria-label": `${Math.round(share * 100)} % of the limit spent`,
  });
  return h(
    "div",
    { class: "budget-spend" },
    meter,
    h("span", {}, money(spent), " of ", money(limit)),
    held > 0 ? h("span", { class: "muted" }, " (", money(held), " held)") : null,
  );
}

/** Sets a budget: a new one, or the one of the same scope and window (its limit and flags change). */
function budgetForm(ctx: PageContext, onSaved: () => void, prefill?: BudgetView): HTMLElement {
  const scope = h(
    "select",
    { id: "budget-scope" },
    h("option", { value: "project" }, "The project"),
    h("option", { value: "key" }, "One key"),
    h("option", { value: "user" }, "An end user"),
  );
  const subject = h("input", {
    id: "budget-subject",
    type: "text",
    autocomplete: "off",
    placeholder: "key id, or user id (* for each user)",
  });
  const usdInput = h("input", {
    id: "budget-usd",
    type: "text",
    inputmode: "decimal",
    autocomplete: "off",
    placeholder: "20.00",
    required: true,
  });
  const windowSelect = h(
    "select",
    { id: "budget-window" },
    ...Object.entries(WINDOWS).map(([value, label]) => h("option", { value }, label)),
  );
  const soft = h("input", { id: "budget-soft", type: "checkbox" });
  const byok = h("input", { id: "budget-byok", type: "checkbox" });
  if (prefill) {
    scope.value = prefill.scope;
    subject.value = prefill.key ?? prefill.user ?? "";
    usdInput.value = prefill.limit_usd;
    windowSelect.value = prefill.window;
    soft.checked = prefill.soft;
    byok.checked = prefill.include_byok;
  }
  const error = formError();
  const submit = h(
    "button",
    { type: "submit", class: "button primary" },
    prefill ? "Save budget" : "Set budget",
  );
  const form = h(
    "form",
    { class: "form padded", novalidate: true, "data-writes": "" },
    error,
    h("label", { for: "budget-scope", class: "field-label" }, "Applies to"),
    h("div", { class: "inline" }, scope, subject),
    h("label", { for: "budget-usd", class: "field-label" }, "Limit (USD)"),
    h("div", { class: "inline" }, usdInput, windowSelect),
    h(
      "label",
      { class: "check", for: "budget-soft" },
      soft,
      h("span", {}, "Soft: report only, never refuse"),
    ),
    h("label", { class: "check", for: "budget-byok" }, byok, h("span", {}, "Count BYOK and dual-key calls")),
    h("div", { class: "dialog-actions" }, submit),
  );
  onSubmit(form, {
    error,
    button: submit,
    read: (): BudgetInput => ({
      usd: usdInput.value.trim(),
      window: windowSelect.value,
      soft: soft.checked,
      includeByok: byok.checked,
      ...(scope.value === "key" && { keyId: subject.value.trim() }),
      ...(scope.value === "user" && { userId: subject.value.trim() }),
    }),
    send: async (input) => {
      await ctx.api.setBudget(ctx.project.projectId, input);
      ctx.toast("Budget saved.", "success");
      onSaved();
    },
  });
  return form;
}

export const budgetsPage: Page = {
  path: "/dashboard/budgets",
  title: "Budgets",
  icon: "gauge",
  render(ctx, main) {
    const formSlot = h("section", { class: "card", "aria-label": "Set a budget" });
    const body = h("section", { class: "card" });
    const showForm = (prefill?: BudgetView) =>
      formSlot.replaceChildren(budgetForm(ctx, () => void reload(), prefill));
    main.replaceChildren(
      pageHead(
        "Budgets",
        "Spend limits per project, key or end user, per UTC day, month or in total. A hard budget refuses calls that could pass it (402).",
      ),
      formSlot,
      body,
    );
    showForm();
    const reload = loadInto(
      body,
      { loading: "Loading budgets", failed: "The budgets" },
      () => Promise.all([ctx.api.budgets(ctx.project.projectId), keyNamesOf(ctx)]),
      ([budgets, names]) =>
        budgets.length === 0
          ? emptyState("gauge", "No budgets", "Calls are limited only by the project's credits.")
          : h(
              "table",
              { class: "table" },
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  ...["Applies to", "Window", "Spent this window", "Kind", "Resets", ""].map((c) =>
                    h("th", {}, c),
                  ),
                ),
              ),
              h(
                "tbody",
                {},
                ...budgets.map((budget) =>
                  h(
                    "tr",
                    { "data-budget": budget.id },
                    h("td", {}, scopeLabel(budget, names)),
                    h("td", {}, WINDOWS[budget.window]),
                    h("td", {}, spendBar(budget)),
                    h(
                      "td",
                      {},
                      `${budget.soft ? "Soft" : "Hard"}${budget.include_byok ? ", BYOK counted" : ""}`,
                    ),
                    h("td", {}, budget.resets_at ? formatTime(Date.parse(budget.resets_at)) : "Never"),
                    h(
                      "td",
                      { class: "actions" },
                      h(
                        "button",
                        {
                          type: "button",
                          class: "button",
                          "data-writes": "",
                          on: { click: () => showForm(budget) },
                        },
                        "Edit",
                      ),
                      h(
                        "button",
                        {
                          type: "button",
                          class: "button danger",
                          "data-writes": "",
                          on: {
                            click: async () => {
                              try {
                                await ctx.api.deleteBudget(ctx.project.projectId, budget.id);
                                ctx.toast("Budget deleted.", "success");
                                await reload();
                              } catch (err) {
                                ctx.toast(errorMessage(err), "error");
                              }
                            },
                          },
                        },
                        "Delete",
                      ),
                    ),
                  ),
                ),
              ),
            ),
    );
  },
};
