import type * as z from "zod/mini";
import { decimalUsd } from "../../core/credits";
import { errors } from "../../core/errors";
import type { InteractionIndex } from "../../core/interactions";
import { TRANSACTION_ID } from "../../core/interactions";
import type { InteractionRecord } from "../../core/record";
import type { RouteTable } from "../routing";
import type { transactionSchema } from "./openapi";

export interface TransactionRouteDeps {
  /** The dashboard's interaction index: a call is there within seconds of its end. */
  interactions: Pick<InteractionIndex, "get">;
}

/**
 * `GET /api/v1/transactions/{transaction_id}`: the summary of one call (the id of its
 * `x-dmt-transaction-id` header) for a key of the same project; any other key gets 404, as for an id
 * that does not exist. Figures only: never the bodies.
 */
export function transactionRoutes(deps: TransactionRouteDeps): RouteTable {
  return {
    "/api/v1/transactions/:transaction_id": {
      GET: async (c) => {
        const id = c.req.param("transaction_id") ?? "";
        const record = TRANSACTION_ID.test(id)
          ? await deps.interactions.get(c.get("auth").projectId, id)
          : undefined;
        if (!record) throw errors.notFound(`Transaction '${id.slice(0, 128)}' was not found.`);
        return c.json(transactionSummary(record));
      },
    },
  };
}

export function transactionSummary(record: InteractionRecord): z.infer<typeof transactionSchema> {
  const failed = record.error_type !== null;
  return {
    transaction_id: record.transaction_id,
    status: failed || record.status_code >= 400 ? "error" : "success",
    status_code: record.status_code,
    error: failed ? { type: record.error_type, code: record.error_code } : null,
    vendor: record.vendor,
    endpoint: record.endpoint,
    model: record.model,
    key_id: record.key_id,
    streamed: record.streamed,
    started_at: new Date(record.started_at).toISOString(),
    latency_ms: record.latency_ms,
    billing_mode: record.billing_mode,
    cost_usd: record.cost_micros === null ? null : decimalUsd(record.cost_micros),
    price_version: record.price_version,
    usage: {
      input_tokens: record.input_tokens,
      cached_input_tokens: record.cached_input_tokens,
      cache_write_tokens: record.cache_write_tokens,
      output_tokens: record.output_tokens,
      reasoning_tokens: record.reasoning_tokens,
      images: record.images,
      audio_seconds: record.audio_seconds,
      speech_characters: record.speech_characters,
      estimated: record.usage_estimated,
      complete: record.usage_complete,
    },
  };
}
