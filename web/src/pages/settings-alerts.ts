import { decimalUsd, formatCents } from "../../../lambda/core/money";
import type { AlertRuleView, DeliveryView, WebhookView } from "../api";
import { h, replace, writes } from "../dom";
import { FieldError, formError, onSubmit } from "../form";
import { timeCell } from "../format";
import { emptyState, errorMessage, loadInto, type PageContext } from "./page";

/** Settings -> Alerts and Webhooks: the same rules and webhooks as `dmt alerts` and `dmt webhooks`. */

function card(title: string, intro: string, ...children: (Node | null)[]): HTMLElement {
  return h(
    "section",
    { class: "card" },
    h("h2", { class: "card-title" }, title),
    h("p", { class: "card-intro muted" }, intro),
    ...children,
  );
}

function ruleText(rule: AlertRuleView): string {
  if (rule.kind === "low_balance") {
    return `balance.low below ${formatCents(rule.thresholdMicros)}${rule.armed ? "" : " (fired; re-arms above it)"}`;
  }
  return `budget.threshold / budget.exceeded at ${rule.thresholds.map((p) => `${p}%`).join(", ")}`;
}

export function alertsSection(ctx: PageContext): HTMLElement {
  const projectId = ctx.project.projectId;
  const list = h("div", { class: "padded" });
  /** The rules as saved: the form shows them, and sends only what was changed. */
  const current = { lowBalanceUsd: "", budgetThresholds: "" };
  const showCurrent = (rules: AlertRuleView[]) => {
    const saved = { lowBalanceUsd: "", budgetThresholds: "" };
    for (const rule of rules) {
      if (rule.kind === "low_balance") saved.lowBalanceUsd = decimalUsd(rule.thresholdMicros);
      else saved.budgetThresholds = rule.thresholds.join(",");
    }
    // A field the user is editing keeps what they typed.
    if (lowBalance.value.trim() === current.lowBalanceUsd) lowBalance.value = saved.lowBalanceUsd;
    if (thresholds.value.trim() === current.budgetThresholds) thresholds.value = saved.budgetThresholds;
    Object.assign(current, saved);
  };
  const load = () =>
    loadInto(
      list,
      { loading: "Loading alert rules…", failed: "The alert rules", rows: 2 },
      async () => {
        const rules = await ctx.api.alertRules(projectId);
        showCurrent(rules);
        return rules;
      },
      (rules, reload) =>
        rules.length === 0
          ? h("p", { class: "hint padded" }, "No alert rules yet.")
          : h(
              "ul",
              { class: "alert-rules" },
              ...rules.map((rule) => {
                const remove = writes(h("button", { type: "button", class: "button small" }, "Delete"));
                remove.addEventListener("click", async () => {
                  remove.disabled = true;
                  try {
                    await ctx.api.deleteAlertRule(projectId, rule.ruleId);
                    ctx.toast("Alert rule deleted.", "success");
                    reload();
                  } catch (err) {
                    ctx.toast(errorMessage(err), "error");
                    remove.disabled = false;
                  }
                });
                return h("li", {}, h("span", {}, ruleText(rule)), remove);
              }),
            ),
    );
  const lowBalance = h("input", {
    id: "alert-low-balance",
    type: "text",
    inputmode: "decimal",
    autocomplete: "off",
    placeholder: "5.00",
  });
  const thresholds = h("input", {
    id: "alert-thresholds",
    type: "text",
    autocomplete: "off",
    placeholder: "50,80,100",
  });
  const error = formError();
  const submit = h("button", { type: "submit", class: "button primary" }, "Save alerts");
  const form = h(
    "form",
    { class: "form padded", novalidate: true, "data-writes": "" },
    error,
    h("label", { for: "alert-low-balance", class: "field-label" }, "Low balance below (USD)"),
    lowBalance,
    h("label", { for: "alert-thresholds", class: "field-label" }, "Budget thresholds (% of each budget)"),
    thresholds,
    h("div", { class: "dialog-actions" }, submit),
  );
  onSubmit(form, {
    error,
    button: submit,
    read: () => {
      const changed = (input: HTMLInputElement, saved: string) =>
        input.value.trim() !== "" && input.value.trim() !== saved;
      const input = {
        ...(changed(lowBalance, current.lowBalanceUsd) && { lowBalanceUsd: lowBalance.value.trim() }),
        ...(changed(thresholds, current.budgetThresholds) && {
          budgetThresholds: thresholds.value.trim(),
        }),
      };
      if (Object.keys(input).length === 0) {
        throw new FieldError(lowBalance, "Change the amount or the thresholds to save a rule.");
      }
      return input;
    },
    send: async (input) => {
      await ctx.api.setAlertRules(projectId, input);
      ctx.toast("Alerts saved.", "success");
      load();
    },
  });
  load();
  return card(
    "Alerts",
    "Events sent once per crossing: balance.low when the credits fall below an amount; budget.threshold and budget.exceeded (100%) when a budget's window reaches a share of its limit.",
    list,
    form,
  );
}

const STATUS: Record<DeliveryView["status"], string> = {
  pending: "Pending",
  retrying: "Retrying",
  delivered: "Delivered",
  dead: "Failed",
};

/** The last deliveries of one webhook: status, code, attempts, next retry; a resend for the others. */
function deliveryLog(ctx: PageContext, webhook: WebhookView): HTMLElement {
  const body = h("div", { class: "delivery-log" });
  const load = () =>
    loadInto(
      body,
      { loading: "Loading deliveries…", failed: "The delivery log", rows: 2 },
      () => ctx.api.deliveries(ctx.project.projectId, webhook.webhookId),
      (deliveries, reload) => {
        if (deliveries.length === 0) return h("p", { class: "muted" }, "Nothing delivered yet.");
        const header = ["Event", "Status", "Code", "Attempts", "Last attempt", "Next retry", ""];
        return h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "table deliveries" },
            h("caption", { class: "sr-only" }, `Deliveries to ${webhook.url}, newest first`),
            h("thead", {}, h("tr", {}, ...header.map((t) => h("th", { scope: "col" }, t)))),
            h(
              "tbody",
              {},
              ...deliveries.map((d) => {
                const resend = writes(h("button", { type: "button", class: "button small" }, "Resend"));
                resend.hidden = d.status === "delivered";
                resend.addEventListener("click", async () => {
                  resend.disabled = true;
                  try {
                    const done = await ctx.api.resendDelivery(
                      ctx.project.projectId,
                      webhook.webhookId,
                      d.eventId,
                    );
                    ctx.toast(`Resent: ${STATUS[done.status].toLowerCase()}.`, "success");
                    reload();
                  } catch (err) {
                    ctx.toast(errorMessage(err), "error");
                    resend.disabled = false;
                  }
                });
                return h(
                  "tr",
                  { "data-event": d.eventId },
                  h("td", {}, h("code", {}, d.eventType)),
                  h("td", {}, h("span", { class: `badge delivery-${d.status}` }, STATUS[d.status])),
                  h(
                    "td",
                    {},
                    d.lastStatusCode === undefined ? (d.lastError ?? "") : String(d.lastStatusCode),
                  ),
                  h("td", {}, String(d.attempts)),
                  h("td", {}, timeCell(d.lastAttemptAt, "")),
                  h("td", {}, timeCell(d.nextRetryAt, "")),
                  h("td", {}, resend),
                );
              }),
            ),
          ),
        );
      },
    );
  load();
  return body;
}

function webhookItem(ctx: PageContext, webhook: WebhookView, reload: () => void): HTMLElement {
  const log = h("div", {});
  const show = h("button", { type: "button", class: "button small" }, "Deliveries");
  const test = writes(h("button", { type: "button", class: "button small" }, "Send test"));
  const remove = writes(h("button", { type: "button", class: "button small danger" }, "Delete"));
  show.addEventListener("click", () => replace(log, deliveryLog(ctx, webhook)));
  test.addEventListener("click", async () => {
    test.disabled = true;
    try {
      const delivery = await ctx.api.testWebhook(ctx.project.projectId, webhook.webhookId);
      ctx.toast(
        `Test ${STATUS[delivery.status].toLowerCase()}.`,
        delivery.status === "delivered" ? "success" : "error",
      );
      replace(log, deliveryLog(ctx, webhook));
    } catch (err) {
      ctx.toast(errorMessage(err), "error");
    } finally {
      test.disabled = false;
    }
  });
  remove.addEventListener("click", async () => {
    remove.disabled = true;
    try {
      await ctx.api.deleteWebhook(ctx.project.projectId, webhook.webhookId);
      ctx.toast("Webhook deleted.", "success");
      reload();
    } catch (err) {
      ctx.toast(errorMessage(err), "error");
      remove.disabled = false;
    }
  });
  return h(
    "li",
    { class: "webhook", "data-webhook": webhook.webhookId },
    h("div", { class: "webhook-url" }, h("code", {}, webhook.url)),
    h("div", { class: "muted webhook-events" }, webhook.events.join(", ")),
    h("div", { class: "inline" }, show, test, remove),
    log,
  );
}

export function webhooksSection(ctx: PageContext): HTMLElement {
  const projectId = ctx.project.projectId;
  const list = h("div", { class: "padded" });
  const secretBox = h("div", { id: "webhook-secret-box" });
  const load = () =>
    loadInto(
      list,
      { loading: "Loading webhooks…", failed: "The webhooks", rows: 2 },
      () => ctx.api.webhooks(projectId),
      (webhooks, reload) =>
        webhooks.length === 0
          ? emptyState("alert", "No webhooks", "Add a URL to receive this project's events, signed.")
          : h("ul", { class: "webhooks" }, ...webhooks.map((w) => webhookItem(ctx, w, reload))),
    );
  const url = h("input", {
    id: "webhook-url",
    type: "url",
    autocomplete: "off",
    placeholder: "https://example.com/hooks/dmt",
    required: true,
  });
  const events = h("input", {
    id: "webhook-events",
    type: "text",
    autocomplete: "off",
    placeholder: "every type but usage.recorded",
  });
  const error = formError();
  const submit = h("button", { type: "submit", class: "button primary" }, "Add webhook");
  const form = h(
    "form",
    { class: "form padded", novalidate: true, "data-writes": "" },
    error,
    h("label", { for: "webhook-url", class: "field-label" }, "URL"),
    url,
    h("label", { for: "webhook-events", class: "field-label" }, "Event types (comma-separated, optional)"),
    events,
    h("div", { class: "dialog-actions" }, submit),
  );
  onSubmit(form, {
    error,
    button: submit,
    read: () => ({
      url: url.value.trim(),
      ...(events.value.trim() !== "" && { events: events.value.trim() }),
    }),
    send: async (input) => {
      const added = await ctx.api.addWebhook(projectId, input);
      url.value = "";
      events.value = "";
      // Shown this once: the service keeps it encrypted and never shows it again.
      replace(
        secretBox,
        h(
          "div",
          { class: "secret-once padded", role: "status" },
          h(
            "p",
            {},
            "Signing secret of the new webhook, shown only now: verify each webhook-signature with it.",
          ),
          h("code", { id: "webhook-secret", class: "secret" }, added.secret),
        ),
      );
      load();
    },
  });
  load();
  return card(
    "Webhooks",
    "Each event is POSTed signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature), retried for over an hour; receivers deduplicate by webhook-id.",
    secretBox,
    list,
    form,
  );
}
