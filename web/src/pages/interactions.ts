import {
  INDEX_RETENTION_DAYS,
  LIST_FILTERS,
  REFUSAL_KIND_NAMES,
  type RefusalKind,
  STATUS_CLASSES,
  type StatusClass,
} from "../../../lambda/core/interaction-filters";
import type { InteractionFilters, InteractionSummary, KeyView } from "../api";
import { h, icon, replace } from "../dom";
import { onSubmit } from "../form";
import { count, counted, duration, formatTime, logTime } from "../format";
import { BILLING_LABELS, VENDOR_LABELS, vendorLabel } from "../labels";
import { billingBadge, costCell, type KeyNames, keyCell, statusBadge } from "./interaction-cells";
import { OPEN_PARAM, openDetail } from "./interaction-detail";
import {
  emptyState,
  errorMessage,
  failureState,
  loadingState,
  type Page,
  type PageContext,
  pageHead,
} from "./page";

/** Empty pages of a sparse filter fetched in a row before asking the user to search further. */
const AUTO_CONTINUE = 4;

const OUTCOME_LABELS: Record<StatusClass, string> = { success: "Succeeded", error: "Failed" };
/** One filter per kind of refusal dmt makes, each with the status it is answered with. */
const REFUSAL_LABELS: Record<RefusalKind, string> = {
  credits: "402 · Refused: out of credits",
  budget: "402 · Refused: over a budget",
  rate: "429 · Refused: rate limit",
  policy: "403 · Refused: key's endpoints or models",
};

const STATUSES: [value: string, label: string][] = [
  ["", "Any status"],
  ...STATUS_CLASSES.map((outcome): [string, string] => [outcome, OUTCOME_LABELS[outcome]]),
  ...REFUSAL_KIND_NAMES.map((kind): [string, string] => [kind, REFUSAL_LABELS[kind]]),
];

function filtersFromUrl(): InteractionFilters {
  const params = new URLSearchParams(location.search);
  const filters: InteractionFilters = {};
  for (const name of LIST_FILTERS) {
    const value = params.get(name);
    if (value) filters[name] = value;
  }
  return filters;
}

function select(id: string, options: [string, string][], value: string | undefined): HTMLSelectElement {
  return h(
    "select",
    { id },
    ...options.map(([v, label]) => h("option", { value: v, selected: v === (value ?? "") }, label)),
  );
}

function rowOf(ctx: PageContext, row: InteractionSummary, names: KeyNames): HTMLTableRowElement {
  const open = () => openDetail(ctx, row.transaction_id, names, row);
  const tr = h(
    "tr",
    { class: "clickable", "data-transaction-id": row.transaction_id, on: { click: open } },
    h(
      "td",
      {},
      h(
        "button",
        {
          type: "button",
          class: "link-button",
          "aria-label": `Open the ${row.model ?? "interaction"} call of ${formatTime(row.started_at, { seconds: true })}`,
        },
        logTime(row.started_at),
      ),
    ),
    h(
      "td",
      {},
      h("span", { class: "vendor" }, vendorLabel(row.vendor)),
      h("code", { class: "model" }, row.model ?? "—"),
    ),
    h("td", {}, keyCell(row.key_id, names)),
    h(
      "td",
      {},
      row.user_id === null
        ? h("span", { class: "muted" }, "—")
        : h("span", { class: "user-id", title: row.user_id }, row.user_id),
    ),
    h(
      "td",
      {},
      statusBadge(row),
      row.error_code !== null && row.status_code >= 400
        ? h("span", { class: "error-code" }, row.error_code)
        : null,
    ),
    h("td", {}, billingBadge(row)),
    h(
      "td",
      { class: "num", title: `${count(row.input_tokens)} in, ${count(row.output_tokens)} out` },
      `${count(row.input_tokens)} → ${count(row.output_tokens)}`,
    ),
    h("td", { class: "num" }, costCell(row)),
    h("td", { class: "num" }, duration(row.latency_ms)),
  );
  return tr;
}

function filterForm(
  current: InteractionFilters,
  keys: Promise<KeyView[]>,
  apply: (filters: InteractionFilters) => void,
): HTMLFormElement {
  const input = (id: string, label: string, props: Record<string, unknown>) => {
    const control = h("input", { id, ...props });
    return { control, field: h("div", { class: "filter" }, h("label", { for: id }, label), control) };
  };
  const from = input("filter-from", "From (UTC)", { type: "date", value: current.from ?? "" });
  const to = input("filter-to", "To (UTC)", { type: "date", value: current.to ?? "" });
  const model = input("filter-model", "Model", {
    type: "text",
    placeholder: "Any model (or part of one)",
    value: current.model ?? "",
    autocomplete: "off",
  });
  const user = input("filter-user", "User ID", {
    type: "text",
    placeholder: "Any user",
    value: current.user_id ?? "",
    autocomplete: "off",
  });
  const vendor = select(
    "filter-vendor",
    [["", "All vendors"], ...Object.entries(VENDOR_LABELS)],
    current.vendor,
  );
  const status = select("filter-status", STATUSES, current.status);
  // The project's keys once they are known; a key id from a link stays choosable meanwhile.
  const key = select(
    "filter-key",
    [["", "Any key"], ...(current.key_id ? ([[current.key_id, current.key_id]] as [string, string][]) : [])],
    current.key_id,
  );
  void keys.then((list) => {
    key.replaceChildren(
      ...[
        ["", "Any key"] as [string, string],
        ...list.map((k): [string, string] => [k.keyId, `${k.name} (${k.keyId})`]),
      ]
        .concat(
          current.key_id && !list.some((k) => k.keyId === current.key_id)
            ? [[current.key_id, current.key_id]]
            : [],
        )
        .map(([v, label]) => h("option", { value: v, selected: v === (current.key_id ?? "") }, label)),
    );
  });
  const billing = select(
    "filter-billing",
    [["", "Any billing"], ...Object.entries(BILLING_LABELS)],
    current.billing_mode,
  );
  const labelled = (id: string, label: string, control: HTMLElement) =>
    h("div", { class: "filter" }, h("label", { for: id }, label), control);
  const clear = h("button", { type: "button", class: "button quiet" }, "Clear");
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Filter interactions" },
    from.field,
    to.field,
    labelled("filter-vendor", "Vendor", vendor),
    model.field,
    labelled("filter-key", "Key", key),
    user.field,
    labelled("filter-status", "Status", status),
    labelled("filter-billing", "Billing", billing),
    h(
      "div",
      { class: "filter-actions" },
      h("button", { type: "submit", class: "button primary" }, icon("filter"), "Apply"),
      clear,
    ),
  );
  onSubmit(form, {
    read: (): InteractionFilters => {
      const filters: InteractionFilters = {};
      const set = (name: keyof InteractionFilters, value: string) => {
        if (value.trim() !== "") filters[name] = name === "user_id" ? value : value.trim();
      };
      set("from", from.control.value);
      set("to", to.control.value);
      set("vendor", vendor.value);
      set("model", model.control.value);
      set("key_id", key.value);
      set("user_id", user.control.value);
      set("status", status.value);
      set("billing_mode", billing.value);
      return filters;
    },
    send: apply,
  });
  clear.addEventListener("click", () => {
    for (const control of [from.control, to.control, model.control, user.control]) control.value = "";
    for (const control of [vendor, key, status, billing]) control.value = "";
    apply({});
  });
  return form;
}

export const interactionsPage: Page = {
  path: "/dashboard/interactions",
  title: "Interactions",
  icon: "list",
  render(ctx, main) {
    let filters = filtersFromUrl();
    // Names for the key column; without them (a failed read) rows show key ids.
    const keys = ctx.api.listKeys(ctx.project.projectId).catch((): KeyView[] => []);
    const names: KeyNames = new Map();
    const named = keys.then((list) => {
      for (const k of list) names.set(k.keyId, k.name);
    });
    const body = h("section", { class: "card", "aria-labelledby": "page-title", "aria-live": "polite" });
    const refresh = h("button", { type: "button", class: "button" }, icon("refresh"), "Refresh");
    refresh.addEventListener("click", () => void load());

    const apply = (next: InteractionFilters) => {
      filters = next;
      const query = new URLSearchParams(next as Record<string, string>).toString();
      history.replaceState(null, "", `${location.pathname}${query ? `?${query}` : ""}`);
      void load();
    };

    replace(
      main,
      pageHead(
        "Interactions",
        "Every proxied call, newest first, with its request, response, tokens, cost and latency.",
        refresh,
      ),
      filterForm(filters, keys, apply),
      body,
      h(
        "p",
        { class: "hint" },
        `The list reaches back ${INDEX_RETENTION_DAYS} days; days are UTC. For older interactions, download a data export in Settings.`,
      ),
    );

    let generation = 0;
    async function load(): Promise<void> {
      const mine = ++generation;
      replace(body, loadingState("Loading interactions…", 6));
      const tbody = h("tbody", {});
      const footer = h("div", { class: "table-footer" });
      const more = h("button", { type: "button", class: "button" }, "Load more");
      let cursor: string | undefined;
      let shown = 0;

      /** Fetches pages until one has rows (a sparse filter may return a few empty ones). */
      const fetchMore = async (): Promise<void> => {
        for (let attempt = 0; ; attempt++) {
          const [page] = await Promise.all([
            ctx.api.interactions(ctx.project.projectId, filters, cursor),
            named,
          ]);
          if (mine !== generation) return;
          tbody.append(...page.interactions.map((row) => rowOf(ctx, row, names)));
          shown += page.interactions.length;
          cursor = page.cursor;
          if (page.interactions.length > 0 || cursor === undefined || attempt >= AUTO_CONTINUE) return;
        }
      };

      const renderFooter = () => {
        more.textContent = shown === 0 ? "Search older interactions" : "Load more";
        more.hidden = cursor === undefined;
        replace(footer, h("span", { class: "muted" }, `${counted(shown, "interaction")} shown`), more);
      };

      more.addEventListener("click", async () => {
        more.disabled = true;
        try {
          await fetchMore();
          renderFooter();
          if (shown > 0 && body.querySelector("table") === null) renderTable();
        } catch (err) {
          ctx.toast(`More interactions could not be loaded: ${errorMessage(err)}`, "error");
        } finally {
          more.disabled = false;
        }
      });

      const renderTable = () =>
        replace(
          body,
          h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "table interactions" },
              h("caption", { class: "sr-only" }, "Interactions, newest first. Open one to see its bodies."),
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  ...[
                    "Time",
                    "Vendor and model",
                    "Key",
                    "User",
                    "Status",
                    "Billing",
                    "Tokens in → out",
                    "Cost",
                    "Latency",
                  ].map((t, i) => h("th", { scope: "col", class: i >= 6 ? "num" : "" }, t)),
                ),
              ),
              tbody,
            ),
          ),
          footer,
        );

      try {
        await fetchMore();
        if (mine !== generation) return;
        renderFooter();
        const filtered = Object.keys(filters).length > 0;
        if (shown > 0) renderTable();
        else if (cursor !== undefined)
          replace(
            body,
            emptyState(
              "list",
              "No matches among the most recent interactions",
              "Older interactions have not been searched yet.",
              footer,
            ),
          );
        else if (filtered)
          replace(
            body,
            emptyState(
              "filter",
              "No interactions match these filters",
              "Try a wider date range or fewer filters.",
              h(
                "button",
                { type: "button", class: "button", on: { click: () => apply({}) } },
                "Clear filters",
              ),
            ),
          );
        else
          replace(
            body,
            emptyState(
              "list",
              "No interactions yet",
              "Calls made with this project's API keys appear here a few seconds after they finish.",
            ),
          );
      } catch (err) {
        if (mine !== generation) return;
        replace(
          body,
          failureState("The interactions", err, () => void load()),
        );
      }
    }
    void load();
    const linked = new URLSearchParams(location.search).get(OPEN_PARAM);
    if (linked) void named.then(() => openDetail(ctx, linked, names));
  },
};
