import type { CreditBalance, GrantInput, Statement, StatementLine } from "../api";
import { type Child, h, replace } from "../dom";
import { formError, onSubmit } from "../form";
import { counted, money } from "../format";
import { buySection } from "./credits-buy";
import { planSection } from "./credits-plan";
import { rechargeSection } from "./credits-recharge";
import { emptyState, loadInto, type Page, type PageContext, pageHead } from "./page";

const SOURCES: [value: string, label: string][] = [
  ["invoice", "Invoice (paid)"],
  ["promotion", "Promotion"],
  ["refund", "Refund"],
  ["manual", "Manual adjustment"],
];

function balanceCard(balance: CreditBalance): HTMLElement {
  const inFlight = balance.heldMicros + balance.chargedInFlightMicros;
  return h(
    "div",
    { class: "balance" },
    h("p", { class: "balance-label" }, "Available"),
    h("p", { class: "balance-amount", "data-testid": "available" }, money(balance.availableMicros)),
    h(
      "p",
      { class: "muted", "data-testid": "in-flight" },
      balance.openHolds === 0
        ? "Nothing in flight."
        : h(
            "span",
            {},
            money(inFlight),
            ` in flight for calls not yet settled (${counted(balance.openHolds, "open batch", "open batches")}, `,
            money(balance.chargedInFlightMicros),
            " charged so far, settled within seconds)",
          ),
    ),
  );
}

const PERIODS: [value: string, label: string][] = [
  ["month", "This month"],
  ["30", "Last 30 days"],
  ["90", "Last 90 days"],
  ["366", "Last 12 months"],
];

const DAY_MS = 86_400_000;
const isoDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);

function periodOf(choice: string, now = Date.now()): { from: string; to: string } {
  const to = isoDay(now);
  if (choice === "month") return { from: `${to.slice(0, 8)}01`, to };
  return { from: isoDay(Date.parse(to) - (Number(choice) - 1) * DAY_MS), to };
}

function describe(line: StatementLine, grouping: Statement["grouping"]): Child[] {
  if (line.kind === "grant") {
    const detail = [line.source, line.note].filter(Boolean).join(" · ");
    const what =
      line.source === "stripe_checkout"
        ? "Credits bought"
        : line.source === "stripe_recharge"
          ? "Auto-recharge"
          : "Credits granted";
    return [what, detail ? h("small", {}, detail) : null];
  }
  if (line.kind === "debit") {
    const spent =
      (line.uncollectedMicros ?? 0) > 0 ? [" · ", money(line.uncollectedMicros ?? 0), " spent already"] : [];
    return [
      line.source === "stripe_dispute" ? "Lost dispute" : "Refund",
      h("small", {}, "credits taken back", ...spent),
    ];
  }
  const calls = counted(line.calls ?? 0, "call");
  const uncollected =
    (line.uncollectedMicros ?? 0) > 0
      ? [" · ", money(line.uncollectedMicros ?? 0), " above the holds, not charged"]
      : [];
  // A lease is our word: customers see calls settled together, in a batch.
  return grouping === "lease"
    ? ["Calls settled together", h("small", {}, `${calls} · batch ${line.ref ?? ""}`, ...uncollected)]
    : [
        "Calls",
        h("small", {}, `${calls} in ${counted(line.leases ?? 0, "batch", "batches")}`, ...uncollected),
      ];
}

function statementTable(statement: Statement): HTMLElement {
  const edge = (label: string, day: string, micros: number, testId: string) =>
    h(
      "tr",
      { "data-testid": testId },
      h("td", { class: "edge" }, day),
      h("td", { class: "edge what" }, label),
      h("td", { class: "edge num" }),
      h("td", { class: "edge num" }, money(micros)),
    );
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "table statement" },
      h("caption", { class: "sr-only" }, `Credit statement from ${statement.from} to ${statement.to}`),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "col" }, "Date"),
          h("th", { scope: "col" }, "Description"),
          h("th", { scope: "col", class: "num" }, "Amount"),
          h("th", { scope: "col", class: "num" }, "Balance"),
        ),
      ),
      h(
        "tbody",
        {},
        edge("Opening balance", statement.from, statement.openingMicros, "opening"),
        ...statement.lines.map((line) =>
          h(
            "tr",
            { "data-kind": line.kind },
            h("td", {}, line.day),
            h("td", { class: "what" }, ...describe(line, statement.grouping)),
            h(
              "td",
              { class: "num" },
              line.amountMicros > 0
                ? h("span", { class: "credit" }, "+", money(line.amountMicros))
                : money(line.amountMicros),
            ),
            h("td", { class: "num" }, money(line.balanceMicros)),
          ),
        ),
        edge("Closing balance", statement.to, statement.closingMicros, "closing"),
      ),
    ),
  );
}

function statementBody(statement: Statement): Child[] {
  const { heldMicros, chargedMicros, openLeases } = statement.inFlight;
  return [
    statement.lines.length === 0
      ? emptyState(
          "coins",
          "No credit movements in this period",
          "Grants, and the charges of calls billed to credits, appear here.",
        )
      : statementTable(statement),
    // Why its count of calls may be below the Overview's and Usage's: those count refusals too.
    h(
      "p",
      { class: "hint", "data-testid": "statement-counts" },
      "Counts only the calls charged to credits. Calls dmt refused (out of credits, over a budget, rate limits, key policies), failed calls that cost nothing and calls on your own vendor keys are not on the statement; Usage and Interactions count them.",
    ),
    openLeases > 0
      ? h(
          "p",
          { class: "in-flight", "data-testid": "statement-in-flight" },
          "In flight, not yet on the statement: ",
          money(chargedMicros),
          " charged and ",
          money(heldMicros),
          ` reserved for calls not yet settled (${counted(openLeases, "open batch", "open batches")}). Available now: `,
          money(statement.availableMicros),
          ".",
        )
      : null,
  ];
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
  const error = formError();
  const submit = h("button", { type: "submit", class: "button primary" }, "Grant credits");
  const form = h(
    "form",
    { class: "form padded", novalidate: true, "data-writes": "" },
    error,
    h("label", { for: "grant-usd", class: "field-label" }, "Amount (USD)"),
    amount,
    h("label", { for: "grant-source", class: "field-label" }, "Source"),
    source,
    h("label", { for: "grant-note", class: "field-label" }, "Note (optional)"),
    note,
    h("div", { class: "dialog-actions" }, submit),
  );
  onSubmit(form, {
    error,
    button: submit,
    busyLabel: "Granting…",
    read: (): GrantInput => ({
      usd: amount.value.trim(),
      source: source.value,
      ...(note.value.trim() ? { note: note.value.trim() } : {}),
    }),
    send: async (input) => {
      const balance = await ctx.api.grant(ctx.project.projectId, input, idempotencyKey);
      idempotencyKey = crypto.randomUUID();
      form.reset();
      ctx.toast(`Granted credits to ${ctx.project.projectId}.`);
      onGranted(balance);
    },
    failed: () => {
      idempotencyKey = crypto.randomUUID();
    },
  });
  return form;
}

export const creditsPage: Page = {
  path: "/dashboard/credits",
  title: "Credits",
  icon: "coins",
  render(ctx, main) {
    const balanceBody = h("div", {});
    const statementSection = h("div", {});
    const period = h(
      "select",
      { id: "statement-period", "aria-label": "Period" },
      ...PERIODS.map(([value, label]) => h("option", { value }, label)),
    );
    const grouping = h(
      "select",
      { id: "statement-grouping", "aria-label": "Charges" },
      h("option", { value: "day" }, "Charges per day"),
      h("option", { value: "lease" }, "Charges per batch"),
    );
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
                void loadStatement();
              }),
            )
          : null,
      ),
      h("div", { class: "grid two" }, buySection(ctx), rechargeSection(ctx)),
      planSection(ctx),
      h(
        "section",
        { class: "card" },
        h("h2", { class: "card-title" }, "Statement", h("span", { class: "card-sub" }, "Days are UTC")),
        h("div", { class: "statement-tools" }, period, grouping),
        statementSection,
      ),
    );

    const loadStatement = loadInto(
      statementSection,
      { loading: "Loading the statement…", failed: "The statement", rows: 5 },
      () =>
        ctx.api.statement(ctx.project.projectId, {
          ...periodOf(period.value),
          group: grouping.value === "lease" ? "lease" : "day",
        }),
      statementBody,
    );
    period.addEventListener("change", () => void loadStatement());
    grouping.addEventListener("change", () => void loadStatement());
    loadInto(
      balanceBody,
      { loading: "Loading the balance…", failed: "The balance", rows: 2 },
      () => ctx.api.balance(ctx.project.projectId),
      balanceCard,
    );
  },
};
