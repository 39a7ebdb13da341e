import { object, text } from "./form";
import { nowSeconds, requiredParam, type StripeRouter, type StripeStandIn, stripeError } from "./server";

/** A meter event as the stand-in keeps it (API reference: "The Meter Event object"). */
export interface StandInMeterEvent {
  object: "billing.meter_event";
  created: number;
  event_name: string;
  identifier: string;
  livemode: false;
  payload: Record<string, string>;
  timestamp: number;
}

/** Stripe takes a timestamp within the past 35 calendar days or up to 5 minutes ahead. */
const MAX_AGE_S = 35 * 24 * 3600;
const MAX_AHEAD_S = 5 * 60;

const kept = new WeakMap<StripeStandIn, StandInMeterEvent[]>();
const arrivals = new WeakMap<StripeStandIn, Map<string, number>>();

/** When (epoch ms) the stand-in took each event, by identifier: a benchmark's lag is measured to it. */
export function meterEventArrivals(standIn: StripeStandIn): Map<string, number> {
  let map = arrivals.get(standIn);
  if (!map) {
    map = new Map();
    arrivals.set(standIn, map);
  }
  return map;
}

/** Every meter event the stand-in accepted, oldest first. */
export function meterEventsOf(standIn: StripeStandIn): StandInMeterEvent[] {
  let list = kept.get(standIn);
  if (!list) {
    list = [];
    kept.set(standIn, list);
  }
  return list;
}

/**
 * `POST /v1/billing/meter_events` (API reference: "Create a billing meter event"): `event_name` and
 * `payload` required, the payload's `stripe_customer_id` an existing customer and its `value` a number;
 * `identifier` unique (Stripe enforces it over at least 24 hours; the stand-in for its lifetime), and
 * `timestamp` within the past 35 days or 5 minutes ahead. Errors in Stripe's error shape.
 */
export function meterEventRoutes(router: StripeRouter, standIn: StripeStandIn): void {
  const events = meterEventsOf(standIn);
  const identifiers = new Set<string>();
  router.add("POST", "/v1/billing/meter_events", ({ form }) => {
    const eventName = text(form, "event_name");
    if (eventName === undefined) return requiredParam("event_name");
    const payload = object(form, "payload");
    const customer = text(payload, "stripe_customer_id");
    if (customer === undefined) return requiredParam("payload[stripe_customer_id]");
    const value = text(payload, "value");
    if (value === undefined) return requiredParam("payload[value]");
    if (!/^-?\d+(\.\d+)?$/.test(value)) {
      return stripeError(400, "invalid_request_error", `Invalid value for payload[value]: '${value}'.`, {
        code: "parameter_invalid_string",
        param: "payload[value]",
      });
    }
    if (standIn.objects.get(customer)?.object !== "customer") {
      return stripeError(400, "invalid_request_error", `No such customer: '${customer}'`, {
        code: "resource_missing",
        param: "payload[stripe_customer_id]",
      });
    }
    const now = nowSeconds();
    const rawTimestamp = text(form, "timestamp");
    const timestamp = rawTimestamp === undefined ? now : Number(rawTimestamp);
    if (!Number.isInteger(timestamp)) {
      return stripeError(400, "invalid_request_error", "Invalid integer: timestamp", {
        code: "parameter_invalid_integer",
        param: "timestamp",
      });
    }
    if (timestamp < now - MAX_AGE_S || timestamp > now + MAX_AHEAD_S) {
      return stripeError(
        400,
        "invalid_request_error",
        "Timestamp must be within the past 35 calendar days or up to 5 minutes in the future.",
        { code: timestamp < now ? "timestamp_too_far_in_past" : "timestamp_in_future", param: "timestamp" },
      );
    }
    const identifier = text(form, "identifier") ?? standIn.newId("mtr_evt");
    if (identifiers.has(identifier)) {
      return stripeError(
        400,
        "invalid_request_error",
        `An event with identifier '${identifier}' already exists.`,
        { code: "resource_already_exists", param: "identifier" },
      );
    }
    identifiers.add(identifier);
    const event: StandInMeterEvent = {
      object: "billing.meter_event",
      created: now,
      event_name: eventName,
      identifier,
      livemode: false,
      payload: Object.fromEntries(Object.entries(payload).map(([k, v]) => [k, String(v)])),
      timestamp,
    };
    events.push(event);
    meterEventArrivals(standIn).set(identifier, Date.now());
    return { status: 200, body: event };
  });
}
