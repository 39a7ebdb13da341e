import type { CloudEvent, EventType } from "./cloudevent";

/** A project's webhook as listed: never its secret. */
export interface WebhookView {
  projectId: string;
  webhookId: string;
  url: string;
  events: EventType[];
  createdAt: number;
}

/** The webhook port. The secret is stored encrypted and revealed only to the delivery code. */
export interface WebhookStore {
  add(webhook: WebhookView, secret: string): Promise<void>;
  list(projectId: string): Promise<WebhookView[]>;
  get(projectId: string, webhookId: string): Promise<WebhookView | undefined>;
  /** False when there was no such webhook. */
  delete(projectId: string, webhookId: string): Promise<boolean>;
  /** The `whsec_` secret, for signing. */
  secret(projectId: string, webhookId: string): Promise<string | undefined>;
}

export type DeliveryStatus = "pending" | "retrying" | "delivered" | "dead";

/** One event on its way to one webhook: the delivery log's entry, updated at each attempt. */
export interface Delivery {
  projectId: string;
  webhookId: string;
  eventId: string;
  eventType: EventType;
  status: DeliveryStatus;
  attempts: number;
  /** The receiver's status of the last attempt; absent when it gave none (timeout, refused connection). */
  lastStatusCode?: number;
  /** Why the last attempt failed, in a few words (never the receiver's body). */
  lastError?: string;
  lastAttemptAt?: number;
  nextRetryAt?: number;
  createdAt: number;
  /** The event as sent, for a resend. */
  event: CloudEvent;
}

/** The delivery log: what the dashboard shows and what a resend starts from. */
export interface DeliveryLog {
  /** Notes a delivery about to start; keeps an entry that exists (a fan-out run twice). */
  begin(delivery: Delivery): Promise<void>;
  /** Replaces the entry's attempt fields. */
  update(delivery: Delivery): Promise<void>;
  get(webhookId: string, eventId: string): Promise<Delivery | undefined>;
  /** Newest first. */
  list(webhookId: string, limit: number): Promise<Delivery[]>;
}

/** The delivery queue: SQS in AWS, the in-process queue with its journal locally. */
export interface DeliveryQueue {
  /** `delayMs` up to 15 minutes is honoured by the queue; longer waits are carried in the message. */
  send(body: string, delayMs: number): Promise<void>;
}

/** What a receiver answered, or why there was no answer. */
export type SendResult =
  | { status: number }
  | { error: "timeout" | "network" | "refused_address"; detail: string };

/** Posts one signed webhook request. */
export interface WebhookSender {
  post(url: string, headers: Record<string, string>, body: string): Promise<SendResult>;
}
