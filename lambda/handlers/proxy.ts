import { DynamoWebhooks } from "../adapters/dynamodb/events";
import { activePriceCatalogue } from "../adapters/fs/price-catalogue";
import { composeProxy } from "../compose/proxy";
import { wantedUsageOnly } from "../events/wanted-usage";
import { otlpSettings } from "../telemetry/config";
import {
  awsHost,
  kmsKeyWrapper,
  secretUserIds,
  signedEventBridgePublisher,
  sqsRecordQueue,
} from "./runtime/aws";
import {
  parseEventBusConfig,
  parseMeteringConfig,
  parseProxyConfig,
  parseRecordQueueConfig,
} from "./runtime/config";
import { secretOtlpHeaders } from "./runtime/otlp-headers";
import { createProxyHandler } from "./runtime/proxy-stream";

export { createProxyHandler };

/**
 * The proxy function of its vendors (`DMT_VENDORS`), streaming behind its function URL: metering over
 * DynamoDB (BYOK keys unwrapped by KMS), each call's record to SQS, its metrics to CloudWatch, its
 * events (`usage.recorded` where a webhook names it, `balance.low`, `budget.*`) to the stack's EventBridge bus. A bad
 * price override or a missing variable fails the cold start, naming it.
 */
/**
 * A lease takes calls for 15 minutes: at 20-s calls a container's lease then serves 16 to 45 calls, so
 * its take and settlement cost a call a fraction of a write (docs/metering.md "No hot item"). On
 * standard compute it also stays through idle time: a container is frozen between its invocations, so
 * an idle lease could only ever be settled as the next call thaws it, which then takes a new one.
 */
const LAMBDA_LEASE_OPEN_MS = 15 * 60_000;
/**
 * A key's TPM minute over up to 16 counters: every warm container takes a lease of the new minute
 * within seconds of its start (docs/metering.md "TPM counters").
 */
const LAMBDA_TPM_SHARDS = 16;
const config = parseProxyConfig(process.env);
const prices = activePriceCatalogue(process.env);
const metering = parseMeteringConfig(process.env);
// Each call's metrics carry its vendor (compose/proxy.ts `callMetrics`), not the function's.
const aws = awsHost(process.env, "proxy", { keyWrapper: kmsKeyWrapper(metering) });
const otlpFromEnv = otlpSettings(config);
const otlp = otlpFromEnv && secretOtlpHeaders(otlpFromEnv, config, aws.logger);
const proxy = composeProxy(
  {
    ...aws,
    ...sqsRecordQueue(parseRecordQueueConfig(process.env), aws.logger),
    ...secretUserIds(process.env, aws.logger),
    // A call's usage.recorded goes on the bus only for a project with a webhook that names it (listed
    // at most DMT_KEY_CACHE_MS before): one PutEvents per call on an account-wide quota, and one message
    // through the webhook leg, only where someone wants it. Every other event type always goes.
    events: wantedUsageOnly(
      signedEventBridgePublisher(parseEventBusConfig(process.env)),
      new DynamoWebhooks(aws.store.db, aws.store.tables, kmsKeyWrapper(metering)()),
      aws.clock,
      metering.DMT_KEY_CACHE_MS,
    ),
  },
  {
    metering: {
      prices,
      keyCacheMs: metering.DMT_KEY_CACHE_MS,
      holdTtlMs: metering.DMT_HOLD_TTL_MS,
      // A frozen container may never run again: each call's charge is noted before its invocation ends.
      noteChargesMs: 0,
      // One call at a time per container: a lease spans many of its calls, not one or two.
      leases: {
        openMs: LAMBDA_LEASE_OPEN_MS,
        ...(config.DMT_PROXY_COMPUTE === "standard" && { idleMs: LAMBDA_LEASE_OPEN_MS }),
      },
      tpmShards: LAMBDA_TPM_SHARDS,
    },
    // Each invocation sends its span and metrics before it ends: a frozen container may never run again.
    ...(otlp && { telemetry: { otlp, flushEachCall: true } }),
  },
);

export const handler = awslambda.streamifyResponse(
  createProxyHandler({ config, logger: aws.logger, proxy, telemetry: aws.telemetry }),
);
