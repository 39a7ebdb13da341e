import { formatCents } from "../../../lambda/core/money";
import { ApiFailure, type CreditPurchaseOffer, type RechargeRule } from "../api";
import { h, icon, writes } from "../dom";
import { FieldError, formError, onSubmit } from "../form";
import { formatTime, money } from "../format";
import { errorMessage, loadInto, type PageContext } from "./page";

/** `"25"`, `"12.50"` as micro-dollars; undefined for anything else (the server says what is wrong). */
function microsOf(usd: string): number | undefined {
  const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(usd);
  if (!match) return undefined;
  return Number(match[1]) * 1_000_000 + Number((match[2] ?? "").padEnd(6, "0"));
}

/** A dollar string from the API, in the page's money format (`$25.00`). */
const usdText = (usd: string) => {
  const micros = microsOf(usd);
  return micros === undefined ? `$${usd}` : formatCents(micros);
};
const usdMoney = (usd: string) => {
  const micros = microsOf(usd);
  return micros === undefined ? h("span", {}, `$${usd}`) : money(micros);
};

/** What is wrong with the threshold as typed, before anything is sent; undefined when it reads. */
function thresholdProblem(text: string): string | undefined {
  if (text === "") return "Enter the balance to recharge below, in dollars, like 10 or 12.50.";
  if (/^-\s*\d+(\.\d+)?$/.test(text)) return "The threshold cannot be negative.";
  if (!/^\d+(\.\d+)?$/.test(text)) return "The threshold must be a number of dollars, like 10 or 12.50.";
  if (Number(text) === 0) return "The threshold must be above $0.00: the balance never falls below zero.";
  return undefined;
}

function ruleLine(offer: CreditPurchaseOffer): HTMLElement {
  const rule = offer.recharge;
  return h(
    "p",
    { class: "recharge-rule", "data-testid": "recharge-rule" },
    ...(rule
      ? [
          h("span", { class: "badge active" }, "On"),
          " When the balance falls below ",
          usdMoney(rule.threshold_usd),
          ", ",
          usdMoney(rule.amount_usd),
          " is charged to the saved card, once per crossing.",
        ]
      : [h("span", { class: "badge" }, "Off"), " The balance is not topped up automatically."]),
  );
}

function lastLine(offer: CreditPurchaseOffer): HTMLElement | null {
  const last = offer.last_recharge;
  if (!last) return null;
  const what =
    last.outcome === "succeeded"
      ? "succeeded"
      : last.outcome === "failed"
        ? `failed${last.message ? `: ${last.message}` : ""}`
        : "Stripe did not answer; the next check tries again";
  return h(
    "p",
    { class: "hint", "data-testid": "recharge-last" },
    `Last recharge ${formatTime(last.at)}: ${what}.`,
  );
}

/** The rule's form: threshold and amount (one of the offered), saved or turned off. Viewers see it disabled. */
function ruleForm(ctx: PageContext, offer: CreditPurchaseOffer, reload: () => Promise<void>): HTMLElement {
  const projectId = ctx.project.projectId;
  const threshold = h("input", {
    id: "recharge-threshold",
    type: "text",
    inputmode: "decimal",
    autocomplete: "off",
    placeholder: "10.00",
    value: offer.recharge?.threshold_usd ?? "",
  });
  const amount = h(
    "select",
    { id: "recharge-amount" },
    ...offer.amounts_usd.map((usd) =>
      h("option", { value: usd, selected: usd === offer.recharge?.amount_usd }, usdText(usd)),
    ),
  );
  const error = formError("recharge-error");
  const submit = h(
    "button",
    { type: "submit", class: "button primary" },
    offer.recharge ? "Save rule" : "Turn on",
  );
  const off = writes(h("button", { type: "button", class: "button" }, "Turn off"));
  off.hidden = !offer.recharge;
  off.addEventListener("click", async () => {
    off.disabled = true;
    error.replaceChildren();
    try {
      await ctx.api.clearRecharge(projectId);
      ctx.toast("Auto-recharge turned off.", "success");
      await reload();
    } catch (err) {
      error.textContent = errorMessage(err);
      off.disabled = false;
    }
  });
  const form = writes(
    h(
      "form",
      { class: "form padded recharge-form", novalidate: true },
      error,
      h(
        "div",
        { class: "recharge-fields" },
        h(
          "div",
          {},
          h("label", { for: "recharge-threshold", class: "field-label" }, "Recharge below (USD)"),
          threshold,
        ),
        h("div", {}, h("label", { for: "recharge-amount", class: "field-label" }, "Amount to buy"), amount),
      ),
      h("div", { class: "dialog-actions" }, off, submit),
    ),
  );
  onSubmit(form, {
    error,
    button: submit,
    busyLabel: "Saving…",
    read: (): RechargeRule => {
      const text = threshold.value.trim();
      const problem = thresholdProblem(text);
      if (problem) throw new FieldError(threshold, problem);
      // The page offers only the operator's amounts; a stale or edited page is told which they are.
      if (!offer.amounts_usd.includes(amount.value)) {
        throw new FieldError(
          amount,
          `Pick one of the amounts offered: ${offer.amounts_usd.map(usdText).join(", ")}.`,
        );
      }
      return { threshold_usd: text, amount_usd: amount.value };
    },
    send: async (rule) => {
      await ctx.api.setRecharge(projectId, rule);
      ctx.toast(
        `Auto-recharge on: below ${usdText(rule.threshold_usd)}, buy ${usdText(rule.amount_usd)}.`,
        "success",
      );
      await reload();
    },
    fieldOf: (err) =>
      err instanceof ApiFailure
        ? err.message.includes("amount_usd")
          ? amount
          : err.message.includes("threshold_usd")
            ? threshold
            : undefined
        : undefined,
  });
  return form;
}

/**
 * The Credits page's "Auto-recharge" card (docs/billing.md): the project's rule, which admins set,
 * change or turn off here; viewers see it with the controls disabled (the API refuses them too). The
 * rule charges the card a Buy credits purchase saved: without one, the card says so, as the API does.
 * Hidden when the deployment has no Stripe settings (Buy credits says so).
 */
export function rechargeSection(ctx: PageContext): HTMLElement {
  const body = h("div", { class: "recharge-body" });
  const section = h(
    "section",
    { class: "card", "data-testid": "auto-recharge" },
    h("h2", { class: "card-title" }, "Auto-recharge"),
    body,
  );
  loadInto(
    body,
    { loading: "Loading the recharge rule…", failed: "The recharge rule", rows: 2 },
    () => ctx.api.purchaseOffer(ctx.project.projectId),
    (offer: CreditPurchaseOffer, reload) => {
      section.hidden = !offer.configured;
      if (!offer.configured) return [];
      return [
        ruleLine(offer),
        lastLine(offer),
        offer.saved_card
          ? null
          : h(
              "div",
              { class: "callout warning", "data-testid": "recharge-no-card" },
              icon("alert"),
              h(
                "p",
                {},
                "No saved card yet: a Buy credits purchase saves one. Until then a rule can be set, but a recharge cannot be charged.",
              ),
            ),
        ruleForm(ctx, offer, reload),
      ];
    },
  );
  return section;
}
