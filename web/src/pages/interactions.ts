import {
  ApiFailure,
  type Interaction,
  type InteractionFilters,
  type InteractionSummary,
  type KeyView,
} from "../api";
import { type Child, h, icon, replace } from "../dom";
import { count, counted, duration, logTime, usd } from "../format";
import { BILLING_HINTS, BILLING_LABELS, VENDOR_LABELS, vendorLabel } from "../labels";
import {
  emptyState,
  errorMessage,
  failureState,
  loadInto,
  loadingState,
  modal,
  type Page,
  type PageContext,
  pageHead,
} from "./page";

/** Days the list reaches back (the index's retention); older interactions are in data exports. */
const RETENTION_DAYS = 90;
/** Empty pages of a sparse filter fetched in a row before asking the user to search further. */
const AUTO_CONTINUE = 4;
const FILTER_NAMES = [
  "from",
  "to",
  "vendor",
  "model",
  "key_id",
  "user_id",
  "status",
  "billing_mode",
] as const;
/** The URL parameter naming the interaction whose detail is open: a link to it opens it on load. */
const OPEN_PARAM = "interaction";

/** The project's keys by id, for their names (revoked keys included: old calls name them too). */
type KeyNames = Map<string, string>;

const STATUSES: [value: string, label: string][] = [
  ["", "Any status"],
  ["success", "Succeeded"],
  ["error", "Failed"],
  ["429", "429 · Rate limited"],
  ["402", "402 · Out of credits"],
];

function filtersFromUrl(): InteractionFilters {
  const params = new URLSearchParams(location.search);
  const filters: InteractionFilters = {};
  for (const name of FILTER_NAMES) {
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

function statusBadge(row: InteractionSummary): HTMLElement {
  const failed = row.status_code >= 400 || row.error_type !== null;
  const detail = row.error_type && row.status_code < 400 ? ` · ${row.error_code ?? row.error_type}` : "";
  return h(
    "span",
    {
      class: `badge ${failed ? "failed" : "active"}`,
      title: row.error_type ? `${row.error_type} / ${row.error_code}` : "",
    },
    `${row.status_code}${detail}`,
  );
}

function billingBadge(row: InteractionSummary): HTMLElement {
  return h(
    "span",
    { class: `badge billing-${row.billing_mode}`, title: BILLING_HINTS[row.billing_mode] },
    BILLING_LABELS[row.billing_mode],
  );
}

/** A key by its name, with its id beside it (names need not be unique) and in the tooltip. */
function keyCell(keyId: string, names: KeyNames): HTMLElement {
  const name = names.get(keyId);
  return name === undefined
    ? h("code", { class: "key-id" }, keyId)
    : h(
        "span",
        { class: "key-ref", title: `Key ${keyId}` },
        h("span", { class: "key-name" }, name),
        h("code", { class: "key-id muted" }, keyId),
      );
}

function costCell(row: InteractionSummary): HTMLElement {
  if (row.cost_micros === null)
    return h("span", { class: "muted", title: "No price is known for this model" }, "—");
  // Calls not paid from credits show the list price, marked so it is not read as a charge.
  return row.billing_mode === "managed"
    ? h("span", {}, usd(row.cost_micros))
    : h("span", { class: "muted", title: "List price; not charged to credits" }, usd(row.cost_micros));
}

/** The text a person reads in a response: message contents of any of the four vendors' shapes. */
export function assembledText(body: string | null): string | undefined {
  if (body === null) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch {
    return undefined;
  }
  const texts: string[] = [];
  const visit = (value: unknown, key?: string): void => {
    if (typeof value === "string") {
      if (key === "text" || key === "content" || key === "output_text") texts.push(value);
    } else if (Array.isArray(value)) {
      for (const item of value) visit(item, key === "content" || key === "parts" ? undefined : key);
    } else if (value !== null && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) {
        if (k === "usage" || k === "usageMetadata" || k === "arguments" || k === "input") continue;
        visit(v, k);
      }
    }
  };
  visit(json);
  const text = texts.join("\n\n");
  return text === "" ? undefined : text;
}

/** A body as people read it: JSON indented, anything else as it came. */
function pretty(body: string | null): string {
  if (body === null) return "";
  try {
    return JSON.stringify(JSON.parse(body), null, 2);
  } catch {
    return body;
  }
}

function codeBlock(label: string, text: string, id: string): HTMLElement {
  return h(
    "section",
    { class: "body-block", "aria-labelledby": id },
    h("h3", { id }, label),
    h("pre", { class: "code", tabindex: "0" }, h("code", {}, text)),
  );
}

function fact(label: string, value: Child): HTMLElement[] {
  return [h("dt", {}, label), h("dd", {}, value ?? h("span", { class: "muted" }, "—"))];
}

/** The stored cost breakdown, as the record's JSON column holds it. */
interface CostBreakdownView {
  items: {
    dimension: string;
    quantity: number;
    unit: string;
    rate_usd: string;
    per: number;
    amount_micros: string;
  }[];
  markup: string;
  micros: number;
  charged_micros?: number;
  service_tier?: string;
  long_context?: boolean;
  unpriced?: string[];
}

function parsed<T>(json: string | null): T | undefined {
  if (json === null) return undefined;
  try {
    return JSON.parse(json) as T;
  } catch {
    return undefined;
  }
}

const PER_LABELS: Record<string, string> = {
  "1": "",
  "60": "/min",
  "1000": "/1K",
  "3600": "/h",
  "1000000": "/1M",
};

/** What the charge is made of: each dimension counted, at which rate, for what amount. */
function costBreakdownSection(interaction: Interaction): HTMLElement | null {
  const breakdown = parsed<CostBreakdownView>(interaction.cost_breakdown);
  const details = parsed<{ unpriced?: Record<string, number> }>(interaction.usage_details);
  const unpriced = [...(breakdown?.unpriced ?? []), ...Object.keys(details?.unpriced ?? {})];
  if (!breakdown) return null;
  const notes = [
    breakdown.service_tier ? `Service tier: ${breakdown.service_tier}.` : "",
    breakdown.long_context ? "Priced at the long-context rates." : "",
    breakdown.markup === "1" ? "" : `Markup ×${breakdown.markup}, rounded up once to a whole micro-dollar.`,
    breakdown.charged_micros === undefined
      ? ""
      : `Charged ${usd(breakdown.charged_micros)}: capped at the call's credit hold.`,
    unpriced.length > 0 ? `Reported but not priced: ${unpriced.join(", ")}.` : "",
  ].filter(Boolean);
  return h(
    "section",
    { class: "body-block", "aria-labelledby": "detail-cost" },
    h("h3", { id: "detail-cost" }, "Cost breakdown"),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "table" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ...["Dimension", "Quantity", "Rate (USD)", "Amount"].map((t) => h("th", { scope: "col" }, t)),
          ),
        ),
        h(
          "tbody",
          {},
          ...breakdown.items.map((item) =>
            h(
              "tr",
              {},
              h("td", {}, h("code", {}, item.dimension)),
              h("td", { class: "num" }, `${count(item.quantity)} ${item.unit}`),
              h("td", { class: "num" }, `${item.rate_usd}${PER_LABELS[String(item.per)] ?? `/${item.per}`}`),
              h("td", { class: "num" }, `${item.amount_micros} µ$`),
            ),
          ),
        ),
        h(
          "tfoot",
          {},
          h(
            "tr",
            {},
            h("th", { scope: "row", colspan: "3" }, "Total"),
            h("td", { class: "num" }, usd(breakdown.micros)),
          ),
        ),
      ),
    ),
    ...notes.map((note) => h("p", { class: "hint" }, note)),
  );
}

function detailContent(interaction: Interaction, names: KeyNames): Child[] {
  const text = assembledText(interaction.response_body);
  const tokens = h(
    "div",
    { class: "token-tiles" },
    ...[
      ["Input", interaction.input_tokens],
      ["Output", interaction.output_tokens],
      ["Cached input", interaction.cached_input_tokens],
      ["Reasoning", interaction.reasoning_tokens],
    ].map(([label, value]) =>
      h(
        "div",
        { class: "tile" },
        h("span", { class: "tile-label" }, String(label)),
        h("span", { class: "tile-value" }, count(Number(value))),
      ),
    ),
  );
  return [
    tokens,
    interaction.usage_estimated
      ? h("p", { class: "hint" }, "Some token counts were estimated: the vendor did not report them.")
      : null,
    h(
      "dl",
      { class: "facts detail-facts" },
      ...fact("Transaction ID", h("code", {}, interaction.transaction_id)),
      ...fact("Endpoint", h("code", {}, interaction.endpoint)),
      ...fact("Status", statusBadge(interaction)),
      ...fact("Billing", billingBadge(interaction)),
      ...fact("Cost", costCell(interaction)),
      ...fact(
        "Latency",
        `${duration(interaction.latency_ms)}${interaction.ttft_ms === null ? "" : ` (first byte after ${duration(interaction.ttft_ms)})`}`,
      ),
      ...fact(
        "User",
        interaction.user_id === null ? null : h("span", { class: "user-id" }, interaction.user_id),
      ),
      ...fact("API key", keyCell(interaction.key_id, names)),
      ...fact("Request ID", interaction.request_id === null ? null : h("code", {}, interaction.request_id)),
      ...fact(
        "Vendor request ID",
        interaction.vendor_request_id === null ? null : h("code", {}, interaction.vendor_request_id),
      ),
      ...fact("Price list", interaction.price_version),
      ...fact("Service tier", interaction.service_tier),
      ...fact("Client", interaction.user_agent),
      ...fact("Stored", interaction.store_level),
    ),
    costBreakdownSection(interaction),
    interaction.truncated
      ? h(
          "div",
          { class: "callout warning" },
          icon("alert"),
          h("p", {}, "A body was larger than 64 KiB and is shown cut short (binary bodies are not stored)."),
        )
      : null,
    text === undefined
      ? null
      : codeBlock(interaction.streamed ? "Assembled stream text" : "Response text", text, "detail-text"),
    codeBlock(
      "Request body",
      interaction.request_body === null ? missingBody(interaction) : pretty(interaction.request_body),
      "detail-request",
    ),
    codeBlock(
      interaction.streamed ? "Response (assembled from the stream)" : "Response body",
      interaction.response_body === null ? missingBody(interaction) : pretty(interaction.response_body),
      "detail-response",
    ),
  ];
}

/** Why a body is missing: the store level or body retention, or a body that was binary or empty. */
function missingBody(interaction: Interaction): string {
  switch (interaction.store_level) {
    case "metadata":
      return "(not kept: stored at level metadata, by the project's or key's setting, the request's X-DMT-Store header, or the body retention)";
    case "none":
      return "(not kept: stored at level none; the user id is kept only as a keyed hash)";
    default:
      return "(not stored: binary or empty)";
  }
}

/** The URL of the page with `transactionId`'s detail open (or none): it survives a reload and can be shared. */
function setOpenInUrl(transactionId: string | undefined): void {
  const params = new URLSearchParams(location.search);
  if (transactionId === undefined) params.delete(OPEN_PARAM);
  else params.set(OPEN_PARAM, transactionId);
  const query = params.toString();
  history.replaceState(null, "", `${location.pathname}${query ? `?${query}` : ""}`);
}

function detailHeading(model: string | null, vendor: InteractionSummary["vendor"]): (string | Node)[] {
  return [model ?? "(no model)", h("span", { class: "muted" }, ` · ${vendorLabel(vendor)}`)];
}

/**
 * The detail of one interaction in a dialog, from a row or from a link (`?interaction=<id>`): the
 * heading is the row's at once, or the record's once loaded. The URL names it while it is open.
 */
function openDetail(
  ctx: PageContext,
  transactionId: string,
  names: KeyNames,
  row?: InteractionSummary,
): void {
  const el = modal("detail-title");
  el.classList.add("wide");
  el.addEventListener("close", () => setOpenInUrl(undefined));
  setOpenInUrl(transactionId);
  const body = h("div", { class: "detail-body" }, loadingState("Loading the interaction…", 6));
  const title = h(
    "h2",
    { id: "detail-title" },
    ...(row ? detailHeading(row.model, row.vendor) : ["Interaction"]),
  );
  const when = h("p", { class: "muted" }, row ? new Date(row.started_at).toLocaleString() : "");
  const close = h(
    "button",
    {
      type: "button",
      class: "button quiet icon-only",
      "aria-label": "Close",
      on: { click: () => el.close() },
    },
    icon("close"),
  );
  el.append(h("div", { class: "dialog-head" }, h("div", {}, title, when), close), body);
  el.showModal();
  close.focus();
  loadInto(
    body,
    { loading: "Loading the interaction…", failed: "The interaction", rows: 6 },
    async () => {
      try {
        return await ctx.api.interaction(ctx.project.projectId, transactionId);
      } catch (err) {
        if (!(err instanceof ApiFailure && err.status === 404)) throw err;
        // A link to an interaction deleted, past the index's days, or of another project.
        return undefined;
      }
    },
    (interaction) => {
      if (interaction === undefined) {
        return h(
          "div",
          { class: "callout warning", role: "alert" },
          icon("alert"),
          h(
            "p",
            {},
            `No interaction ${transactionId} in this project: it may have been deleted, or be older than ${RETENTION_DAYS} days (see data exports in Settings).`,
          ),
        );
      }
      title.replaceChildren(...detailHeading(interaction.model, interaction.vendor));
      when.textContent = new Date(interaction.started_at).toLocaleString();
      return detailContent(interaction, names);
    },
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
          "aria-label": `Open the ${row.model ?? "interaction"} call of ${new Date(row.started_at).toLocaleString()}`,
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
  const read = (): InteractionFilters => {
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
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    apply(read());
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
        `The list reaches back ${RETENTION_DAYS} days; days are UTC. For older interactions, download a data export in Settings.`,
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
