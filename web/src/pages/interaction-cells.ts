import { formatUsd } from "../../../lambda/core/money";
import type { InteractionSummary } from "../api";
import { h } from "../dom";
import { BILLING_HINTS, BILLING_LABELS } from "../labels";

/** The cells a call shows both in the Interactions list and in its detail. */

/** The project's keys by id, for their names (revoked keys included: old calls name them too). */
export type KeyNames = Map<string, string>;

export function statusBadge(row: InteractionSummary): HTMLElement {
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

export function billingBadge(row: InteractionSummary): HTMLElement {
  return h(
    "span",
    { class: `badge billing-${row.billing_mode}`, title: BILLING_HINTS[row.billing_mode] },
    BILLING_LABELS[row.billing_mode],
  );
}

/** A key by its name, with its id beside it (names need not be unique) and in the tooltip. */
export function keyCell(keyId: string, names: KeyNames): HTMLElement {
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

export function costCell(row: InteractionSummary): HTMLElement {
  if (row.cost_micros === null)
    return h("span", { class: "muted", title: "No price is known for this model" }, "—");
  // Calls not paid from credits show the list price, marked so it is not read as a charge.
  return row.billing_mode === "managed"
    ? h("span", {}, formatUsd(row.cost_micros))
    : h("span", { class: "muted", title: "List price; not charged to credits" }, formatUsd(row.cost_micros));
}
