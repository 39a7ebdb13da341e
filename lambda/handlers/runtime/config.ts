// zod/mini, not zod: the full build adds ~450 KB to every bundle, the mini one ~20 KB.
import * as z from "zod/mini";
import { TABLES, type TableNames, tableNames } from "../../adapters/dynamodb/tables";
import { httpUrl, numberIn, oneOf, parseEnv, text } from "../../core/config";
import { LOG_LEVELS } from "../../core/logger";
import { VENDOR_NAMES, type VendorName } from "../../core/vendor-model";
import { OTLP_VARIABLES } from "../../telemetry/config";

/**
 * Lambda configuration, one schema per function, parsed once at cold start by the shared `parseEnv`
 * (`core/config.ts`); a bad or missing value fails naming its variable.
 */
const base = z.object({
  DMT_LOG_LEVEL: z._default(oneOf(LOG_LEVELS), "info"),
  /** CloudWatch namespace of the functions' metrics (the stack sets `dmt/<stack name>`). */
  DMT_METRICS_NAMESPACE: z._default(text, "dmt"),
});

/** Each function is given the names of the tables it may use (lib/store.ts), not all of them. */
const tableVariables = Object.fromEntries(
  Object.keys(TABLES).map((name) => [`DMT_TABLE_${name.toUpperCase()}`, z.optional(text)]),
);

const store = z.extend(base, {
  ...tableVariables,
  /** How long a key lookup is cached in a warm container: the revocation delay in AWS. */
  DMT_KEY_CACHE_MS: numberIn(0, 60_000, 5000),
  /** Another DynamoDB endpoint (tests point this at dynalite); unset in AWS. */
  DMT_DYNAMODB_ENDPOINT: z.optional(httpUrl),
});

/**
 * API Gateway (REST, regional endpoint) ends a streamed response that sent nothing for 5 minutes
 * ("Stream the integration response for your proxy integrations", API Gateway developer guide).
 */
export const GATEWAY_STREAM_IDLE_MS = 300_000;

/**
 * Where the proxy functions run (`dmt:proxyCompute`, lib/proxy-compute.ts): standard Lambda, one call
 * per execution environment, or Lambda Managed Instances, many at once.
 */
export const PROXY_COMPUTES = ["standard", "managed-instances"] as const;
export type ProxyCompute = (typeof PROXY_COMPUTES)[number];

/** Per vendor: `DMT_VENDOR_KEY_SECRET_ARN_OPENAI`, `DMT_UPSTREAM_URL_OPENAI`... */
const perVendor = (prefix: string) => (vendor: VendorName) => `${prefix}_${vendor.toUpperCase()}`;
export const vendorKeySecretVariable = perVendor("DMT_VENDOR_KEY_SECRET_ARN");
export const upstreamUrlVariable = perVendor("DMT_UPSTREAM_URL");

const proxy = z.extend(base, {
  /**
   * The vendors this function serves, comma-separated: every proxy function runs the same bundle, one
   * vendor each on standard compute, all of them in one function on managed instances (lib/stack.ts).
   */
  DMT_VENDORS: z.pipe(
    z.string({ error: "must be set" }),
    z.transform((value, ctx) => {
      const vendors = [...new Set(value.split(",").map((name) => name.trim()))];
      const unknown = vendors.filter((name) => !(VENDOR_NAMES as readonly string[]).includes(name));
      if (value.trim() === "" || unknown.length > 0) {
        ctx.issues.push({
          code: "custom",
          input: value,
          message: `must list vendors (${VENDOR_NAMES.join(", ")}), comma-separated`,
        });
        return z.NEVER;
      }
      return vendors as VendorName[];
    }),
  ),
  /** Where it runs: the stack sets it from `dmt:proxyCompute`. */
  DMT_PROXY_COMPUTE: z._default(oneOf(PROXY_COMPUTES), "standard"),
  /** Secrets Manager secrets (ARNs): each vendor's managed key (below), and the origin secret API Gateway sends. */
  ...Object.fromEntries(VENDOR_NAMES.map((vendor) => [vendorKeySecretVariable(vendor), z.optional(text)])),
  /** Behind a function URL; unset, the function takes API Gateway's Lambda proxy events only. */
  DMT_ORIGIN_SECRET_ARN: z.optional(text),
  /** How long a container keeps secret values before reading them again. */
  DMT_SECRET_CACHE_MS: numberIn(0, 3_600_000, 300_000),
  /** Another Secrets Manager endpoint (tests); unset in AWS. */
  DMT_SECRETS_ENDPOINT: z.optional(httpUrl),
  /** Another upstream than a vendor's own (origin plus base path), per vendor; unset in AWS. */
  ...Object.fromEntries(VENDOR_NAMES.map((vendor) => [upstreamUrlVariable(vendor), z.optional(httpUrl)])),
  DMT_UPSTREAM_CONNECT_TIMEOUT_MS: numberIn(1, 120_000, 10_000),
  /**
   * Longest wait for a vendor's first byte and between two chunks. Under API Gateway's idle limit on a
   * streamed response, so that a silent vendor ends in our 504 (nothing charged) rather than in the
   * gateway cutting a call the function goes on running and paying for (docs/aws.md).
   */
  DMT_UPSTREAM_IDLE_TIMEOUT_MS: numberIn(1, GATEWAY_STREAM_IDLE_MS - 10_000, GATEWAY_STREAM_IDLE_MS - 30_000),
  /** OpenTelemetry export (the stack sets these from `dmt:otlpEndpoint`): docs/telemetry.md. */
  ...OTLP_VARIABLES,
  /** A secret holding the OTLP headers (`dmt:otlpHeadersSecret`), instead of OTEL_EXPORTER_OTLP_HEADERS. */
  DMT_OTLP_HEADERS_SECRET_ARN: z.optional(text),
});

/** Other endpoints than AWS's own (tests point these at local stand-ins); unset in AWS. */
const awsEndpoints = {
  DMT_S3_ENDPOINT: z.optional(httpUrl),
  DMT_SQS_ENDPOINT: z.optional(httpUrl),
  DMT_ATHENA_ENDPOINT: z.optional(httpUrl),
  DMT_DYNAMODB_ENDPOINT: z.optional(httpUrl),
};

/**
 * Metering in the proxy functions: the store, the KMS key that wraps customers' own vendor keys, and
 * how long a credit hold lasts (longer than the 15-minute function timeout, so no hold is released
 * under a call still running; the sweeper releases what a crash left).
 */
const metering = z.extend(store, {
  DMT_BYOK_KEY_ARN: text,
  /** Another KMS endpoint (tests); unset in AWS. */
  DMT_KMS_ENDPOINT: z.optional(httpUrl),
  DMT_HOLD_TTL_MS: numberIn(960_000, 86_400_000, 3_600_000),
});

/** The secret that keys the user-id hash of level `none` (core/privacy.ts): proxies and deletion steps. */
const userIdKey = z.object({
  DMT_USER_ID_KEY_SECRET_ARN: text,
  DMT_SECRETS_ENDPOINT: z.optional(httpUrl),
});

/** The producer side of the warehouse: the queue, and the bucket whose `queue-spool/` keeps what it refused. */
const recordQueue = z.extend(base, {
  DMT_QUEUE_URL: httpUrl,
  DMT_WAREHOUSE_BUCKET: text,
  ...awsEndpoints,
});

const consumer = z.extend(base, {
  DMT_WAREHOUSE_BUCKET: text,
  DMT_DEAD_LETTER_QUEUE_URL: httpUrl,
  DMT_TABLE_WAREHOUSEDELIVERIES: text,
  DMT_TABLE_DELETIONTOMBSTONES: text,
  /** The dashboard's interactions index and the rollups it keeps in step. */
  DMT_TABLE_INTERACTIONS: text,
  DMT_TABLE_USAGEROLLUPS: text,
  /** Billing exports (lib/billing.ts): the meter queue and its status store; unset, none are sent. */
  DMT_METER_QUEUE_URL: z.optional(httpUrl),
  DMT_TABLE_BILLINGMETER: z.optional(text),
  ...awsEndpoints,
});

/** The billing exports' sender (lib/billing.ts): its status store and the secrets' ARNs. */
const meterSender = z.extend(base, {
  DMT_TABLE_BILLINGMETER: text,
  DMT_STRIPE_SECRET_ARN: z.optional(text),
  DMT_OPENMETER_TOKEN_ARN: z.optional(text),
  DMT_OPENMETER_URL: z.optional(httpUrl),
  DMT_METER_SOURCE: z._default(text, "dmt"),
  DMT_SECRETS_ENDPOINT: z.optional(httpUrl),
  ...awsEndpoints,
});
export type MeterSenderConfig = z.infer<typeof meterSender>;

/** For the billing exports' sender (`lambda/handlers/meter-sender.ts`). */
export function parseMeterSenderConfig(env: Record<string, string | undefined>): MeterSenderConfig {
  return parseEnv(meterSender, env);
}

/** The data API: exports through Athena, bucket-export settings in DynamoDB. */
const dataApi = z.extend(base, {
  DMT_ATHENA_WORKGROUP: text,
  DMT_WAREHOUSE_DATABASE: text,
  DMT_WAREHOUSE_TABLE: text,
  DMT_TABLE_PROJECTSETTINGS: text,
  /** The per-key rate limit, shared with the proxy functions. */
  DMT_TABLE_RATELIMITS: text,
  /** Deletion requests, whose stream starts the deletion workflow. */
  DMT_TABLE_DELETIONREQUESTS: text,
  /** Budgets and their counters, read by `GET /api/v1/budgets`. */
  DMT_TABLE_BUDGETS: text,
  DMT_TABLE_BUDGETCOUNTERS: text,
  ...awsEndpoints,
});

/** The stack's event bus: every function that emits events publishes there (lib/events.ts). */
const eventBus = z.object({
  DMT_EVENT_BUS_NAME: text,
  /** Another EventBridge endpoint (tests); unset in AWS. */
  DMT_EVENTBRIDGE_ENDPOINT: z.optional(httpUrl),
});

/**
 * Events: the store (webhooks, deliveries, alert rules, balances), the KMS key that wraps webhook
 * secrets, the stack's bus and the webhook delivery queue.
 */
const events = z.extend(z.extend(metering, eventBus.shape), {
  DMT_WEBHOOK_QUEUE_URL: httpUrl,
  /** The waits before webhook retries in ms, comma-separated (tests); default over an hour. */
  DMT_WEBHOOK_RETRY_DELAYS_MS: z.optional(z.string().check(z.regex(/^\d+(,\d+)*$/))),
  DMT_SQS_ENDPOINT: z.optional(httpUrl),
});

export type BaseConfig = z.infer<typeof base>;
export type StoreConfig = z.infer<typeof store> & { tables: TableNames };
/** With the vendors it serves, each with its managed key's secret (`parseProxyConfig`). */
export type ProxyConfig = z.infer<typeof proxy> & { served: ServedVendor[] };
export type MeteringConfig = z.infer<typeof metering> & { tables: TableNames };
export type RecordQueueConfig = z.infer<typeof recordQueue>;
export type ConsumerConfig = z.infer<typeof consumer>;
export type DataApiConfig = z.infer<typeof dataApi>;
export type EventsConfig = z.infer<typeof events> & { tables: TableNames };
export type EventBusConfig = z.infer<typeof eventBus>;

export function parseBaseConfig(env: Record<string, string | undefined>): BaseConfig {
  return parseEnv(base, env);
}

/** For functions that use the store: the `DMT_TABLE_<NAME>` of each table the function may use. */
export function parseStoreConfig(env: Record<string, string | undefined>): StoreConfig {
  return { ...parseEnv(store, env), tables: tableNames(env) };
}

/** A vendor a proxy function serves: its managed key's secret, and another upstream (tests). */
export interface ServedVendor {
  name: VendorName;
  keySecretArn: string;
  upstreamUrl?: string;
}

/**
 * For the proxy functions (`lambda/handlers/proxy.ts`), with the vendors it serves in `served`: each
 * must have its managed key's secret.
 */
export function parseProxyConfig(env: Record<string, string | undefined>): ProxyConfig {
  const config = parseEnv(proxy, env);
  // The schema checked each per-vendor variable it holds; these read them by name.
  const served = config.DMT_VENDORS.map((name): ServedVendor => {
    const keySecretArn = env[vendorKeySecretVariable(name)];
    if (!keySecretArn)
      throw new Error(`Invalid configuration: ${vendorKeySecretVariable(name)}: must be set`);
    const upstreamUrl = env[upstreamUrlVariable(name)];
    return { name, keySecretArn, ...(upstreamUrl && { upstreamUrl }) };
  });
  return { ...config, served };
}

/** For metering in the proxy functions (`lambda/compose/proxy.ts`). */
export function parseMeteringConfig(env: Record<string, string | undefined>): MeteringConfig {
  return { ...parseEnv(metering, env), tables: tableNames(env) };
}

/** For the proxy functions' record queue and the spool re-sender (`lambda/handlers/runtime/aws.ts`). */
export function parseRecordQueueConfig(env: Record<string, string | undefined>): RecordQueueConfig {
  return parseEnv(recordQueue, env);
}

/** For the warehouse consumer (`lambda/handlers/consumer.ts`). */
export function parseConsumerConfig(env: Record<string, string | undefined>): ConsumerConfig {
  return parseEnv(consumer, env);
}

/** For the data API (`lambda/handlers/api.ts`). */
export function parseDataApiConfig(env: Record<string, string | undefined>): DataApiConfig {
  return parseEnv(dataApi, env);
}

/** The deletion step Lambda (lib/deletion.ts sets every variable). */
const deletionSteps = z.extend(base, {
  DMT_TABLE_DELETIONREQUESTS: text,
  DMT_TABLE_DELETIONTOMBSTONES: text,
  DMT_TABLE_PROJECTSETTINGS: text,
  /** The dashboard's interactions index and rollups, purged too. */
  DMT_TABLE_INTERACTIONS: text,
  DMT_TABLE_USAGEROLLUPS: text,
  DMT_WAREHOUSE_BUCKET: text,
  DMT_ATHENA_WORKGROUP: text,
  DMT_WAREHOUSE_DATABASE: text,
  DMT_WAREHOUSE_TABLE: text,
  DMT_ATHENA_RESULTS_BUCKET: text,
  ...awsEndpoints,
});

/**
 * The dashboard API: the store and BYOK settings of metering (its hold TTL is not used), exports as
 * the data API's, and who issues its access tokens (the Cognito user pool) to which client.
 */
const dashboard = z.extend(z.extend(metering, dataApi.shape), {
  DMT_DASHBOARD_ISSUER: httpUrl,
  DMT_DASHBOARD_CLIENT_ID: text,
  /** Export downloads are written there (under dashboard-downloads/) and handed out presigned. */
  DMT_ATHENA_RESULTS_BUCKET: text,
  /** The pool the Members page invites from (by email); without it, invite with `dmt members add`. */
  DMT_DASHBOARD_USER_POOL_ID: z.optional(text),
  DMT_COGNITO_ENDPOINT: z.optional(httpUrl),
  /** The dashboard's address (the distribution's `/dashboard/`): Checkout sends the admin back below it. */
  DMT_DASHBOARD_URL: z.optional(httpUrl),
});

export type DeletionStepsConfig = z.infer<typeof deletionSteps>;
export type UserIdKeyConfig = z.infer<typeof userIdKey>;

/** The retention function: the store (projects, the index) and the warehouse bucket. */
const retention = z.extend(store, {
  DMT_WAREHOUSE_BUCKET: text,
  DMT_S3_ENDPOINT: z.optional(httpUrl),
  /** The queue a run's planned partitions go on, one worker each (lib/compaction.ts); unset: one run does all. */
  DMT_PARTITION_QUEUE_URL: z.optional(httpUrl),
  /** Retention's: the queue a run's planned projects go on, one worker each (lib/retention.ts). */
  DMT_PROJECT_QUEUE_URL: z.optional(httpUrl),
  DMT_SQS_ENDPOINT: z.optional(httpUrl),
});

export function parseRetentionConfig(env: Record<string, string | undefined>) {
  return { ...parseEnv(retention, env), tables: tableNames(env) };
}

/** The compaction function needs what retention's does: the store (its ledger table too) and the bucket. */
export const parseCompactionConfig = parseRetentionConfig;

/** For the functions that write or delete records of level `none`. */
export function parseUserIdKeyConfig(env: Record<string, string | undefined>): UserIdKeyConfig {
  return parseEnv(userIdKey, env);
}
export type DashboardConfig = z.infer<typeof dashboard> & { tables: TableNames };

/** For the deletion steps (`lambda/handlers/deletion.ts`). */
export function parseDeletionStepsConfig(env: Record<string, string | undefined>): DeletionStepsConfig {
  return parseEnv(deletionSteps, env);
}

/** For the dashboard API (`lambda/handlers/dashboard.ts`). */
export function parseDashboardConfig(env: Record<string, string | undefined>): DashboardConfig {
  return { ...parseEnv(dashboard, env), tables: tableNames(env) };
}

/** For the events: the delivery function, and what publishes events in other functions. */
export function parseEventsConfig(env: Record<string, string | undefined>): EventsConfig {
  return { ...parseEnv(events, env), tables: tableNames(env) };
}

/** For the functions that publish events: the proxies, the dashboard API, the deletion steps. */
export function parseEventBusConfig(env: Record<string, string | undefined>): EventBusConfig {
  return parseEnv(eventBus, env);
}

/**
 * Credits bought through Stripe (lib/payments.ts, docs/billing.md): the two secrets' ARNs, never their
 * values; both unset, payments are not configured. Read by the webhook, the sweeper (auto-recharge)
 * and the dashboard API (Buy credits, the recharge rule).
 */
const stripe = z.object({
  DMT_STRIPE_SECRET_ARN: z.optional(text),
  DMT_STRIPE_WEBHOOK_SECRET_ARN: z.optional(text),
  DMT_STRIPE_AMOUNTS_USD: z.optional(text),
  DMT_STRIPE_DEPLOYMENT: z.optional(text),
  /** Another Stripe API address (tests' stand-in); unset in AWS. */
  DMT_STRIPE_API_URL: z.optional(httpUrl),
  DMT_SECRETS_ENDPOINT: z.optional(httpUrl),
});
export type StripeConfig = z.infer<typeof stripe>;

export function parseStripeConfig(env: Record<string, string | undefined>): StripeConfig {
  return parseEnv(stripe, env);
}
