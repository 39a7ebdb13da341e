import type { Hono, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app/env";
import { createProxyApp, type UpstreamState } from "../app/proxy/app";
import { combineHooks, PendingWork, type ProxyCall, type ProxyHooks, type ProxyOutcome } from "../core/call";
import type { Logger } from "../core/logger";
import { CachedVendorKeys } from "../core/metering-vendor-keys";
import type { Metrics } from "../core/metrics";
import { CachedPlans } from "../core/plan-cache";
import type { PriceCatalogue } from "../core/pricing";
import { recordLevel, requestStoreLevel, type StoreLevel, type UserIdHasher } from "../core/privacy";
import type { RecordQueue } from "../core/queue";
import { buildRecord, type InteractionRecord } from "../core/record";
import type { UpstreamClient } from "../core/upstream";
import type { VendorDefinition } from "../core/vendor-model";
import { checkedAfterCharges } from "../events/alerts";
import { BudgetGuard } from "../metering/budgets";
import type { LeaseTimes } from "../metering/credit-leases";
import { createMetering, type Metering } from "../metering/hooks";
import { type OpenTelemetry, openTelemetry, type TelemetrySettings } from "../telemetry/hooks";
import { type Alerts, composeAlerts } from "./alerts";
import type { Infrastructure } from "./infrastructure";

export interface MeteringSettings {
  prices: PriceCatalogue;
  /** How long a vendor key lookup, a budget, a key policy or a project's plan is cached (how long a change takes to apply). */
  keyCacheMs: number;
  /** How long a credit or budget hold lasts before the sweeper may release it. */
  holdTtlMs: number;
  /** How long finished calls' charges wait to be noted in batches; 0: before the call ends. */
  noteChargesMs: number;
  /**
   * How long a credit or budget lease takes new calls (30 s by default), and how long it may stay unused
   * before it settles (2 s). Lambda's containers serve one call at a time: a longer lease spreads its
   * take and settlement over more calls (docs/metering.md "No hot item").
   */
  leases?: LeaseTimes;
  /** The most counters a key's TPM minute is split over (1 unless set; metering/budgets.ts `tpmShards`). */
  tpmShards?: number;
}

export interface ProxySettings {
  /** Absent: calls are relayed and recorded, not metered. */
  metering?: MeteringSettings;
  /** More hooks, run after the events', which they see on the call. */
  hooks?: ProxyHooks[];
  /**
   * The alerts of a host that serves the dashboard in the same process (the embedded host), so that a
   * rule edited there applies to the next call; absent: composed here, with this function's own cache.
   */
  alerts?: Alerts;
  /** Each call as an OpenTelemetry span and GenAI metrics (docs/telemetry.md); absent: off, SDK not loaded. */
  telemetry?: TelemetrySettings;
}

export interface ProxyPerVendor {
  vendor: VendorDefinition;
  upstream: UpstreamClient;
  managedKey?: string | undefined;
  upstreamState: UpstreamState;
  auth: MiddlewareHandler<AppEnv>;
}

export interface ProxyComposition {
  /** Metering, the record, the metrics and the events, in that order: what the proxy calls around each call. */
  hooks: ProxyHooks;
  /** Metering, when it is on: the host settles its leases before it stops. */
  metering: Metering | undefined;
  /** Every call's after-work (settlement, record): a Lambda invocation waits for its own (`run`), the host for all before it stops. */
  pending: PendingWork;
  /** The OpenTelemetry export, when on: the host shuts it down (sending what waits) before it stops. */
  telemetry: OpenTelemetry | undefined;
  /**
   * One vendor's proxy app, with the hooks above: the embedded host makes one per vendor at its start,
   * a Lambda function one for each managed key of the moment (the operator may replace it).
   */
  app(options: ProxyPerVendor): Hono<AppEnv>;
}

/**
 * The proxy with its hooks: metering (rate limit, credit and budget holds and their settlement, BYOK
 * keys, idempotency) over the store, then each call's record to the warehouse queue, then the call's
 * metrics, then its events (`usage.recorded`) and alerts (low balance, budget thresholds).
 */
export function composeProxy(
  infra: Pick<
    Infrastructure,
    "store" | "recordQueue" | "userIds" | "events" | "clock" | "logger" | "metrics"
  >,
  settings: ProxySettings,
): ProxyComposition {
  const { store, logger, clock } = infra;
  const alerts = settings.alerts ?? composeAlerts(infra);
  const metering =
    settings.metering &&
    createMetering({
      // Charges noted in batches count after the call's own check: each note checks the balance again.
      credits:
        settings.metering.noteChargesMs > 0
          ? checkedAfterCharges(store.credits, alerts.alerts)
          : store.credits,
      limiter: store.rateLimiter,
      idempotency: store.idempotency,
      vendorKeys: new CachedVendorKeys(store.vendorKeys, settings.metering.keyCacheMs),
      prices: settings.metering.prices,
      // A project's plan, cached as keys are: a plan change applies within keyCacheMs.
      plans: new CachedPlans(store.plans, settings.metering.prices.markup, settings.metering.keyCacheMs),
      logger,
      clock,
      holdTtlMs: settings.metering.holdTtlMs,
      noteChargesMs: settings.metering.noteChargesMs,
      ...(settings.metering.leases && { leases: settings.metering.leases }),
      budgets: new BudgetGuard({
        counters: store.budgets,
        clock,
        logger,
        cacheMs: settings.metering.keyCacheMs,
        holdTtlMs: settings.metering.holdTtlMs,
        noteChargesMs: settings.metering.noteChargesMs,
        ...(settings.metering.leases && { leases: settings.metering.leases }),
        ...(settings.metering.tpmShards !== undefined && { tpmShards: settings.metering.tpmShards }),
        // Budget-threshold alerts, with user ids hashed as the records hash them.
        watcher: alerts.budgetAlerts(infra.userIds),
      }),
    });
  const telemetry = settings.telemetry && openTelemetry(settings.telemetry, infra);
  // The order is the contract between the hooks: metering prices the call (`call.billing`), the
  // record hook (below) builds the record from that (`call.record`), and the metrics (below) and the
  // hooks after them (the events) read both.
  const hooks = combineHooks(
    [
      ...(metering ? [metering] : []),
      warehouseHooks(infra.recordQueue, infra.userIds),
      callMetrics(infra.metrics),
      ...(telemetry ? [telemetry.hooks] : []),
      alerts.hooks,
      ...(settings.hooks ?? []),
    ],
    logger,
  );
  const pending = new PendingWork();
  return { hooks, metering, pending, telemetry, app: vendorApps({ hooks, pending, logger }) };
}

/** Each vendor's proxy app around `hooks`, whose after-work goes on `pending`. */
export function vendorApps(around: {
  hooks: ProxyHooks;
  pending: PendingWork;
  logger: Logger;
}): ProxyComposition["app"] {
  return ({ managedKey, ...options }) =>
    createProxyApp({ ...options, ...(managedKey !== undefined && { managedKey }), ...around });
}

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

/**
 * Each call's counters and timings, read once metering and the record are done: how many calls, how
 * many refused by the rate limit, for want of credits or by a budget, failed upstream, charged, and for
 * how much.
 */
export function callMetrics(metrics: Metrics): ProxyHooks {
  return {
    after(call, outcome) {
      // By vendor: on managed instances one function serves them all.
      const byVendor = { vendor: call.vendor };
      const count = (name: string) => metrics.add(name, "Count", 1, byVendor);
      count("ProxyCalls");
      if (outcome.error?.code === "rate_limit_exceeded") count("RateLimited");
      if (outcome.error?.code === "insufficient_credits") count("InsufficientCredits");
      if (outcome.error?.code === "budget_exceeded") count("BudgetExceeded");
      if (outcome.error?.type === "upstream_error") count("UpstreamFailures");
      if (outcome.status >= 500) count("ServerErrors");
      const charged = call.billing?.mode === "managed" ? (call.billing.costMicros ?? 0) : 0;
      if (charged > 0) {
        count("CallsCharged");
        metrics.add("ChargedMicros", "Count", charged, byVendor);
      }
      metrics.add("CallLatency", "Milliseconds", outcome.latencyMs, byVendor);
      if (outcome.ttftMs !== undefined) {
        metrics.add("TimeToFirstByte", "Milliseconds", outcome.ttftMs, byVendor);
      }
    },
  };
}
