import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildEvent } from "../../../lambda/core/cloudevent";
import { DecryptionError } from "../../../lambda/core/crypto";
import type { Delivery, DeliveryLog, WebhookStore, WebhookView } from "../../../lambda/core/webhook-delivery";
import { generateWebhookSecret, webhookId } from "../../../lambda/events/webhooks";

export interface WebhooksUnderTest {
  webhooks: WebhookStore;
  /** The same webhooks read with another master key. */
  withOtherMasterKey(): WebhookStore;
  log: DeliveryLog;
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;

/**
 * The cases every adapter of the webhook store and the delivery log (`core/webhook-delivery.ts`) must pass:
 * secrets kept sealed and revealed only by `secret`, deliveries kept per webhook, newest first.
 */
export function webhooksContract(name: string, make: () => Promise<WebhooksUnderTest>): void {
  describe(`webhooks contract: ${name}`, () => {
    let subject: WebhooksUnderTest;
    beforeAll(async () => {
      subject = await make();
    });
    afterAll(() => subject.close());

    let projects = 0;
    const newProject = () => `hooks-${++projects}`;
    const webhook = (projectId: string, createdAt = T0): WebhookView => ({
      projectId,
      webhookId: webhookId(),
      url: "https://example.com/hook",
      events: ["credits.granted", "key.created"],
      createdAt,
    });

    it("adds, lists, gets and deletes a project's webhooks, never showing their secrets", async () => {
      const project = newProject();
      const [first, second] = [webhook(project), webhook(project, T0 + 1)];
      const secret = generateWebhookSecret();
      await subject.webhooks.add(first, secret);
      await subject.webhooks.add(second, generateWebhookSecret());
      const byId = (a: WebhookView, b: WebhookView) => (a.webhookId < b.webhookId ? -1 : 1);
      expect((await subject.webhooks.list(project)).sort(byId)).toEqual([first, second].sort(byId));
      expect(JSON.stringify(await subject.webhooks.list(project))).not.toContain(secret.slice(6));
      expect(await subject.webhooks.get(project, first.webhookId)).toEqual(first);
      expect(await subject.webhooks.get(newProject(), first.webhookId)).toBeUndefined();
      expect(await subject.webhooks.list(newProject())).toEqual([]);

      expect(await subject.webhooks.secret(project, first.webhookId)).toBe(secret);
      expect(await subject.webhooks.secret(project, "wh_absent")).toBeUndefined();

      expect(await subject.webhooks.delete(project, first.webhookId)).toBe(true);
      expect(await subject.webhooks.delete(project, first.webhookId)).toBe(false);
      expect(await subject.webhooks.list(project)).toEqual([second]);
      expect(await subject.webhooks.secret(project, first.webhookId)).toBeUndefined();
    });

    it("refuses a second webhook of the same id, keeping the first", async () => {
      const project = newProject();
      const hook = webhook(project);
      const secret = generateWebhookSecret();
      await subject.webhooks.add(hook, secret);
      await expect(
        subject.webhooks.add({ ...hook, url: "https://example.com/other" }, generateWebhookSecret()),
      ).rejects.toThrow();
      expect(await subject.webhooks.get(project, hook.webhookId)).toEqual(hook);
      expect(await subject.webhooks.secret(project, hook.webhookId)).toBe(secret);
    });

    it("does not reveal a secret with another master key", async () => {
      const project = newProject();
      const hook = webhook(project);
      await subject.webhooks.add(hook, generateWebhookSecret());
      await expect(subject.withOtherMasterKey().secret(project, hook.webhookId)).rejects.toThrow(
        DecryptionError,
      );
    });

    const delivery = (webhookId: string, at: number): Delivery => {
      const event = buildEvent({ type: "credits.granted", projectId: "p", data: { amount_usd: "1.00" } }, at);
      return {
        projectId: "p",
        webhookId,
        eventId: event.id,
        eventType: event.type,
        status: "pending",
        attempts: 0,
        createdAt: at,
        event,
      };
    };

    it("logs deliveries: begin keeps an entry that exists, update replaces it, list is newest first", async () => {
      const hook = webhookId();
      const [old, mid, fresh] = [delivery(hook, T0), delivery(hook, T0 + 1000), delivery(hook, T0 + 2000)];
      for (const each of [mid, fresh, old]) await subject.log.begin(each);
      await subject.log.begin(delivery(webhookId(), T0 + 3000));

      const attempted: Delivery = {
        ...mid,
        status: "retrying",
        attempts: 1,
        lastStatusCode: 503,
        lastError: "answered 503",
        lastAttemptAt: T0 + 1500,
        nextRetryAt: T0 + 31_500,
      };
      await subject.log.update(attempted);
      // A fan-out run twice begins it again: the attempt stays.
      await subject.log.begin(mid);
      expect(await subject.log.get(hook, mid.eventId)).toEqual(attempted);

      const delivered: Delivery = { ...mid, status: "delivered", attempts: 2, lastAttemptAt: T0 + 32_000 };
      await subject.log.update(delivered);
      expect(await subject.log.get(hook, mid.eventId)).toEqual(delivered);
      expect(await subject.log.get(hook, "evt_absent")).toBeUndefined();

      expect((await subject.log.list(hook, 10)).map((d) => d.eventId)).toEqual([
        fresh.eventId,
        mid.eventId,
        old.eventId,
      ]);
      expect((await subject.log.list(hook, 2)).map((d) => d.eventId)).toEqual([fresh.eventId, mid.eventId]);
      expect(await subject.log.list(webhookId(), 10)).toEqual([]);
    });
  });
}
