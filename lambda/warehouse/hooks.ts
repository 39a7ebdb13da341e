import type { ProxyCall, ProxyHooks, ProxyOutcome } from "../core/call";
import { recordLevel, requestStoreLevel, type StoreLevel, type UserIdHasher } from "../core/privacy";
import type { RecordQueue } from "../core/queue";
import { buildRecord, type InteractionRecord } from "../core/record";

/**
 * The record of one finished call, keeping what `store` allows. Reads what metering left on the call
 * (`call.billing`); without metering, a call is `managed` unless it came with a dual key, and unpriced.
 * Of the caller's credentials only the public key id is taken.
 */
export function recordOf(call: ProxyCall, outcome: ProxyOutcome, store: StoreLevel): InteractionRecord {
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
    usage: billing?.usage ?? outcome.usage,
    costMicros: billing?.costMicros,
    priceVersion: billing?.priceVersion,
    costBreakdown: billing?.breakdown,
    userIdHeader: call.userHeader,
    requestJson: call.body,
    userAgent: call.userAgent,
    request: outcome.request,
    response: outcome.response,
    store,
  });
}

/**
 * The warehouse's proxy hook, after metering's (whose `call.billing` the record reads): checks
 * `X-DMT-Store` before anything is forwarded, and turns every finished call into one record at the
 * call's level, left on the call (`call.record`) for the hooks after it and sent to the queue; at `none`
 * the user id is replaced by its keyed hash in what is sent, before it leaves the process.
 */
export function warehouseHooks(queue: RecordQueue, userIds: UserIdHasher): ProxyHooks {
  return {
    async admit(call) {
      requestStoreLevel(call.auth.store, call.storeHeader);
    },
    async after(call, outcome) {
      const record = recordOf(call, outcome, recordLevel(call));
      call.record = record;
      await queue.send(
        record.store_level === "none" && record.user_id !== null
          ? { ...record, user_id: await userIds.keyed(record.project_id, record.user_id) }
          : record,
      );
    },
  };
}
