import { z } from "zod";
import { type AlertRuleStore, RULE_IDS } from "../../core/alert-rules";
import { errors } from "../../core/errors";
import type { DeliveryLog, WebhookStore } from "../../core/webhook-delivery";
import { type BalanceAlerts, type CachedRules, setAlertRules } from "../../events/alerts";
import type { Deliveries } from "../../events/delivery";
import { type AddressPolicy, addWebhook } from "../../events/webhooks";
import { readJsonObject } from "../body";
import type { RouteTable } from "../routing";
import { parseBody, projectOf } from "./requests";

/** What Settings -> Alerts and Webhooks use: the same parts as `dmt alerts` and `dmt webhooks`. */
export interface AlertRoutesDeps {
  rules: Pick<AlertRuleStore, "put" | "list" | "delete">;
  cached: CachedRules;
  alerts: Pick<BalanceAlerts, "check">;
  webhooks: WebhookStore;
  log: Pick<DeliveryLog, "list">;
  deliveries: Pick<Deliveries, "test" | "resend">;
  /** Where webhooks may point: public addresses in AWS, loopback too locally. */
  policy: AddressPolicy;
  clock: () => number;
}

const BODY_LIMIT = 16 * 1024;
const DELIVERIES_SHOWN = 25;

const rulesBody = z.strictObject({
  lowBalanceUsd: z.string().optional(),
  budgetThresholds: z.string().optional(),
});

const webhookBody = z.strictObject({
  url: z.string(),
  /** Comma-separated event types; absent: every type but usage.recorded. */
  events: z.string().optional(),
});

/**
 * Alert rules and webhooks of a project, with the delivery log. Writes need an admin (the project
 * middleware answers a viewer's POST, PUT or DELETE with 403); a webhook's secret is in the answer
 * to its creation only.
 */
export function alertRoutes(base: string, deps: AlertRoutesDeps): RouteTable {
  const webhookOf = async (projectId: string, webhookId: string) => {
    const webhook = await deps.webhooks.get(projectId, webhookId);
    if (!webhook) throw errors.notFound(`Webhook '${webhookId}' was not found.`);
    return webhook;
  };
  return {
    [`${base}/alerts`]: {
      GET: async (c) => c.json({ rules: await deps.rules.list(projectOf(c)) }),
      PUT: async (c) => {
        const input = parseBody(rulesBody, await readJsonObject(c, BODY_LIMIT));
        const rules = await setAlertRules(deps, projectOf(c), input, deps.clock());
        return c.json({ rules });
      },
    },
    [`${base}/alerts/:ruleId`]: {
      DELETE: async (c) => {
        const ruleId = c.req.param("ruleId") ?? "";
        const known = (RULE_IDS as readonly string[]).includes(ruleId);
        if (!known || !(await deps.rules.delete(projectOf(c), ruleId))) {
          throw errors.notFound(`Alert rule '${ruleId}' was not found.`);
        }
        deps.cached.forget(projectOf(c));
        return c.json({ deleted: ruleId });
      },
    },
    [`${base}/webhooks`]: {
      GET: async (c) => c.json({ webhooks: await deps.webhooks.list(projectOf(c)) }),
      POST: async (c) => {
        const input = parseBody(webhookBody, await readJsonObject(c, BODY_LIMIT));
        const { webhook, secret } = await addWebhook(
          deps.webhooks,
          {
            projectId: projectOf(c),
            url: input.url,
            ...(input.events !== undefined && { events: input.events }),
          },
          deps.policy,
          deps.clock(),
        );
        return c.json({ webhook, secret }, 201);
      },
    },
    [`${base}/webhooks/:webhookId`]: {
      DELETE: async (c) => {
        const webhookId = c.req.param("webhookId") ?? "";
        if (!(await deps.webhooks.delete(projectOf(c), webhookId))) {
          throw errors.notFound(`Webhook '${webhookId}' was not found.`);
        }
        return c.json({ deleted: webhookId });
      },
    },
    [`${base}/webhooks/:webhookId/deliveries`]: {
      GET: async (c) => {
        const webhook = await webhookOf(projectOf(c), c.req.param("webhookId") ?? "");
        return c.json({ deliveries: await deps.log.list(webhook.webhookId, DELIVERIES_SHOWN) });
      },
    },
    [`${base}/webhooks/:webhookId/test`]: {
      POST: async (c) => {
        const webhook = await webhookOf(projectOf(c), c.req.param("webhookId") ?? "");
        return c.json({ delivery: await deps.deliveries.test(webhook.projectId, webhook.webhookId) });
      },
    },
    [`${base}/webhooks/:webhookId/deliveries/:eventId/resend`]: {
      POST: async (c) => {
        const webhook = await webhookOf(projectOf(c), c.req.param("webhookId") ?? "");
        const eventId = c.req.param("eventId") ?? "";
        return c.json({
          delivery: await deps.deliveries.resend(webhook.projectId, webhook.webhookId, eventId),
        });
      },
    },
  };
}
