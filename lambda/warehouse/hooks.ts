import type { ProxyCall, ProxyHooks, ProxyOutcome } from "../core/call";
import { lowestLevel, requestStoreLevel, type StoreLevel, type UserIdHasher } from "../core/privacy";
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

/** Each finished call's record, built once for the hooks that read it (after metering's, which prices it). */
const records = new WeakMap<ProxyCall, { outcome: ProxyOutcome; record: InteractionRecord }>();

/** The call's record at the level it is stored at (`recordLevel`), shared: never changed. */
export function finishedRecord(call: ProxyCall, outcome: ProxyOutcome): InteractionRecord {
  const built = records.get(call);
  if (built?.outcome === outcome) return built.record;
  const record = recordOf(call, outcome, recordLevel(call));
  records.set(call, { outcome, record });
  return record;
}

/**
 * What a call's record keeps: the key's level, or less if `X-DMT-Store` asked. A call refused for
 * its header is recorded without bodies whatever it asked: it may have meant to ask for less.
 */
export function recordLevel(call: ProxyCall): StoreLevel {
  try {
    return requestStoreLevel(call.auth.store, call.storeHeader);
  } catch {
    return lowestLevel(call.auth.store, "metadata");
  }
}

/**
 * The warehouse's proxy hook: checks `X-DMT-Store` before anything is forwarded, and turns every
 * finished call into one record on the queue, at the call's level; at `none` the user id is replaced
 * by its keyed hash before the record leaves the process.
 */
export function warehouseHooks(queue: RecordQueue, userIds: UserIdHasher): ProxyHooks {
  return {
    async admit(call) {
      requestStoreLevel(call.auth.store, call.storeHeader);
    },
    async after(call, outcome) {
      const record = finishedRecord(call, outcome);
      await queue.send(
        record.store_level === "none" && record.user_id !== null
          ? { ...record, user_id: await userIds.keyed(record.project_id, record.user_id) }
          : record,
      );
    },
  };
}
