import { type AlertRule, RULE_IDS } from "../lambda/core/alert-rules";
import { decimalUsd } from "../lambda/core/credits";
import { errors } from "../lambda/core/errors";
import type { Delivery, WebhookView } from "../lambda/core/webhook-delivery";
import { setAlertRules } from "../lambda/events/alerts";
import { addWebhook } from "../lambda/events/webhooks";
import type { CliEvents } from "./cli-events-open";

interface Helpers {
  required(values: Record<string, unknown>, name: string): string;
  table(rows: Record<string, unknown>[], columns: string[]): string;
  iso(ms: unknown): string | undefined;
  usage(message: string): Error;
  wholeNumber(values: Record<string, unknown>, name: string): number | undefined;
}

type Open = () => Promise<{ project(projectId: string): Promise<string>; events(): Promise<CliEvents> }>;

interface EventCommand {
  usage: string;
  /** One line for `--help`. */
  summary: string;
  options: Record<string, { type: "string" | "boolean"; multiple?: boolean }>;
  positionals?: number;
  run(args: { values: Record<string, unknown>; positionals: string[]; open: Open }): Promise<unknown>;
  print?(result: unknown): string;
}

const json = { json: { type: "boolean" as const } };
const project = { project: { type: "string" as const } };

/** What `alerts set` says it stored. */
function describeRule(rule: AlertRule): string {
  if (rule.kind === "low_balance") {
    return `Alert set: balance.low when ${rule.projectId}'s available credits fall below $${decimalUsd(rule.thresholdMicros)}.`;
  }
  const below = rule.thresholds.filter((p) => p < 100).map((p) => `${p}%`);
  const parts = [
    ...(below.length > 0 ? [`budget.threshold at ${below.join(", ")}`] : []),
    ...(rule.thresholds.includes(100) ? ["budget.exceeded at 100%"] : []),
  ];
  return `Alert set: ${parts.join("; ")} of each of ${rule.projectId}'s budgets, once per window.`;
}

/** `dmt alerts ...` and `dmt webhooks ...`. */
export function eventCommands(h: Helpers): Record<string, EventCommand> {
  /** The project (checked to exist) and the events. */
  const opened = async (values: Record<string, unknown>, open: Open) => {
    const services = await open();
    const projectId = await services.project(h.required(values, "project"));
    return { projectId, events: await services.events() };
  };
  const webhookOf = async (events: CliEvents, projectId: string, webhookId: string): Promise<WebhookView> => {
    const webhook = await events.webhooks.get(projectId, webhookId);
    if (!webhook) throw errors.notFound(`No webhook '${webhookId}' in project '${projectId}'.`);
    return webhook;
  };
  const printDelivery = (d: unknown) => {
    const delivery = d as Delivery;
    const code = delivery.lastStatusCode === undefined ? "" : ` (${delivery.lastStatusCode})`;
    const why = delivery.status === "delivered" ? "" : `: ${delivery.lastError ?? ""}`;
    return `${delivery.eventType} ${delivery.eventId}: ${delivery.status}${code}${why}`;
  };

  return {
    "alerts set": {
      summary: "an alert when the balance falls below an amount, or a budget passes a share of its limit",
      usage:
        "dmt alerts set --project <id> [--low-balance-usd <amount>] [--budget-thresholds <percent,...>] [--json]",
      options: {
        ...project,
        "low-balance-usd": { type: "string" },
        "budget-thresholds": { type: "string" },
        ...json,
      },
      run: async ({ values, open }) => {
        const amount = values["low-balance-usd"];
        const thresholds = values["budget-thresholds"];
        if (typeof amount !== "string" && typeof thresholds !== "string") {
          throw h.usage("give --low-balance-usd <amount>, --budget-thresholds <percent,...> or both");
        }
        const { projectId, events } = await opened(values, open);
        return setAlertRules(
          { rules: events.rules, cached: events.cachedRules, alerts: events.alerts },
          projectId,
          {
            ...(typeof amount === "string" && { lowBalanceUsd: amount }),
            ...(typeof thresholds === "string" && { budgetThresholds: thresholds }),
          },
          Date.now(),
        );
      },
      print: (r) => (r as AlertRule[]).map(describeRule).join("\n"),
    },
    "alerts list": {
      summary: "a project's alert rules, and whether the balance alert has fired",
      usage: "dmt alerts list --project <id> [--json]",
      options: { ...project, ...json },
      run: async ({ values, open }) => {
        const { projectId, events } = await opened(values, open);
        return events.rules.list(projectId);
      },
      print: (rows) =>
        h.table(
          (rows as AlertRule[]).map((r) =>
            r.kind === "low_balance"
              ? {
                  rule: r.ruleId,
                  kind: r.kind,
                  threshold: `$${decimalUsd(r.thresholdMicros)}`,
                  state: r.armed ? "armed" : "fired",
                  fired: h.iso(r.firedAt),
                }
              : {
                  rule: r.ruleId,
                  kind: r.kind,
                  threshold: r.thresholds.map((p) => `${p}%`).join(","),
                  state: "per budget window",
                },
          ),
          ["rule", "kind", "threshold", "state", "fired"],
        ),
    },
    "alerts delete": {
      summary: "deletes an alert rule",
      usage: `dmt alerts delete --project <id> <rule id: ${RULE_IDS.join(" | ")}> [--json]`,
      options: { ...project, ...json },
      positionals: 1,
      run: async ({ values, positionals, open }) => {
        const { projectId, events } = await opened(values, open);
        const ruleId = positionals[0] ?? "";
        if (!(await events.rules.delete(projectId, ruleId))) {
          throw errors.notFound(`Project '${projectId}' has no alert rule '${ruleId}'.`);
        }
        return { projectId, ruleId, deleted: true };
      },
      print: (r) => `Deleted alert rule ${(r as { ruleId: string }).ruleId}.`,
    },
    "webhooks add": {
      summary: "a signed webhook for a project's events; prints its signing secret once",
      usage: "dmt webhooks add --project <id> --url <url> [--events <type,...>] [--json]",
      options: { ...project, url: { type: "string" }, events: { type: "string" }, ...json },
      run: async ({ values, open }) => {
        const url = h.required(values, "url");
        const { projectId, events } = await opened(values, open);
        const { webhook, secret } = await addWebhook(
          events.webhooks,
          { projectId, url, ...(typeof values.events === "string" ? { events: values.events } : {}) },
          events.policy,
          Date.now(),
        );
        return {
          id: webhook.webhookId,
          secret,
          url: webhook.url,
          events: webhook.events,
          project: projectId,
        };
      },
      print: (r) => {
        const added = r as { id: string; secret: string; url: string; events: string[] };
        return [
          `Added webhook ${added.id} -> ${added.url}`,
          `  events: ${added.events.join(", ")}`,
          "",
          `  ${added.secret}`,
          "",
          "This is the only time the signing secret is shown. Verify each request's webhook-signature with it",
          "(Standard Webhooks) and deduplicate by webhook-id.",
        ].join("\n");
      },
    },
    "webhooks list": {
      summary: "a project's webhooks and the events each receives",
      usage: "dmt webhooks list --project <id> [--json]",
      options: { ...project, ...json },
      run: async ({ values, open }) => {
        const { projectId, events } = await opened(values, open);
        return events.webhooks.list(projectId);
      },
      print: (rows) =>
        h.table(
          (rows as WebhookView[]).map((w) => ({
            id: w.webhookId,
            url: w.url,
            events: w.events.join(","),
            created: h.iso(w.createdAt),
          })),
          ["id", "url", "events", "created"],
        ),
    },
    "webhooks delete": {
      summary: "deletes a webhook",
      usage: "dmt webhooks delete --project <id> <webhook id> [--json]",
      options: { ...project, ...json },
      positionals: 1,
      run: async ({ values, positionals, open }) => {
        const { projectId, events } = await opened(values, open);
        const webhookId = positionals[0] ?? "";
        if (!(await events.webhooks.delete(projectId, webhookId))) {
          throw errors.notFound(`No webhook '${webhookId}' in project '${projectId}'.`);
        }
        return { projectId, webhookId, deleted: true };
      },
      print: (r) => `Deleted webhook ${(r as { webhookId: string }).webhookId}.`,
    },
    "webhooks test": {
      summary: "sends a webhook a signed webhook.test event now and says how it answered",
      usage: "dmt webhooks test --project <id> <webhook id> [--json]",
      options: { ...project, ...json },
      positionals: 1,
      run: async ({ values, positionals, open }) => {
        const { projectId, events } = await opened(values, open);
        return events.deliveries.test(projectId, positionals[0] ?? "");
      },
      print: printDelivery,
    },
    "webhooks resend": {
      summary: "sends a logged event to a webhook again, now, with its original id",
      usage: "dmt webhooks resend --project <id> <webhook id> <event id> [--json]",
      options: { ...project, ...json },
      positionals: 2,
      run: async ({ values, positionals, open }) => {
        const { projectId, events } = await opened(values, open);
        return events.deliveries.resend(projectId, positionals[0] ?? "", positionals[1] ?? "");
      },
      print: printDelivery,
    },
    "webhooks deliveries": {
      summary: "a webhook's latest deliveries: status, attempts, the next retry",
      usage: "dmt webhooks deliveries --project <id> <webhook id> [--limit N] [--json]",
      options: { ...project, limit: { type: "string" }, ...json },
      positionals: 1,
      run: async ({ values, positionals, open }) => {
        const { projectId, events } = await opened(values, open);
        const webhook = await webhookOf(events, projectId, positionals[0] ?? "");
        const limit = h.wholeNumber(values, "limit") ?? 25;
        if (limit < 1 || limit > 100) throw h.usage("--limit must be from 1 to 100");
        return events.log.list(webhook.webhookId, limit);
      },
      print: (rows) =>
        h.table(
          (rows as Delivery[]).map((d) => ({
            event: d.eventId,
            type: d.eventType,
            status: d.status,
            attempts: d.attempts,
            code: d.lastStatusCode,
            last: h.iso(d.lastAttemptAt),
            next: h.iso(d.nextRetryAt),
            error: d.status === "delivered" ? undefined : d.lastError,
          })),
          ["event", "type", "status", "attempts", "code", "last", "next", "error"],
        ),
    },
  };
}
