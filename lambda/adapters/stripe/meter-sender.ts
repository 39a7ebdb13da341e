import Stripe from "stripe";
import type { MeterSender, SendOutcome } from "../../core/billing-meter";

export interface StripeMeterOptions {
  /** The deployment's secret key (`sk_...` or a restricted `rk_...`): never logged, stored or returned. */
  secretKey: string;
  /** Another API address (a local stand-in): `http://127.0.0.1:12111`. Default: Stripe's. */
  apiUrl?: string;
  /** Events in flight at once; Stripe's live mode takes 1,000 meter events a second. */
  concurrency?: number;
  timeoutMs?: number;
}

/** Anything shaped like a Stripe key is cut from a message before it is kept or logged. */
export const redactKeys = (text: string) =>
  text.replace(/\b(sk|rk|pk)_(live|test)_[A-Za-z0-9*]+/g, "$1_$2_***");

/**
 * Sends each event as a v1 meter event (`POST /v1/billing/meter_events`) with the official SDK: the
 * transaction id is its `identifier` (Stripe refuses a second event with it for at least 24 hours), the
 * call's end its `timestamp`, the customer and the whole-number value its payload under the meter's
 * default keys (`stripe_customer_id`, `value`). v1, not the v2 stream: v1 answers each event at once,
 * so a refused event is known and kept with Stripe's message; the v2 stream reports errors later, by
 * webhook. A 4xx other than 429 is a refusal for good; 429, 5xx and network faults are retried.
 */
export function stripeMeterSender(options: StripeMeterOptions): MeterSender {
  const url = options.apiUrl ? new URL(options.apiUrl) : undefined;
  const stripe = new Stripe(options.secretKey, {
    telemetry: false,
    maxNetworkRetries: 2,
    timeout: options.timeoutMs ?? 10_000,
    ...(url && {
      host: url.hostname,
      port: url.port || (url.protocol === "http:" ? 80 : 443),
      protocol: url.protocol === "http:" ? "http" : "https",
    }),
  });
  const concurrency = options.concurrency ?? 16;

  const sendOne = async (
    meter: string,
    customer: string,
    value: number,
    identifier: string,
    endedAt: number,
  ) => {
    try {
      await stripe.billing.meterEvents.create({
        event_name: meter,
        identifier,
        timestamp: Math.floor(endedAt / 1000),
        payload: { stripe_customer_id: customer, value: String(value) },
      });
      return { ok: true } as const;
    } catch (err) {
      return outcomeOf(err);
    }
  };

  return {
    target: "stripe",
    async send(batch) {
      const outcomes: SendOutcome[] = new Array(batch.length);
      let next = 0;
      const worker = async () => {
        while (next < batch.length) {
          const i = next++;
          const item = batch[i];
          if (!item) continue;
          outcomes[i] = await sendOne(
            item.connection.meter,
            item.subject,
            item.event.value,
            item.event.transactionId,
            item.event.endedAt,
          );
        }
      };
      await Promise.all(Array.from({ length: Math.min(concurrency, batch.length) }, worker));
      return outcomes;
    },
  };
}

function outcomeOf(err: unknown): SendOutcome {
  if (err instanceof Stripe.errors.StripeError) {
    const status = err.statusCode;
    if (status === 401 || status === 403) {
      // Stripe's message may quote part of the key: say only what happened.
      return { ok: false, permanent: false, message: `Stripe refused the deployment's key (${status})` };
    }
    // The identifier was taken already: an earlier attempt got through (its answer was lost).
    if (err.code === "resource_already_exists" || /identifier.*already/i.test(err.message))
      return { ok: true };
    // The SDK puts the request id before Stripe's message: kept apart, Stripe's words are kept as said.
    const said = err.message.replace(/^\[req_[A-Za-z0-9]+\]\s*/, "");
    const text = redactKeys(`${err.code ? `${err.code}: ` : ""}${said}`).slice(0, 500);
    if (status !== undefined && status >= 400 && status < 500 && status !== 409 && status !== 429) {
      return { ok: false, permanent: true, message: text };
    }
    return { ok: false, permanent: false, message: text };
  }
  return {
    ok: false,
    permanent: false,
    message: redactKeys(String((err as Error)?.message ?? err)).slice(0, 500),
  };
}
