import { DynamoBudgets } from "../adapters/dynamodb/budgets";
import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoCredits } from "../adapters/dynamodb/credits";
import { DynamoIdempotency } from "../adapters/dynamodb/idempotency";
import { DynamoRateLimiter } from "../adapters/dynamodb/rate-limit";
import { DynamoVendorKeys } from "../adapters/dynamodb/vendor-keys";
import { createKmsClient, KmsKeyWrapper } from "../adapters/secrets/kms";
import { createMetering } from "../app/metering";
import { activePriceCatalogue } from "../app/prices";
import { combineHooks, type ProxyHooks } from "../app/proxy-hooks";
import type { Logger } from "../core/logger";
import { CachedVendorKeys } from "../core/metering-vendor-keys";
import { BudgetGuard } from "../metering/budgets";
import { warehouseHooks } from "../warehouse/hooks";
import { parseMeteringConfig, parseRecordQueueConfig } from "./config";
import { type FunctionMetrics, MetricUnit } from "./telemetry";
import { createRecordQueue } from "./warehouse";

/**
 * What the proxy functions do around each call in AWS, as the local stack does: metering (rate limit,
 * credit hold and settlement, BYOK keys unwrapped by KMS, idempotency) over DynamoDB, then the call's
 * record to the warehouse queue, then the call's metrics. Built once per container from the
 * environment; a bad price override or a missing variable fails the cold start, naming it.
 */
export function proxyHooksFromEnv(
  env: Record<string, string | undefined>,
  logger: Logger,
  metrics: FunctionMetrics,
): ProxyHooks {
  const prices = activePriceCatalogue(env);
  const config = parseMeteringConfig(env);
  const db = createDynamoClient(
    config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {},
  );
  const wrapper = new KmsKeyWrapper(
    createKmsClient(config.DMT_KMS_ENDPOINT ? { endpoint: config.DMT_KMS_ENDPOINT } : {}),
    config.DMT_BYOK_KEY_ARN,
  );
  const metering = createMetering({
    credits: new DynamoCredits(db, config.tables),
    limiter: new DynamoRateLimiter(db, config.tables),
    idempotency: new DynamoIdempotency(db, config.tables),
    vendorKeys: new CachedVendorKeys(
      new DynamoVendorKeys(db, config.tables, wrapper),
      config.DMT_KEY_CACHE_MS,
    ),
    prices,
    logger,
    clock: Date.now,
    holdTtlMs: config.DMT_HOLD_TTL_MS,
    // A frozen container may never run again: each call's charge is noted before its invocation ends.
    noteChargesMs: 0,
    budgets: new BudgetGuard({
      counters: new DynamoBudgets(db, config.tables),
      clock: Date.now,
      logger,
      cacheMs: config.DMT_KEY_CACHE_MS,
      holdTtlMs: config.DMT_HOLD_TTL_MS,
      noteChargesMs: 0,
    }),
  });
  const queue = createRecordQueue(parseRecordQueueConfig(env), logger);
  return combineHooks([metering, warehouseHooks(queue), callMetrics(metrics)], logger);
}

/**
 * Each call's counters and timings, read once metering and the record are done: how many calls, how
 * many refused by the rate limit or for want of credits, failed upstream, charged, and for how much.
 */
export function callMetrics(metrics: FunctionMetrics): ProxyHooks {
  return {
    after(call, outcome) {
      const count = (name: string) => metrics.add(name, MetricUnit.Count, 1);
      count("ProxyCalls");
      if (outcome.error?.code === "rate_limit_exceeded") count("RateLimited");
      if (outcome.error?.code === "insufficient_credits") count("InsufficientCredits");
      if (outcome.error?.code === "budget_exceeded") count("BudgetExceeded");
      if (outcome.error?.type === "upstream_error") count("UpstreamFailures");
      if (outcome.status >= 500) count("ServerErrors");
      const charged = call.billing?.mode === "managed" ? (call.billing.costMicros ?? 0) : 0;
      if (charged > 0) {
        count("CallsCharged");
        metrics.add("ChargedMicros", MetricUnit.Count, charged);
      }
      metrics.add("CallLatency", MetricUnit.Milliseconds, outcome.latencyMs);
      if (outcome.ttftMs !== undefined) {
        metrics.add("TimeToFirstByte", MetricUnit.Milliseconds, outcome.ttftMs);
      }
    },
  };
}
