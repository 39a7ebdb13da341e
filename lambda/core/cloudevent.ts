import { randomBytes } from "node:crypto";
import { errors } from "./errors";

/**
 * The events the service emits, as CloudEvents 1.0 in their JSON format, so OpenMeter and other
 * CloudEvents consumers take them as they are. An event says what happened to a project and never
 * carries a service key, a vendor key, a webhook secret or a request or response body.
 */

export const EVENT_TYPES = [
  "balance.low",
  "budget.threshold",
  "budget.exceeded",
  "credits.granted",
  "credits.debited",
  "credits.recharge_failed",
  "key.created",
  "key.revoked",
  "deletion.completed",
  "usage.recorded",
  "webhook.test",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * What a webhook gets when it names no types: everything but `usage.recorded` (one event per proxied
 * call, asked for by name) and `webhook.test` (sent to the one webhook being tested).
 */
export const DEFAULT_EVENT_TYPES: readonly EventType[] = EVENT_TYPES.filter(
  (type) => type !== "usage.recorded" && type !== "webhook.test",
);

/** The types a person may subscribe a webhook to. */
export const SUBSCRIBABLE_TYPES: readonly EventType[] = EVENT_TYPES.filter((type) => type !== "webhook.test");

/**
 * The context attributes CloudEvents 1.0 requires of every event (`specversion`, `id`, `source`, `type`)
 * and the optional ones we set: our events below and the usage events sent to a metering endpoint
 * (core/billing-meter.ts) share them.
 */
export interface CloudEventCore {
  specversion: "1.0";
  id: string;
  source: string;
  type: string;
  time?: string;
  subject?: string;
  datacontenttype?: string;
}

export interface CloudEvent<T = Record<string, unknown>> extends CloudEventCore {
  specversion: "1.0";
  /** One of EVENT_TYPES. */
  type: EventType;
  /** `/projects/<project id>`: the project the event belongs to. */
  source: string;
  /** Unique per source; a webhook's `webhook-id`, the same on every retry and resend. */
  id: string;
  /** RFC 3339. */
  time: string;
  /** What the event is about within the project: a key id, a transaction id, a deletion request id. */
  subject?: string;
  datacontenttype: "application/json";
  /** Extension attribute: the project id, so consumers filter without parsing `source`. */
  projectid: string;
  data: T;
}

export interface NewEvent {
  type: EventType;
  projectId: string;
  subject?: string;
  data: Record<string, unknown>;
}

/**
 * An event id: `evt_` + the time in ms (base 36, fixed width) + 64 random bits, so ids sort by time
 * (the delivery log lists newest first by them) and never collide.
 */
export function eventId(at: number): string {
  return `evt_${at.toString(36).padStart(9, "0")}${randomHex8()}`;
}

/** Random bytes drawn 4 KB at a time: a `randomBytes` call per event cost more than building the rest. */
let pool = Buffer.alloc(0);
let used = 0;
function randomHex8(): string {
  if (used + 8 > pool.length) {
    pool = randomBytes(4096);
    used = 0;
  }
  used += 8;
  return pool.toString("hex", used - 8, used);
}

export function buildEvent(input: NewEvent, at: number): CloudEvent {
  return {
    specversion: "1.0",
    type: input.type,
    source: `/projects/${input.projectId}`,
    id: eventId(at),
    time: new Date(at).toISOString(),
    ...(input.subject !== undefined ? { subject: input.subject } : {}),
    datacontenttype: "application/json",
    projectid: input.projectId,
    data: input.data,
  };
}

/** A comma-separated or listed set of event types; an unknown one is a 400 naming it. */
export function parseEventTypes(value: string | readonly string[], field = "events"): EventType[] {
  const list = (typeof value === "string" ? value.split(",") : [...value]).map((t) => t.trim());
  if (list.length === 0 || list.every((t) => t === ""))
    throw errors.invalidField(field, "must name at least one event type");
  const types: EventType[] = [];
  for (const name of list) {
    const type = SUBSCRIBABLE_TYPES.find((t) => t === name);
    if (!type) {
      throw errors.invalidField(
        field,
        `unknown event type '${name.slice(0, 64)}'; known: ${SUBSCRIBABLE_TYPES.join(", ")}`,
      );
    }
    if (!types.includes(type)) types.push(type);
  }
  return types;
}

/** Reads an event back from a queue message or a log; throws when it is not one of ours. */
export function parseEvent(value: unknown): CloudEvent {
  const event = value as Partial<CloudEvent> | null;
  if (
    event?.specversion !== "1.0" ||
    typeof event.id !== "string" ||
    typeof event.projectid !== "string" ||
    !EVENT_TYPES.includes(event.type as EventType)
  ) {
    throw new Error("not a dmt CloudEvent");
  }
  return event as CloudEvent;
}

/** Where events go: the EventBridge bus and the delivery queue in AWS, the in-process queue locally. */
export interface EventPublisher {
  /** Resolves once the event is handed over for good (on the bus, in the journal); rejects otherwise. */
  publish(event: NewEvent): Promise<CloudEvent>;
}
