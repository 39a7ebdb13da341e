import { activePriceCatalogue } from "../adapters/fs/price-catalogue";
import { composeProxy } from "../compose/proxy";
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
 * One vendor's proxy function (`DMT_VENDOR`), streaming behind its function URL: metering over
 * DynamoDB (BYOK keys unwrapped by KMS), each call's record to SQS, its metrics to CloudWatch, its
 * events (`usage.recorded`, `balance.low`, `budget.*`) to the stack's EventBridge bus. A bad
 * price override or a missing variable fails the cold start, naming it.
 */
const config = parseProxyConfig(process.env);
const prices = activePriceCatalogue(process.env);
const metering = parseMeteringConfig(process.env);
const aws = awsHost(process.env, "proxy", {
  dimensions: { vendor: config.DMT_VENDOR },
  keyWrapper: kmsKeyWrapper(metering),
});
const otlpFromEnv = otlpSettings(config);
const otlp = otlpFromEnv && secretOtlpHeaders(otlpFromEnv, config, aws.logger);
const proxy = composeProxy(
  {
    ...aws,
    ...sqsRecordQueue(parseRecordQueueConfig(process.env), aws.logger),
    ...secretUserIds(process.env, aws.logger),
    events: signedEventBridgePublisher(parseEventBusConfig(process.env)),
  },
  {
    metering: {
      prices,
      keyCacheMs: metering.DMT_KEY_CACHE_MS,
      holdTtlMs: metering.DMT_HOLD_TTL_MS,
      // A frozen container may never run again: each call's charge is noted before its invocation ends.
      noteChargesMs: 0,
    },
    // Each invocation sends its span and metrics before it ends: a frozen container may never run again.
    ...(otlp && { telemetry: { otlp, flushEachCall: true } }),
  },
);

export const handler = awslambda.streamifyResponse(
  createProxyHandler({ config, logger: aws.logger, proxy, telemetry: aws.telemetry }),
);
