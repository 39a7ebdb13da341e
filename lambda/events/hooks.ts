import type { ProxyHooks } from "../core/call";
import type { EventPublisher } from "../core/cloudevent";
import { decimalUsd } from "../core/credits";
import { errorFields, type Logger } from "../core/logger";
import type { BalanceAlerts } from "./alerts";

/**
 * The events' proxy hook, after the warehouse's, whose record of the call (`call.record`) it reads: a
 * `usage.recorded` event per call (figures and ids, never bodies or keys), and a balance check after
 * each managed call that cost something.
 */
export function eventHooks(
  publisher: EventPublisher,
  alerts: Pick<BalanceAlerts, "check">,
  logger: Logger,
): ProxyHooks {
  return {
    async after(call) {
      const record = call.record;
      if (!record) throw new Error("usage event without a record: the warehouse's hook must run first");
      // Figures and ids only: never a body, and at level `none` no user id either.
      const charged = record.billing_mode === "managed" && (record.cost_micros ?? 0) > 0;
      await Promise.all([
        publisher
          .publish({
            type: "usage.recorded",
            projectId: record.project_id,
            subject: record.transaction_id,
            data: {
              transaction_id: record.transaction_id,
              key_id: record.key_id,
              user_id: record.store_level === "none" ? null : record.user_id,
              vendor: record.vendor,
              endpoint: record.endpoint,
              model: record.model,
              status_code: record.status_code,
              streamed: record.streamed,
              billing_mode: record.billing_mode,
              input_tokens: record.input_tokens,
              output_tokens: record.output_tokens,
              cached_input_tokens: record.cached_input_tokens,
              reasoning_tokens: record.reasoning_tokens,
              cost_usd: record.cost_micros === null ? null : decimalUsd(record.cost_micros),
              price_version: record.price_version,
            },
          })
          .catch((err: unknown) => logger.error("usage event not published", errorFields(err))),
        charged ? alerts.check(record.project_id) : undefined,
      ]);
    },
  };
}
