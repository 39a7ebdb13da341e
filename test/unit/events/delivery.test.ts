import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { MemoryDeliveryLog, MemoryWebhooks } from "../../../lambda/adapters/memory/events";
import { MemoryMasterKey } from "../../../lambda/adapters/memory/key-wrapper";
import { buildEvent, type CloudEvent, type EventType } from "../../../lambda/core/cloudevent";
import { type Logger, loggerOver } from "../../../lambda/core/logger";
import type { QueueBatch } from "../../../lambda/core/queue";
import type { SendResult, WebhookSender } from "../../../lambda/core/webhook-delivery";
import { createDeliveries, eventMessage, RETRY_DELAYS_MS } from "../../../lambda/events/delivery";
import { addWebhook } from "../../../lambda/events/webhooks";

/**
 * Webhook delivery over the memory webhook store and delivery log, a queue that keeps what is sent to
 * it, and a sender that records each request and answers as the test scripts it: fan-out, signatures,
 * retries on the schedule, dead deliveries and resends, without a network or a receiver.
 */

const T0 = Date.UTC(2026, 10, 22, 12);

interface Posted {
  url: string;
  headers: Record<string, string>;
  body: string;
}

function deliveryWorld() {
  let now = T0;
  const clock = () => now;
  const webhooks = new MemoryWebhooks(new MemoryMasterKey());
  const log = new MemoryDeliveryLog();
  const queued: { body: string; delayMs: number }[] = [];
  const posted: Posted[] = [];
  /** The answers the next posts get, in order; a 200 once the script runs out. */
  const script: SendResult[] = [];
  const sender: WebhookSender = {
    async post(url, headers, body) {
      posted.push({ url, headers, body });
      return script.shift() ?? { status: 200 };
    },
  };
  const warnings: Record<string, unknown>[] = [];
  const logger: Logger = loggerOver((level, _message, fields) => {
    if (level === "warn" && fields) warnings.push(fields);
  });
  const deliveries = createDeliveries({
    webhooks,
    log,
    queue: { send: async (body, delayMs) => void queued.push({ body, delayMs }) },
    sender,
    logger,
    clock,
  });
  let messages = 0;
  /** Hands the queue's messages to the handler, as the queue would once their delay passed. */
  async function drain(): Promise<{ failed: number }> {
    let failed = 0;
    while (queued.length > 0) {
      const next = queued.shift();
      if (!next) break;
      now += next.delayMs;
      const batch: QueueBatch = {
        Records: [
          { messageId: `m-${++messages}`, body: next.body, attributes: { ApproximateReceiveCount: "1" } },
        ],
      };
      failed += (await deliveries.handler(batch)).batchItemFailures.length;
    }
    return { failed };
  }
  return {
    webhooks,
    log,
    queued,
    posted,
    script,
    warnings,
    deliveries,
    drain,
    publish: (event: CloudEvent) => queued.push({ body: eventMessage(event), delayMs: 0 }),
    add: (projectId: string, events?: EventType[]) =>
      addWebhook(
        webhooks,
        { projectId, url: `https://hooks.example.com/${projectId}`, ...(events && { events }) },
        "public",
        now,
      ),
    now: () => now,
  };
}

const granted = (projectId = "proj") =>
  buildEvent({ type: "credits.granted", projectId, data: { amount_usd: "25.00" } }, T0);

/**
 * Verifies a post as a receiver would, with the webhook's secret: the signature over its id, its
 * timestamp and its body (the library's `verify` also wants the timestamp within 5 minutes of the real
 * time, which these tests' clock is not). Returns the event.
 */
function verify(secret: string, post: Posted): CloudEvent {
  const id = post.headers["webhook-id"] ?? "";
  const at = new Date(Number(post.headers["webhook-timestamp"]) * 1000);
  const expected = new Webhook(secret).sign(id, at, post.body);
  if (post.headers["webhook-signature"] !== expected) throw new Error("the signature does not verify");
  return JSON.parse(post.body) as CloudEvent;
}

describe("webhook delivery", () => {
  it("fans an event out to each webhook of its project that wants its type, signed per Standard Webhooks", async () => {
    const w = deliveryWorld();
    const wanted = await w.add("proj");
    const other = await w.add("proj", ["key.created"]);
    await w.add("another-proj");
    const event = granted();
    w.publish(event);
    expect(await w.drain()).toEqual({ failed: 0 });

    expect(w.posted).toHaveLength(1);
    const [post] = w.posted as [Posted];
    expect(post.url).toBe(wanted.webhook.url);
    expect(post.headers["webhook-id"]).toBe(event.id);
    expect(post.headers["content-type"]).toBe("application/cloudevents+json");
    expect(verify(wanted.secret, post)).toEqual(event);
    expect(() => verify(other.secret, post)).toThrow();
    expect(await w.log.get(wanted.webhook.webhookId, event.id)).toMatchObject({
      status: "delivered",
      attempts: 1,
      lastStatusCode: 200,
    });
    expect(await w.log.list(other.webhook.webhookId, 10)).toEqual([]);
  });

  it("retries 5xx, 408, 429 and timeouts on the schedule, each with the same webhook-id, until a 2xx", async () => {
    const w = deliveryWorld();
    const { webhook, secret } = await w.add("proj");
    w.script.push(
      { status: 503 },
      { status: 408 },
      { status: 429 },
      { error: "timeout", detail: "no answer in 10 s" },
      { status: 204 },
    );
    const event = granted();
    w.publish(event);
    await w.drain();
    expect(w.posted.map((p) => p.headers["webhook-id"])).toEqual(Array(5).fill(event.id));
    for (const post of w.posted) expect(verify(secret, post)).toEqual(event);
    // Each retry waited its delay of the schedule.
    const times = w.posted.map((p) => Number(p.headers["webhook-timestamp"]) * 1000 - T0);
    expect(times).toEqual([0, 30_000, 150_000, 450_000, 1_050_000]);
    expect(await w.log.get(webhook.webhookId, event.id)).toMatchObject({
      status: "delivered",
      attempts: 5,
      lastStatusCode: 204,
    });
  });

  it("notes a retry in the log with why the attempt failed and when the next is due", async () => {
    const w = deliveryWorld();
    const { webhook } = await w.add("proj");
    w.script.push({ status: 500 });
    const event = granted();
    w.publish(event);
    // Fan-out, then the first attempt; the retry stays on the queue.
    await w.deliveries.handler({
      Records: [
        { messageId: "a", body: w.queued.shift()?.body ?? "", attributes: { ApproximateReceiveCount: "1" } },
      ],
    });
    await w.deliveries.handler({
      Records: [
        { messageId: "b", body: w.queued.shift()?.body ?? "", attributes: { ApproximateReceiveCount: "1" } },
      ],
    });
    expect(await w.log.get(webhook.webhookId, event.id)).toMatchObject({
      status: "retrying",
      attempts: 1,
      lastStatusCode: 500,
      lastError: "answered 500",
      nextRetryAt: T0 + 30_000,
    });
    expect(w.queued).toEqual([{ body: expect.any(String), delayMs: 30_000 }]);
  });

  it("a delivery that fails every retry of the schedule is dead; a resend delivers it with its id", async () => {
    const w = deliveryWorld();
    const { webhook, secret } = await w.add("proj");
    for (let i = 0; i <= RETRY_DELAYS_MS.length; i++) w.script.push({ status: 502 });
    const event = granted();
    w.publish(event);
    await w.drain();
    // Every retry was made, those waiting longer than the queue's 15 minutes too (carried in the message).
    expect(w.posted).toHaveLength(RETRY_DELAYS_MS.length + 1);
    expect(await w.log.get(webhook.webhookId, event.id)).toMatchObject({
      status: "dead",
      attempts: RETRY_DELAYS_MS.length + 1,
      lastError: "answered 502",
    });
    expect(w.warnings).toContainEqual(
      expect.objectContaining({
        metric: "events.webhook_dead",
        eventId: event.id,
        webhookId: webhook.webhookId,
      }),
    );
    const resent = await w.deliveries.resend("proj", webhook.webhookId, event.id);
    expect(resent).toMatchObject({ status: "delivered", attempts: RETRY_DELAYS_MS.length + 2 });
    const last = w.posted.at(-1) as Posted;
    expect(last.headers["webhook-id"]).toBe(event.id);
    expect(verify(secret, last)).toEqual(event);
  });

  it.each<[string, SendResult, string]>([
    ["a 4xx", { status: 410 }, "answered 410"],
    ["a redirect", { status: 302 }, "answered 302 (redirects are not followed)"],
    [
      "an address that is not allowed",
      { error: "refused_address", detail: "10.0.0.1" },
      "refused_address: 10.0.0.1",
    ],
  ])("dead at once on %s, never retried", async (_label, answer, error) => {
    const w = deliveryWorld();
    const { webhook } = await w.add("proj");
    w.script.push(answer);
    const event = granted();
    w.publish(event);
    await w.drain();
    expect(w.posted).toHaveLength(1);
    expect(await w.log.get(webhook.webhookId, event.id)).toMatchObject({
      status: "dead",
      attempts: 1,
      lastError: error,
    });
  });

  it("makes no second attempt for a message seen before (a journal replayed, SQS delivering twice)", async () => {
    const w = deliveryWorld();
    await w.add("proj");
    w.publish(granted());
    await w.deliveries.handler({
      Records: [
        { messageId: "f", body: w.queued.shift()?.body ?? "", attributes: { ApproximateReceiveCount: "1" } },
      ],
    });
    const attempt = w.queued.shift()?.body ?? "";
    const twice = {
      Records: [{ messageId: "x", body: attempt, attributes: { ApproximateReceiveCount: "1" } }],
    };
    await w.deliveries.handler(twice);
    await w.deliveries.handler(twice);
    expect(w.posted).toHaveLength(1);
  });

  it("delivers nothing to a webhook deleted meanwhile", async () => {
    const w = deliveryWorld();
    const { webhook } = await w.add("proj");
    w.publish(granted());
    await w.deliveries.handler({
      Records: [
        { messageId: "f", body: w.queued.shift()?.body ?? "", attributes: { ApproximateReceiveCount: "1" } },
      ],
    });
    await w.webhooks.delete("proj", webhook.webhookId);
    await w.drain();
    expect(w.posted).toEqual([]);
  });

  it("fails only the message that failed, for the queue to bring back; the batch's others go through", async () => {
    const w = deliveryWorld();
    await w.add("proj");
    const result = await w.deliveries.handler({
      Records: [
        { messageId: "bad", body: '{"kind":"something else"}', attributes: { ApproximateReceiveCount: "1" } },
        { messageId: "good", body: eventMessage(granted()), attributes: { ApproximateReceiveCount: "1" } },
      ],
    });
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: "bad" }] });
    await w.drain();
    expect(w.posted).toHaveLength(1);
  });

  it("sends a test event to one webhook now, and answers 404 for a webhook it does not know", async () => {
    const w = deliveryWorld();
    const { webhook, secret } = await w.add("proj");
    await w.add("proj");
    const tested = await w.deliveries.test("proj", webhook.webhookId);
    expect(tested).toMatchObject({ status: "delivered", attempts: 1, eventType: "webhook.test" });
    expect(w.posted).toHaveLength(1);
    expect(verify(secret, w.posted[0] as Posted)).toMatchObject({
      type: "webhook.test",
      subject: webhook.webhookId,
    });
    await expect(w.deliveries.test("proj", "wh_0000000000000000")).rejects.toMatchObject({ status: 404 });
    await expect(w.deliveries.resend("proj", webhook.webhookId, "evt_unknown")).rejects.toMatchObject({
      status: 404,
    });
  });
});
