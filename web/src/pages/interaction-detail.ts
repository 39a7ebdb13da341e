import { INDEX_RETENTION_DAYS } from "../../../lambda/core/interaction-filters";
import { formatMicrosText, formatUsd } from "../../../lambda/core/money";
import type { CostBreakdown } from "../../../lambda/core/pricing/cost";
import { ApiFailure, type Interaction, type InteractionSummary } from "../api";
import { type Child, h, icon } from "../dom";
import { count, duration, formatTime } from "../format";
import { vendorLabel } from "../labels";
import { billingBadge, costCell, type KeyNames, keyCell, statusBadge } from "./interaction-cells";
import { loadInto, loadingState, modal, type PageContext } from "./page";

/** The detail of one interaction, in a dialog over the Interactions page. */

/** The URL parameter naming the interaction whose detail is open: a link to it opens it on load. */
export const OPEN_PARAM = "interaction";

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
  const breakdown = parsed<CostBreakdown>(interaction.cost_breakdown);
  const details = parsed<{ unpriced?: Record<string, number> }>(interaction.usage_details);
  const unpriced = [...(breakdown?.unpriced ?? []), ...Object.keys(details?.unpriced ?? {})];
  if (!breakdown) return null;
  const notes = [
    breakdown.service_tier ? `Service tier: ${breakdown.service_tier}.` : "",
    breakdown.long_context ? "Priced at the long-context rates." : "",
    breakdown.markup === "1" ? "" : `Markup ×${breakdown.markup}, rounded up once to a whole micro-dollar.`,
    breakdown.charged_micros === undefined
      ? ""
      : `Charged ${formatUsd(breakdown.charged_micros)}: capped at the call's credit hold.`,
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
              h("td", { class: "num" }, formatMicrosText(item.amount_micros)),
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
            h("td", { class: "num" }, formatUsd(breakdown.micros)),
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
export function openDetail(
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
  const when = h("p", { class: "muted" }, row ? formatTime(row.started_at, { seconds: true }) : "");
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
            `No interaction ${transactionId} in this project: it may have been deleted, or be older than ${INDEX_RETENTION_DAYS} days (see data exports in Settings).`,
          ),
        );
      }
      title.replaceChildren(...detailHeading(interaction.model, interaction.vendor));
      when.textContent = formatTime(interaction.started_at, { seconds: true });
      return detailContent(interaction, names);
    },
  );
}
