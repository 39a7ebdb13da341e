import { Webhook } from "standardwebhooks";
import { buildEvent, type CloudEvent, parseEvent } from "../core/cloudevent";
import { errors } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";
import type { BatchHandler, QueueMessage } from "../core/queue";
import type {
  Delivery,
  DeliveryLog,
  DeliveryQueue,
  SendResult,
  WebhookSender,
  WebhookStore,
  WebhookView,
} from "../core/webhook-delivery";

/**
 * Webhook delivery, at least once, over a queue (SQS in AWS, the in-process queue and its journal
 * locally). The queue carries two kinds of message:
 * - an event (or EventBridge's envelope of one): fanned out to one delivery message per webhook of its
 *   project that wants its type, each noted in the delivery log;
 * - a delivery: one signed POST to one webhook. A 2xx delivers it. A timeout, a refused connection,
 *   5xx, 408 or 429 is retried after the next delay of the schedule; when the schedule is used up, or
 *   on any other answer, the delivery is dead: the log keeps it with its event, for a resend.
 * Every attempt of one event to one webhook carries the same `webhook-id` (the event id), so receivers
 * deduplicate; the signature and `webhook-timestamp` are fresh each time.
 */

/** The default waits before each retry: the first within a minute, the last ends past an hour (67.5 min). */
export const RETRY_DELAYS_MS: readonly number[] = [30_000, 120_000, 300_000, 600_000, 1_200_000, 1_800_000];

/** SQS delays a message 15 minutes at most; a longer wait is carried in the message (`notBefore`). */
const MAX_QUEUE_DELAY_MS = 15 * 60_000;

export interface DeliveryDeps {
  webhooks: WebhookStore;
  log: DeliveryLog;
  queue: DeliveryQueue;
  sender: WebhookSender;
  logger: Logger;
  clock: () => number;
  /** Waits before retries 1, 2, ...; tests use short ones. */
  retryDelaysMs?: readonly number[];
}

interface DeliveryMessage {
  kind: "delivery";
  projectId: string;
  webhookId: string;
  /** 1 for the first try. */
  attempt: number;
  /** Epoch ms before which the POST is not made. */
  notBefore: number;
  event: CloudEvent;
}

type Message = { kind: "event"; event: CloudEvent } | DeliveryMessage;

export interface Deliveries {
  /** The queue consumer: partial batch failures, as SQS's event source mapping expects. */
  handler: BatchHandler;
  /** One attempt now, outside the schedule (a resend or a test); the log records it. */
  deliverNow(projectId: string, webhookId: string, event: CloudEvent): Promise<Delivery>;
  /** Sends a dead (or any logged) delivery again, now, with its original event and id. */
  resend(projectId: string, webhookId: string, eventId: string): Promise<Delivery>;
  /** Sends a `webhook.test` event to one webhook now. */
  test(projectId: string, webhookId: string): Promise<Delivery>;
}

/** What goes on the delivery queue for an event: the local publisher's message. */
export function eventMessage(event: CloudEvent): string {
  return JSON.stringify({ kind: "event", event });
}

export function createDeliveries(deps: DeliveryDeps): Deliveries {
  const delays = deps.retryDelaysMs ?? RETRY_DELAYS_MS;

  /** A batch's events of one project share one listing of its webhooks: a read per project, not per event. */
  type Listings = Map<string, Promise<WebhookView[]>>;

  async function fanOut(event: CloudEvent, listings: Listings): Promise<void> {
    let listing = listings.get(event.projectid);
    if (!listing) {
      listing = deps.webhooks.list(event.projectid);
      listings.set(event.projectid, listing);
    }
    const targets = (await listing).filter((w) => w.events.includes(event.type));
    const now = deps.clock();
    await Promise.all(
      targets.map(async (webhook) => {
        await deps.log.begin(fresh(webhook, event, now));
        const message: DeliveryMessage = {
          kind: "delivery",
          projectId: webhook.projectId,
          webhookId: webhook.webhookId,
          attempt: 1,
          notBefore: 0,
          event,
        };
        await deps.queue.send(JSON.stringify(message), 0);
      }),
    );
  }

  /** One POST and its consequence; `retry` false for attempts outside the schedule. */
  async function attempt(
    message: DeliveryMessage,
    retry: boolean,
    logged: Delivery | undefined,
  ): Promise<Delivery | undefined> {
    const { projectId, webhookId, event } = message;
    const webhook = await deps.webhooks.get(projectId, webhookId);
    const secret = webhook && (await deps.webhooks.secret(projectId, webhookId));
    if (!webhook || !secret) return undefined; // deleted since: nothing to deliver to
    const result = await signedPost(deps.sender, webhook.url, secret, event, deps.clock());
    const now = deps.clock();
    const delivery = logged ?? fresh(webhook, event, now);
    delivery.attempts++;
    delivery.lastAttemptAt = now;
    delete delivery.nextRetryAt;
    if ("status" in result) delivery.lastStatusCode = result.status;
    else delete delivery.lastStatusCode;
    const verdict = judge(result);
    if (verdict === "delivered") {
      delivery.status = "delivered";
      delete delivery.lastError;
    } else {
      delivery.lastError = verdict.error;
      const delay = delays[message.attempt - 1];
      if (retry && verdict.retry && delay !== undefined) {
        delivery.status = "retrying";
        delivery.nextRetryAt = now + delay;
      } else {
        delivery.status = "dead";
        deps.logger.warn("webhook delivery dead-lettered", {
          metric: "events.webhook_dead",
          projectId,
          webhookId,
          eventId: event.id,
          attempts: delivery.attempts,
          error: verdict.error,
        });
      }
    }
    await deps.log.update(delivery);
    if (delivery.status === "retrying" && delivery.nextRetryAt !== undefined) {
      const next: DeliveryMessage = {
        ...message,
        attempt: message.attempt + 1,
        notBefore: delivery.nextRetryAt,
      };
      await deps.queue.send(JSON.stringify(next), Math.min(delivery.nextRetryAt - now, MAX_QUEUE_DELAY_MS));
    }
    return delivery;
  }

  async function handle(record: QueueMessage, listings: Listings): Promise<void> {
    const message = parseMessage(record.body);
    if (message.kind === "event") return fanOut(message.event, listings);
    const wait = message.notBefore - deps.clock();
    // Early: a wait longer than the queue's delay, or a journal replayed at a restart.
    if (wait > 0) return deps.queue.send(record.body, Math.min(wait, MAX_QUEUE_DELAY_MS));
    // A message seen before (a journal replayed at a restart, SQS delivering twice): its attempt was made.
    const logged = await deps.log.get(message.webhookId, message.event.id);
    if (
      logged &&
      (logged.status === "delivered" || logged.status === "dead" || logged.attempts >= message.attempt)
    ) {
      return;
    }
    await attempt(message, true, logged);
  }

  async function now(projectId: string, webhookId: string, event: CloudEvent): Promise<Delivery> {
    const delivered = await attempt(
      { kind: "delivery", projectId, webhookId, attempt: 1, notBefore: 0, event },
      false,
      await deps.log.get(webhookId, event.id),
    );
    if (!delivered) throw errors.notFound(`No webhook '${webhookId}' in project '${projectId}'.`);
    return delivered;
  }

  return {
    async handler(batch) {
      const failures: { itemIdentifier: string }[] = [];
      const listings: Listings = new Map();
      await Promise.all(
        batch.Records.map(async (record) => {
          try {
            await handle(record, listings);
          } catch (err) {
            deps.logger.warn("event delivery message failed; the queue retries it", {
              ...errorFields(err),
              messageId: record.messageId,
            });
            failures.push({ itemIdentifier: record.messageId });
          }
        }),
      );
      return { batchItemFailures: failures };
    },
    deliverNow: now,
    async resend(projectId, webhookId, eventId) {
      const logged = await deps.log.get(webhookId, eventId);
      if (!logged || logged.projectId !== projectId) {
        throw errors.notFound(`No delivery of event '${eventId}' to webhook '${webhookId}'.`);
      }
      return now(projectId, webhookId, logged.event);
    },
    async test(projectId, webhookId) {
      const webhook = await deps.webhooks.get(projectId, webhookId);
      if (!webhook) throw errors.notFound(`No webhook '${webhookId}' in project '${projectId}'.`);
      const event = buildEvent(
        { type: "webhook.test", projectId, subject: webhookId, data: { webhook_id: webhookId } },
        deps.clock(),
      );
      await deps.log.begin(fresh(webhook, event, deps.clock()));
      return now(projectId, webhookId, event);
    },
  };
}

function fresh(webhook: WebhookView, event: CloudEvent, now: number): Delivery {
  return {
    projectId: webhook.projectId,
    webhookId: webhook.webhookId,
    eventId: event.id,
    eventType: event.type,
    status: "pending",
    attempts: 0,
    createdAt: now,
    event,
  };
}

function parseMessage(body: string): Message {
  const value = JSON.parse(body) as Record<string, unknown>;
  // An EventBridge rule's target gets the bus's envelope; the CloudEvent is its detail.
  if (value["detail-type"] !== undefined) return { kind: "event", event: parseEvent(value.detail) };
  if (value.kind === "event") return { kind: "event", event: parseEvent(value.event) };
  if (
    value.kind === "delivery" &&
    typeof value.webhookId === "string" &&
    typeof value.projectId === "string"
  ) {
    return { ...(value as unknown as DeliveryMessage), event: parseEvent(value.event) };
  }
  throw new Error("not an event delivery message");
}

/** Signs per Standard Webhooks and posts; the body is exactly the bytes signed. */
export async function signedPost(
  sender: WebhookSender,
  url: string,
  secret: string,
  event: CloudEvent,
  now: number,
): Promise<SendResult> {
  const body = JSON.stringify(event);
  const timestamp = new Date(now);
  const headers = {
    "content-type": "application/cloudevents+json",
    "user-agent": "dmt-webhooks/1",
    "webhook-id": event.id,
    "webhook-timestamp": String(Math.floor(now / 1000)),
    "webhook-signature": new Webhook(secret).sign(event.id, timestamp, body),
  };
  return sender.post(url, headers, body);
}

/** Delivered, or failed and whether a later try may succeed. */
function judge(result: SendResult): "delivered" | { retry: boolean; error: string } {
  if ("error" in result) {
    return { retry: result.error !== "refused_address", error: `${result.error}: ${result.detail}` };
  }
  const { status } = result;
  if (status >= 200 && status < 300) return "delivered";
  if (status >= 500 || status === 408 || status === 429) return { retry: true, error: `answered ${status}` };
  if (status >= 300 && status < 400)
    return { retry: false, error: `answered ${status} (redirects are not followed)` };
  return { retry: false, error: `answered ${status}` };
}
