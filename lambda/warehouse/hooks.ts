import type { ProxyCall, ProxyHooks, ProxyOutcome } from "../core/call";
import type { RecordQueue } from "../core/queue";
import { buildRecord, type InteractionRecord } from "../core/record";

/**
 * The record of one finished call. Reads what metering left on the call (`call.billing`); without
 * metering, a call is `managed` unless it came with a dual key, and unpriced. Of the caller's
 * credentials only the public key id is taken.
 */
export function recordOf(call: ProxyCall, outcome: ProxyOutcome): InteractionRecord {
  const billing = call.billing;
  return buildRecord({
    transactionId: call.id,
    requestId: call.requestId,
    projectId: call.auth.projectId,
    keyId: call.auth.keyId,
    vendor: call.vendor,
    endpoint: call.endpoint,
    model: call.model,
    billingMode: billing?.mode ?? (call.auth.vendorKey === undefined ? "managed" : "dual"),
    statusCode: outcome.status,
    error: outcome.error,
    vendorRequestId: outcome.vendorRequestId,
    streamed: outcome.streamed,
    startedAt: call.startedAt,
    latencyMs: outcome.latencyMs,
    ttftMs: outcome.ttftMs,
    usage: outcome.usage,
    costMicros: billing?.costMicros,
    priceVersion: billing?.priceVersion,
    userIdHeader: call.userHeader,
    requestJson: call.body,
    userAgent: call.userAgent,
    request: outcome.request,
    response: outcome.response,
  });
}

/** The warehouse's proxy hook: every finished call becomes one record on the queue. */
export function warehouseHooks(queue: RecordQueue): ProxyHooks {
  return {
    async after(call, outcome) {
      await queue.send(recordOf(call, outcome));
    },
  };
}
