import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CloudEvent } from "../../lambda/core/cloudevent";
import { ApiError } from "../../lambda/core/errors";
import { addWebhook } from "../../lambda/events/webhooks";
import { startTestHost, type TestHost } from "../support/host";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * Webhook delivery through the real local stack: events published onto the in-process queue and its
 * journal, fanned out, signed per Standard Webhooks, posted to a receiver on 127.0.0.1 that verifies
 * every signature; retries, dead letters, resends and a restart in the middle of a retry.
 */

const RETRIES = { retryDelaysMs: [50, 100, 150], webhookTimeoutMs: 1000 };
/** Outcomes are awaited generously: the machine may be busy. */
const WAIT = { timeout: 20_000, interval: 50 };

let stack: TestHost;
let receiver: WebhookReceiver;

beforeAll(async () => {
  stack = await startTestHost({}, undefined, { webhooks: RETRIES });
  receiver = await startWebhookReceiver();
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

async function webhookFor(events?: string[]) {
  const { projectId } = await stack.newKey();
  receiver.received.length = 0;
  receiver.script.length = 0;
  const added = await addWebhook(
    stack.events.webhooks,
    { projectId, url: receiver.url, ...(events ? { events } : {}) },
    "public-or-loopback",
    Date.now(),
  );
  return { projectId, ...added };
}

/** Verifies a received request with the webhook's secret, as a receiver would; returns the event. */
function verified(secret: string, index: number): CloudEvent {
  const got = receiver.received[index];
  if (!got) throw new Error(`no request ${index}`);
  const headers = {
    "webhook-id": String(got.headers["webhook-id"]),
    "webhook-timestamp": String(got.headers["webhook-timestamp"]),
    "webhook-signature": String(got.headers["webhook-signature"]),
  };
  return new Webhook(secret).verify(got.body, headers) as CloudEvent;
}

describe("webhook delivery", () => {
  it("delivers a CloudEvent signed per Standard Webhooks, and the signature fails with another secret", async () => {
    const { projectId, webhook, secret } = await webhookFor();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    const event = await stack.events.publisher.publish({
      type: "credits.granted",
      projectId,
      subject: "grant-1",
      data: { grant_id: "grant-1", amount_usd: "10.00" },
    });
    await expect.poll(() => receiver.received.length, WAIT).toBe(1);
    const got = verified(secret, 0);
    expect(got).toEqual(event);
    expect(got).toMatchObject({
      specversion: "1.0",
      type: "credits.granted",
      source: `/projects/${projectId}`,
      subject: "grant-1",
      datacontenttype: "application/json",
    });
    expect(receiver.received[0]?.headers["webhook-id"]).toBe(event.id);
    expect(receiver.received[0]?.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(24, 7).toString("base64")}`).verify(
        receiver.received[0]?.body ?? "",
        receiver.received[0]?.headers as Record<string, string>,
      ),
    ).toThrow();
    await expect
      .poll(async () => (await stack.events.log.get(webhook.webhookId, event.id))?.status, WAIT)
      .toBe("delivered");
  });

  it("sends a webhook only the types it asked for", async () => {
    const { projectId, secret } = await webhookFor(["key.created"]);
    await stack.events.publisher.publish({ type: "credits.granted", projectId, data: {} });
    const wanted = await stack.events.publisher.publish({ type: "key.created", projectId, data: {} });
    await expect.poll(() => receiver.received.length, WAIT).toBe(1);
    await stack.drain();
    expect(receiver.received).toHaveLength(1);
    expect(verified(secret, 0).id).toBe(wanted.id);
  });

  it("retries 5xx, 408, 429 and timeouts with the same webhook-id until a 2xx", async () => {
    const { projectId, webhook, secret } = await webhookFor();
    receiver.script.push(503, "hang", 429, 200);
    const event = await stack.events.publisher.publish({ type: "key.revoked", projectId, data: {} });
    await expect
      .poll(async () => (await stack.events.log.get(webhook.webhookId, event.id))?.status, WAIT)
      .toBe("delivered");
    const statuses = receiver.received.map((r) => r.status);
    expect(statuses).toEqual([503, 0, 429, 200]);
    expect(new Set(receiver.received.map((r) => r.headers["webhook-id"]))).toEqual(new Set([event.id]));
    for (let i = 0; i < receiver.received.length; i++) expect(verified(secret, i).id).toBe(event.id);
    const logged = await stack.events.log.get(webhook.webhookId, event.id);
    expect(logged).toMatchObject({ attempts: 4, lastStatusCode: 200, status: "delivered" });
  });

  it("dead-letters a 4xx at once, and a resend delivers it with the same id", async () => {
    const { projectId, webhook, secret } = await webhookFor();
    receiver.script.push(400);
    const event = await stack.events.publisher.publish({ type: "balance.low", projectId, data: {} });
    await expect
      .poll(async () => (await stack.events.log.get(webhook.webhookId, event.id))?.status, WAIT)
      .toBe("dead");
    expect(receiver.received.map((r) => r.status)).toEqual([400]);
    expect(await stack.events.log.get(webhook.webhookId, event.id)).toMatchObject({
      attempts: 1,
      lastStatusCode: 400,
      lastError: "answered 400",
    });

    const resent = await stack.events.deliveries.resend(projectId, webhook.webhookId, event.id);
    expect(resent).toMatchObject({ status: "delivered", attempts: 2, lastStatusCode: 200 });
    expect(verified(secret, 1).id).toBe(event.id);
    await expect(stack.events.deliveries.resend("someone-else", webhook.webhookId, event.id)).rejects.toThrow(
      ApiError,
    );
  });

  it("dead-letters after the last retry of the schedule", async () => {
    const { projectId, webhook } = await webhookFor();
    receiver.script.push(500, 500, 500, 500, 500);
    const event = await stack.events.publisher.publish({ type: "key.created", projectId, data: {} });
    await expect
      .poll(async () => (await stack.events.log.get(webhook.webhookId, event.id))?.status, WAIT)
      .toBe("dead");
    // The first try and one retry per delay of the schedule.
    expect(receiver.received).toHaveLength(1 + RETRIES.retryDelaysMs.length);
    const listed = await stack.events.log.list(webhook.webhookId, 10);
    expect(listed[0]).toMatchObject({ eventId: event.id, status: "dead", attempts: 4, lastStatusCode: 500 });
  });

  it("queues a proxied call's usage.recorded only where a webhook names it, and that webhook gets it signed", async () => {
    const queued: string[] = [];
    const queue = stack.events.queue;
    const enqueue = queue.enqueue.bind(queue);
    queue.enqueue = (body, delayMs) => {
      queued.push(body);
      return enqueue(body, delayMs);
    };
    const call = async (key: string) => {
      const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      return res.headers.get("x-dmt-transaction-id");
    };
    try {
      // Its only webhook takes the default types, which leave usage.recorded out: the event goes nowhere.
      const quiet = await webhookFor();
      await call((await stack.newKey({ projectId: quiet.projectId })).key);
      await stack.drain();
      expect(queued.filter((body) => body.includes("usage.recorded"))).toEqual([]);

      const loud = await webhookFor(["usage.recorded"]);
      const transactionId = await call((await stack.newKey({ projectId: loud.projectId })).key);
      await expect.poll(() => receiver.received.length, WAIT).toBe(1);
      const event = verified(loud.secret, 0);
      expect(event).toMatchObject({
        type: "usage.recorded",
        projectid: loud.projectId,
        subject: transactionId,
      });
      expect(event.data).toMatchObject({
        transaction_id: transactionId,
        vendor: "openai",
        model: "gpt-4o-mini",
      });
      expect(queued.filter((body) => body.includes("usage.recorded"))).toHaveLength(2);
    } finally {
      queue.enqueue = enqueue;
    }
  });

  it("a test event reaches one webhook and says how it went", async () => {
    const { projectId, webhook, secret } = await webhookFor(["usage.recorded"]);
    const delivery = await stack.events.deliveries.test(projectId, webhook.webhookId);
    expect(delivery).toMatchObject({ status: "delivered", eventType: "webhook.test", lastStatusCode: 200 });
    expect(verified(secret, 0).type).toBe("webhook.test");
  });
});

describe("a restart in the middle of a retry", () => {
  it("keeps the waiting retry in the journal and delivers it after the restart", async () => {
    const restarting = await startTestHost({}, undefined, { webhooks: { retryDelaysMs: [3000] } });
    const dataDir = restarting.dataDir;
    const own = await startWebhookReceiver();
    let second: TestHost | undefined;
    try {
      const { projectId } = await restarting.newKey();
      const { webhook, secret } = await addWebhook(
        restarting.events.webhooks,
        { projectId, url: own.url },
        "public-or-loopback",
        Date.now(),
      );
      own.script.push(500);
      const event = await restarting.events.publisher.publish({ type: "key.created", projectId, data: {} });
      await expect.poll(() => own.received.length, WAIT).toBe(1);
      await restarting.stop(true);
      // The retry waits on disk.
      expect(readdirSync(join(dataDir, "events-queue")).length).toBeGreaterThan(0);

      second = await startTestHost({}, dataDir);
      await expect
        .poll(async () => (await second?.events.log.get(webhook.webhookId, event.id))?.status, WAIT)
        .toBe("delivered");
      expect(own.received.map((r) => r.status)).toEqual([500, 200]);
      expect(own.received[1]?.headers["webhook-id"]).toBe(event.id);
      const headers = own.received[1]?.headers as Record<string, string>;
      expect((new Webhook(secret).verify(own.received[1]?.body ?? "", headers) as CloudEvent).id).toBe(
        event.id,
      );
    } finally {
      await own.close();
      await second?.stop();
    }
  });
});
