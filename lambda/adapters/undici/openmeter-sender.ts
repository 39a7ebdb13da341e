import type { MeterSender, SendOutcome, UsageCloudEvent } from "../../core/billing-meter";
import { usageCloudEvent } from "../../core/billing-meter";

export interface OpenMeterOptions {
  /** The endpoint's base address: events go to `<url>/api/v1/events`. */
  url: string;
  /** Sent as `Authorization: Bearer <token>`; never logged, stored or returned. */
  token?: string;
  /** The CloudEvents `source` of every event: the deployment (OpenMeter deduplicates by `id` and `source`). */
  source: string;
  timeoutMs?: number;
}

/**
 * Sends events as CloudEvents to an OpenMeter-compatible endpoint: one batch request
 * (`application/cloudevents-batch+json`) per queue message. A batch refused with a 4xx is sent again
 * one event at a time (`application/cloudevents+json`), so only the events the endpoint refuses are
 * kept as failed; 429, 5xx and network faults are retried.
 */
export function openMeterSender(options: OpenMeterOptions): MeterSender {
  const endpoint = new URL("api/v1/events", options.url.endsWith("/") ? options.url : `${options.url}/`);
  const post = async (contentType: string, body: unknown): Promise<SendOutcome> => {
    let response: Response;
    try {
      response = await fetch(endpoint, {
        method: "POST",
        headers: {
          "content-type": contentType,
          ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
      });
    } catch (err) {
      return { ok: false, permanent: false, message: `no answer: ${(err as Error).name}` };
    }
    if (response.ok) {
      await response.body?.cancel();
      return { ok: true };
    }
    // The endpoint's own words, short; a problem+json `detail` where there is one.
    const text = (await response.text().catch(() => "")).slice(0, 2000);
    let detail = text;
    try {
      const parsed = JSON.parse(text) as { detail?: unknown; title?: unknown };
      detail = String(parsed.detail ?? parsed.title ?? text);
    } catch {}
    const message = `${response.status}${detail ? `: ${detail.slice(0, 300)}` : ""}`;
    // A refused token is the deployment's fault, not the event's: retried, then dead-lettered (the alarm).
    if (response.status === 401 || response.status === 403) {
      return { ok: false, permanent: false, message: `the endpoint refused the token (${response.status})` };
    }
    const permanent = response.status >= 400 && response.status < 500 && response.status !== 429;
    return { ok: false, permanent, message };
  };

  return {
    target: "openmeter",
    async send(batch) {
      const events: UsageCloudEvent[] = batch.map(({ event, connection, subject }) =>
        usageCloudEvent(event, connection, options.source, subject),
      );
      const all = await post("application/cloudevents-batch+json", events);
      if (all.ok || !all.permanent || events.length === 1) return events.map(() => all);
      const outcomes: SendOutcome[] = [];
      for (const event of events) outcomes.push(await post("application/cloudevents+json", event));
      return outcomes;
    },
  };
}
