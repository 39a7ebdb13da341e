import { errors } from "../../lambda/core/errors";
import type { Delivery } from "../../lambda/core/webhook-delivery";
import { addWebhook } from "../../lambda/events/webhooks";
import { type Context, command } from "./command";
import { iso, table } from "./format";
import { required, text, UsageError, wholeNumber } from "./options";

const project = required("<id>", "the project");

/** The project (checked to exist) and the events. */
async function opened(open: Context["open"], projectId: string) {
  const services = await open();
  return { projectId: await services.project(projectId), events: await services.events() };
}

function printDelivery(delivery: Delivery): string {
  const code = delivery.lastStatusCode === undefined ? "" : ` (${delivery.lastStatusCode})`;
  const why = delivery.status === "delivered" ? "" : `: ${delivery.lastError ?? ""}`;
  return `${delivery.eventType} ${delivery.eventId}: ${delivery.status}${code}${why}`;
}

/** `dmt webhooks ...`: signed deliveries of a project's events. */
export const webhookCommands = [
  command({
    name: "webhooks add",
    summary: "a signed webhook for a project's events; prints its signing secret once",
    options: {
      project,
      url: required("<url>", "where events are POSTed (https, a public address)"),
      events: text("<type,...>", "the event types it receives (default: all but usage.recorded)"),
    },
    examples: ["dmt webhooks add --project demo --url https://example.com/dmt-events --events balance.low"],
    run: async ({ values, open }) => {
      const { projectId, events } = await opened(open, values.project);
      const { webhook, secret } = await addWebhook(
        events.webhooks,
        { projectId, url: values.url, ...(values.events !== undefined ? { events: values.events } : {}) },
        events.policy,
        Date.now(),
      );
      return { id: webhook.webhookId, secret, url: webhook.url, events: webhook.events, project: projectId };
    },
    print: (added) =>
      [
        `Added webhook ${added.id} -> ${added.url}`,
        `  events: ${added.events.join(", ")}`,
        "",
        `  ${added.secret}`,
        "",
        "This is the only time the signing secret is shown. Verify each request's webhook-signature with it",
        "(Standard Webhooks) and deduplicate by webhook-id.",
      ].join("\n"),
  }),
  command({
    name: "webhooks list",
    summary: "a project's webhooks and the events each receives",
    options: { project },
    examples: ["dmt webhooks list --project demo"],
    run: async ({ values, open }) => {
      const { projectId, events } = await opened(open, values.project);
      return events.webhooks.list(projectId);
    },
    print: (webhooks) =>
      table(
        webhooks.map((w) => ({
          id: w.webhookId,
          url: w.url,
          events: w.events.join(","),
          created: iso(w.createdAt),
        })),
        ["id", "url", "events", "created"],
      ),
  }),
  command({
    name: "webhooks delete",
    summary: "deletes a webhook",
    args: ["<webhook id>"],
    options: { project },
    examples: ["dmt webhooks delete --project demo wh_2b7e151628aed2a6"],
    run: async ({ values, args: [webhookId], open }) => {
      const { projectId, events } = await opened(open, values.project);
      if (!(await events.webhooks.delete(projectId, webhookId))) {
        throw errors.notFound(`No webhook '${webhookId}' in project '${projectId}'.`);
      }
      return { projectId, webhookId, deleted: true };
    },
    print: (deleted) => `Deleted webhook ${deleted.webhookId}.`,
  }),
  command({
    name: "webhooks test",
    summary: "sends a webhook a signed webhook.test event now and says how it answered",
    args: ["<webhook id>"],
    options: { project },
    examples: ["dmt webhooks test --project demo wh_2b7e151628aed2a6"],
    run: async ({ values, args: [webhookId], open }) => {
      const { projectId, events } = await opened(open, values.project);
      return events.deliveries.test(projectId, webhookId);
    },
    print: printDelivery,
  }),
  command({
    name: "webhooks resend",
    summary: "sends a logged event to a webhook again, now, with its original id",
    args: ["<webhook id>", "<event id>"],
    options: { project },
    examples: ["dmt webhooks resend --project demo wh_2b7e151628aed2a6 evt_01JD6V8Q3ZP4N2"],
    run: async ({ values, args: [webhookId, eventId], open }) => {
      const { projectId, events } = await opened(open, values.project);
      return events.deliveries.resend(projectId, webhookId, eventId);
    },
    print: printDelivery,
  }),
  command({
    name: "webhooks deliveries",
    summary: "a webhook's latest deliveries: status, attempts, the next retry",
    args: ["<webhook id>"],
    options: { project, limit: wholeNumber("N", "how many, newest first: 1 to 100 (default 25)") },
    examples: ["dmt webhooks deliveries --project demo wh_2b7e151628aed2a6 --limit 10"],
    run: async ({ values, args: [webhookId], open }) => {
      const limit = values.limit ?? 25;
      if (limit < 1 || limit > 100) throw new UsageError("--limit must be from 1 to 100");
      const { projectId, events } = await opened(open, values.project);
      const webhook = await events.webhooks.get(projectId, webhookId);
      if (!webhook) throw errors.notFound(`No webhook '${webhookId}' in project '${projectId}'.`);
      return events.log.list(webhook.webhookId, limit);
    },
    print: (deliveries) =>
      table(
        deliveries.map((d) => ({
          event: d.eventId,
          type: d.eventType,
          status: d.status,
          attempts: d.attempts,
          code: d.lastStatusCode,
          last: iso(d.lastAttemptAt),
          next: iso(d.nextRetryAt),
          error: d.status === "delivered" ? undefined : d.lastError,
        })),
        ["event", "type", "status", "attempts", "code", "last", "next", "error"],
      ),
  }),
];
