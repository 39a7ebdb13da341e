/**
 * Billing exports: each managed call's billed amount (or its tokens) sent to the billing system a
 * project is connected to, as a Stripe meter event or as a CloudEvent to an OpenMeter-compatible
 * endpoint. The transaction id is the event's identifier in both, so a retry or a resend never bills
 * twice. Nothing here carries a Stripe key or an endpoint token: those are the deployment's secrets,
 * read by the senders only (docs/billing-exports.md).
 */
import * as z from "zod/mini";
import type { CloudEventCore } from "./cloudevent";
import { httpUrl, text } from "./config";
import { errors } from "./errors";
import type { InteractionRecord } from "./record";

export const METER_TARGETS = ["stripe", "openmeter"] as const;
export type MeterTarget = (typeof METER_TARGETS)[number];

/** What a meter event counts: the billed amount in micro-USD, or the call's tokens (input + output). */
export const METER_VALUES = ["cost", "tokens"] as const;
export type MeterValue = (typeof METER_VALUES)[number];

/** A project's connection to one billing system. */
export interface MeterConnection {
  projectId: string;
  target: MeterTarget;
  /** Stripe: the meter's `event_name`; OpenMeter: the CloudEvent `type` its meters select. */
  meter: string;
  value: MeterValue;
  /** Per end user: the customer mapped to the call's `user_id`; otherwise the project's customer. */
  perUser: boolean;
  /** Stripe: the project's customer (`cus_...`), for calls without a mapped end user. */
  customer?: string;
  createdAt: number;
}

export type MeterEventState = "waiting" | "sent" | "failed";

/**
 * One call's meter event as the status store keeps it: what to send, not to whom (the customer is
 * looked up when it is sent, so a resend after `map-user` goes to the customer mapped since).
 */
export interface MeterEvent {
  projectId: string;
  target: MeterTarget;
  transactionId: string;
  /** When the call ended (epoch ms): the meter event's timestamp. */
  endedAt: number;
  userId: string | null;
  /** Whole micro-USD, or tokens: a whole number either way, as Stripe's meters sum. */
  value: number;
  /** The usage with the OpenTelemetry GenAI names, and our cost: the CloudEvent's `data`. */
  usage: Record<string, string | number | null>;
}

export interface MeterEventStatus extends MeterEvent {
  state: MeterEventState;
  attempts: number;
  /** The billing system's message for a refused event (never a key). */
  lastError?: string;
  lastAttemptAt?: number;
  createdAt: number;
}

/** The counts `dmt billing status` shows, per target. */
export type MeterCounts = Record<MeterEventState, number>;

/** Connections, end-user mappings and each event's state. DynamoDB: one `billingMeter` table. */
export interface MeterStore {
  connect(connection: MeterConnection): Promise<void>;
  /** False when there was none. */
  disconnect(projectId: string, target: MeterTarget): Promise<boolean>;
  connections(projectId: string): Promise<MeterConnection[]>;
  mapUser(projectId: string, userId: string, customer: string): Promise<void>;
  /** False when the user had no mapping. */
  unmapUser(projectId: string, userId: string): Promise<boolean>;
  customerOf(projectId: string, userId: string): Promise<string | undefined>;
  /** Notes events as waiting; an event already noted (sent, failed or waiting) is left as it is. */
  noteWaiting(events: MeterEvent[], at: number): Promise<void>;
  /** The events' current entries, by transaction id. */
  get(
    projectId: string,
    target: MeterTarget,
    transactionIds: string[],
  ): Promise<Map<string, MeterEventStatus>>;
  /** Replaces entries' state fields (a batch of writes, not one transaction). */
  update(statuses: MeterEventStatus[]): Promise<void>;
  counts(projectId: string, target: MeterTarget): Promise<MeterCounts>;
  /** Entries in one state, oldest call first. */
  list(
    projectId: string,
    target: MeterTarget,
    state: MeterEventState,
    limit: number,
  ): Promise<MeterEventStatus[]>;
}

/** A batch of one project's events for one target, as the meter queue carries it. */
export interface MeterMessage {
  projectId: string;
  target: MeterTarget;
  events: MeterEvent[];
}

/** Events per queue message: 100 events of ~600 bytes stay far under SQS's 256 KiB. */
export const EVENTS_PER_MESSAGE = 100;

/** What a billing system answered for one event. */
export type SendOutcome =
  | { ok: true }
  /** Refused for good (unknown customer, too old): kept as failed with the message, resendable. */
  | { ok: false; permanent: true; message: string }
  /** Worth another try (rate limit, 5xx, network): the message comes back from the queue. */
  | { ok: false; permanent: false; message: string };

/** Sends events to one billing system; the deployment's key stays inside. */
export interface MeterSender {
  readonly target: MeterTarget;
  /** One outcome per event, in order. `customer` is undefined when no customer applies (OpenMeter). */
  send(batch: { connection: MeterConnection; event: MeterEvent; subject: string }[]): Promise<SendOutcome[]>;
}

/** Where meter messages wait: SQS with a dead-letter queue in AWS, the in-process queue locally. */
export interface MeterQueue {
  send(bodies: string[]): Promise<void>;
}

/** Stripe keeps a meter event's timestamp within the past 35 days. */
export const STRIPE_MAX_AGE_MS = 35 * 24 * 3600 * 1000;

const METER_NAME = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$/;
const CUSTOMER_ID = /^cus_[A-Za-z0-9]{1,64}$/;

export function parseMeterName(value: string): string {
  if (!METER_NAME.test(value)) {
    throw errors.invalidField("meter", "letters, digits, '_', '.', ':' or '-', at most 100");
  }
  return value;
}

export function parseCustomerId(value: string, field = "customer"): string {
  if (!CUSTOMER_ID.test(value)) throw errors.invalidField(field, "a Stripe customer id: cus_...");
  return value;
}

export function parseMeterValue(value: string): MeterValue {
  const found = METER_VALUES.find((v) => v === value);
  if (!found) throw errors.invalidField("value", `one of ${METER_VALUES.join(", ")}`);
  return found;
}

export function parseMeterTarget(value: string): MeterTarget {
  const found = METER_TARGETS.find((v) => v === value);
  if (!found) throw errors.invalidField("target", `one of ${METER_TARGETS.join(", ")}`);
  return found;
}

/** The call's usage under the OpenTelemetry GenAI attribute names; our cost under ours. */
export function genAiUsage(record: InteractionRecord): Record<string, string | number | null> {
  return {
    "gen_ai.provider.name": record.vendor,
    "gen_ai.request.model": record.model,
    "gen_ai.usage.input_tokens": record.input_tokens,
    "gen_ai.usage.output_tokens": record.output_tokens,
    "gen_ai.usage.cache_read.input_tokens": record.cached_input_tokens,
    "gen_ai.usage.cache_creation.input_tokens": record.cache_write_tokens,
    "dmt.cost_micros": record.cost_micros,
    "dmt.cost_usd": record.cost_micros === null ? null : microsToUsd(record.cost_micros),
    "dmt.endpoint": record.endpoint,
    "dmt.user_id": record.user_id,
  };
}

const microsToUsd = (micros: number) =>
  `${micros < 0 ? "-" : ""}${Math.floor(Math.abs(micros) / 1e6)}.${String(Math.abs(micros) % 1e6).padStart(6, "0")}`;

/**
 * The meter event of a written record, or undefined when the call bills nothing: only managed calls
 * (BYOK and dual calls are paid to the vendor by the customer) with a value above zero.
 */
export function meterEventOf(record: InteractionRecord, connection: MeterConnection): MeterEvent | undefined {
  if (record.billing_mode !== "managed") return undefined;
  const value =
    connection.value === "cost" ? (record.cost_micros ?? 0) : record.input_tokens + record.output_tokens;
  if (!(value > 0)) return undefined;
  return {
    projectId: record.project_id,
    target: connection.target,
    transactionId: record.transaction_id,
    endedAt: record.started_at + record.latency_ms,
    userId: record.user_id,
    value: Math.round(value),
    usage: genAiUsage(record),
  };
}

/** The CloudEvent of one call, for an OpenMeter-compatible endpoint. */
export interface UsageCloudEvent extends CloudEventCore {
  time: string;
  subject: string;
  datacontenttype: "application/json";
  data: Record<string, string | number | null>;
}

/**
 * `id` the transaction id (OpenMeter deduplicates by `id` and `source`), `source` the deployment,
 * `subject` the project or, per end user, the call's user, `data` the usage and the metered value.
 */
export function usageCloudEvent(
  event: MeterEvent,
  connection: MeterConnection,
  source: string,
  subject: string,
): UsageCloudEvent {
  return {
    specversion: "1.0",
    id: event.transactionId,
    source,
    type: connection.meter,
    time: new Date(event.endedAt).toISOString(),
    subject,
    datacontenttype: "application/json",
    data: { ...event.usage, "dmt.project_id": event.projectId, "dmt.value": event.value },
  };
}

/** The OpenMeter subject of an event: the end user where the connection is per user and one is named. */
export function openMeterSubject(event: MeterEvent, connection: MeterConnection): string {
  return connection.perUser && event.userId !== null ? event.userId : event.projectId;
}

/**
 * The billing exports' settings, the same variables on both hosts (the local host's config spreads
 * them in). The Stripe key and the endpoint token are the deployment's: in AWS read from Secrets
 * Manager at a cold start, locally from the environment; neither is stored, logged or put in an event.
 */
export const METER_ENV = {
  DMT_STRIPE_SECRET_KEY: z.optional(text),
  /** Another Stripe API address (a local stand-in); default Stripe's. */
  DMT_STRIPE_API_URL: z.optional(httpUrl),
  /** An OpenMeter-compatible endpoint's base address (`<url>/api/v1/events`). */
  DMT_OPENMETER_URL: z.optional(httpUrl),
  DMT_OPENMETER_TOKEN: z.optional(text),
  /** The CloudEvents `source` of this deployment's usage events. */
  DMT_METER_SOURCE: z._default(text, "dmt"),
};
export type MeterConfig = z.infer<z.ZodMiniObject<typeof METER_ENV>>;

/** The billing exports' part of a parsed configuration. */
export function meterConfigOf(config: MeterConfig): MeterConfig {
  const {
    DMT_STRIPE_SECRET_KEY,
    DMT_STRIPE_API_URL,
    DMT_OPENMETER_URL,
    DMT_OPENMETER_TOKEN,
    DMT_METER_SOURCE,
  } = config;
  return {
    DMT_METER_SOURCE,
    ...(DMT_STRIPE_SECRET_KEY !== undefined && { DMT_STRIPE_SECRET_KEY }),
    ...(DMT_STRIPE_API_URL !== undefined && { DMT_STRIPE_API_URL }),
    ...(DMT_OPENMETER_URL !== undefined && { DMT_OPENMETER_URL }),
    ...(DMT_OPENMETER_TOKEN !== undefined && { DMT_OPENMETER_TOKEN }),
  };
}
