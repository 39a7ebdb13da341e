import type { CreditBalance, LedgerEntry } from "../api";
import { h, replace } from "../dom";
import { timeCell, usd } from "../format";
import {
  emptyState,
  errorMessage,
  errorState,
  loadInto,
  loadingState,
  type Page,
  type PageContext,
  pageHead,
} from "./page";

const SOURCES: [value: string, label: string][] = [
  ["invoice", "Invoice (paid)"],
  ["promotion", "Promotion"],
  ["refund", "Refund"],
  ["manual", "Manual adjustment"],
];

const TYPES: Record<LedgerEntry["type"], string> = {
  grant: "Grant",
  hold: "Hold",
  settle: "Charge",
  release: "Release",
};

function details(entry: LedgerEntry): string {
  switch (entry.type) {
    case "grant":
      return [entry.source, entry.note].filter(Boolean).join(" · ");
    case "hold":
      return "Reserved for a call in flight";
    case "settle":
      return `Charged ${usd(entry.chargedMicros ?? 0)} of ${usd(entry.heldMicros ?? 0)} reserved`;
    case "release":
      return "Reservation returned: the call was not charged";
  }
}

function balanceCard(balance: CreditBalance): HTMLElement {
  return h(
    "div",
    { class: "balance" },
    h("p", { class: "balance-label" }, "Available"),
    h("p", { class: "balance-amount", "data-testid": "available" }, usd(balance.availableMicros)),
    h(
      "p",
      { class: "muted" },
      `${usd(balance.heldMicros)} reserved for ${balance.openHolds} call${balance.openHolds === 1 ? "" : "s"} in flight`,
    ),
  );
}

function ledgerRows(entries: LedgerEntry[]): HTMLElement[] {
  return entries.map((entry) =>
    h(
      "tr",
      {},
      h("td", {}, timeCell(entry.at, "")),
      h("td", {}, TYPES[entry.type]),
      h(
        "td",
        { class: `amount ${entry.deltaMicros >= 0 ? "credit" : "debit"}` },
        `${entry.deltaMicros > 0 ? "+" : ""}${usd(entry.deltaMicros)}`,
      ),
      h("td", { class: "details" }, details(entry)),
    ),
  );
}

/** The operators' grant form; payment is out of scope, so each grant names where its money came from. */
function grantForm(ctx: PageContext, onGranted: (balance: CreditBalance) => void): HTMLElement {
  let idempotencyKey = crypto.randomUUID();
  const amount = h("input", {
    id: "grant-usd",
    type: "text",
    inputmode: "decimal",
    autocomplete: "off",
    placeholder: "25.00",
    required: true,
  });
  const source = h(
    "select",
    { id: "grant-source" },
    ...SOURCES.map(([value, label]) => h("option", { value }, label)),
  );
  const note = h("input", {
    id: "grant-note",
    type: "text",
    autocomplete: "off",
    placeholder: "e.g. invoice number",
  });
  const error = h("div", { class: "form-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "button primary" }, "Grant credits");
  const form = h(
    "form",
    { class: "form padded", novalidate: true },
    error,
    h("label", { for: "grant-usd", class: "field-label" }, "Amount (USD)"),
    amount,
    h("label", { for: "grant-source", class: "field-label" }, "Source"),
    source,
    h("label", { for: "grant-note", class: "field-label" }, "Note (optional)"),
    note,
    h("div", { class: "dialog-actions" }, submit),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (submit.disabled) return;
    error.replaceChildren();
    submit.disabled = true;
    submit.textContent = "Granting…";
    try {
      const balance = await ctx.api.grant(
        ctx.project.projectId,
        {
          usd: amount.value.trim(),
          source: source.value,
          ...(note.value.trim() ? { note: note.value.trim() } : {}),
        },
        idempotencyKey,
      );
      idempotencyKey = crypto.randomUUID();
      form.reset();
      ctx.toast(`Granted credits to ${ctx.project.projectId}.`);
      onGranted(balance);
    } catch (err) {
      idempotencyKey = crypto.randomUUID();
      error.textContent = errorMessage(err);
    } finally {
      submit.disabled = false;
      submit.textContent = "Grant credits";
    }
  });
  return form;
}

export const creditsPage: Page = {
  path: "/dashboard/credits",
  title: "Credits",
  icon: "coins",
  render(ctx, main) {
    const balanceBody = h("div", {});
    const ledgerBody = h("div", {});
    replace(
      main,
      pageHead(
        "Credits",
        "Prepaid credits pay for calls made with the service's vendor keys; BYOK calls spend none.",
      ),
      h(
        "div",
        { class: "grid two" },
        h("section", { class: "card" }, h("h2", { class: "card-title" }, "Balance"), balanceBody),
        ctx.me.user.operator
          ? h(
              "section",
              { class: "card" },
              h(
                "h2",
                { class: "card-title" },
                "Grant credits ",
                h("span", { class: "badge operator" }, "Operators"),
              ),
              grantForm(ctx, (balance) => {
                replace(balanceBody, balanceCard(balance));
                void loadLedger();
              }),
            )
          : null,
      ),
      h("section", { class: "card" }, h("h2", { class: "card-title" }, "Ledger"), ledgerBody),
    );

    async function loadLedger(): Promise<void> {
      replace(ledgerBody, loadingState("Loading the ledger…"));
      try {
        const page = await ctx.api.ledger(ctx.project.projectId);
        if (page.entries.length === 0) {
          replace(
            ledgerBody,
            emptyState(
              "coins",
              "No credit movements yet",
              "Grants, and the charges of calls billed to credits, appear here.",
            ),
          );
          return;
        }
        const tbody = h("tbody", {}, ...ledgerRows(page.entries));
        const more = h("button", { type: "button", class: "button" }, "Load older entries");
        let cursor = page.cursor;
        more.hidden = cursor === undefined;
        more.addEventListener("click", async () => {
          more.disabled = true;
          try {
            const next = await ctx.api.ledger(ctx.project.projectId, cursor);
            tbody.append(...ledgerRows(next.entries));
            cursor = next.cursor;
            more.hidden = cursor === undefined;
          } catch (err) {
            ctx.toast(`Older entries could not be loaded: ${errorMessage(err)}`, "error");
          } finally {
            more.disabled = false;
          }
        });
        replace(
          ledgerBody,
          h(
            "div",
            { class: "table-wrap" },
            h(
              "table",
              { class: "table" },
              h("caption", { class: "sr-only" }, "Credit ledger, newest first"),
              h(
                "thead",
                {},
                h(
                  "tr",
                  {},
                  ...["When", "Type", "Amount", "Details"].map((t) => h("th", { scope: "col" }, t)),
                ),
              ),
              tbody,
            ),
          ),
          h("div", { class: "table-footer" }, more),
        );
      } catch (err) {
        replace(ledgerBody, errorState(`The ledger could not be loaded: ${errorMessage(err)}`, loadLedger));
      }
    }

    loadInto(
      balanceBody,
      { loading: "Loading the balance…", failed: "The balance", rows: 2 },
      () => ctx.api.balance(ctx.project.projectId),
      balanceCard,
    );
    void loadLedger();
  },
};
