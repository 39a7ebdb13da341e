import { resolve } from "node:path";
import * as z from "zod/mini";
import { METER_ENV } from "../core/billing-meter";
import { httpUrl, oneOf, parseEnv, text, wholeNumberIn } from "../core/config";
import { LOG_LEVELS } from "../core/logger";
import { parseAmounts, type StripeSettings } from "../core/payments";
import type { VendorName } from "../core/vendor-names";
import { OTLP_VARIABLES } from "../telemetry/config";

const upstreamUrl = z.optional(httpUrl);
const optionalText = z.optional(text);
const HTTPS_ORIGIN = "must be an https origin, with no path or query";

/** Where the local service keeps its data unless DMT_DATA_DIR says otherwise (relative to the cwd). */
export const DEFAULT_DATA_DIR = ".dmt";

/**
 * Local configuration, parsed once at start by the shared `parseEnv` (`core/config.ts`, as every Lambda
 * function's); a bad value fails naming its variable.
 */
const schema = z
  .object({
    PORT: wholeNumberIn(0, 65535, 8787),
    HOST: z._default(text, "127.0.0.1"),
    DMT_DATA_DIR: z._default(text, DEFAULT_DATA_DIR),
    DMT_TLS_CERT: optionalText,
    DMT_TLS_KEY: optionalText,
    /** The HTTPS origin clients use; plain HTTP is redirected there (default: the listening host and port). */
    DMT_PUBLIC_URL: z.optional(
      z
        .url({ protocol: /^https$/, error: HTTPS_ORIGIN })
        .check(z.refine((url) => /^https:\/\/[^/?#]+\/?$/.test(url), HTTPS_ORIGIN)),
    ),
    /** Longest wait from a connection's start to a complete request head (slow clients get 408). */
    DMT_HEADERS_TIMEOUT_MS: wholeNumberIn(100, 300_000, 20_000),
    /** Most connections one client address may hold open at once. */
    DMT_MAX_CONNECTIONS_PER_CLIENT: wholeNumberIn(1, 100_000, 256),
    /** How long a key lookup is cached: the revocation delay. */
    DMT_KEY_CACHE_MS: wholeNumberIn(0, 60_000, 5000),
    DMT_LOG_LEVEL: z._default(oneOf(LOG_LEVELS), "info"),
    /** Use an existing DynamoDB endpoint instead of starting the embedded one. */
    DMT_DYNAMODB_ENDPOINT: z.optional(httpUrl),
    /** Vendor upstreams (origin plus optional base path) and managed keys; see vendorSettings. */
    DMT_UPSTREAM_GROQ: upstreamUrl,
    DMT_UPSTREAM_OPENAI: upstreamUrl,
    DMT_UPSTREAM_ANTHROPIC: upstreamUrl,
    DMT_UPSTREAM_GEMINI: upstreamUrl,
    GROQ_API_KEY: optionalText,
    OPENAI_API_KEY: optionalText,
    ANTHROPIC_API_KEY: optionalText,
    GEMINI_API_KEY: optionalText,
    DMT_UPSTREAM_CONNECT_TIMEOUT_MS: wholeNumberIn(1, 120_000, 10_000),
    /** Longest wait for a vendor's first byte and between two chunks (reasoning models think for minutes). */
    DMT_UPSTREAM_IDLE_TIMEOUT_MS: wholeNumberIn(1, 900_000, 600_000),
    /** Credits, rate limits and idempotency; `off` relays unmetered (benchmarks measure the difference). */
    DMT_METERING: z._default(oneOf(["on", "off"]), "on"),
    /** One line per request on stdout (method, path without query, status, duration, transaction id). */
    DMT_ACCESS_LOG: z._default(oneOf(["on", "off"]), "on"),
    /** How often queued interaction records are written to Parquet (and become queryable). */
    DMT_WAREHOUSE_FLUSH_MS: wholeNumberIn(50, 5000, 2000),
    /** How long a credit hold lasts before the sweeper may release it: longer than any call. */
    DMT_HOLD_TTL_MS: wholeNumberIn(1000, 86_400_000, 3_600_000),
    /** How often expired holds are swept. */
    DMT_SWEEP_INTERVAL_MS: wholeNumberIn(100, 3_600_000, 60_000),
    /** Price override (a JSON file or inline JSON) and markup factor; see prices/README.md. */
    DMT_PRICES_OVERRIDE: optionalText,
    DMT_PRICE_MARKUP: optionalText,
    /** OpenTelemetry export (OTEL_EXPORTER_OTLP_ENDPOINT...): see docs/telemetry.md. */
    ...OTLP_VARIABLES,
    /** Billing exports: the Stripe key and the OpenMeter endpoint (docs/billing-exports.md). */
    ...METER_ENV,
    /**
     * Credits bought through Stripe (docs/billing.md): with DMT_STRIPE_SECRET_KEY (METER_ENV's, the
     * same key) the webhook secret turns payments on; DMT_STRIPE_API_URL points the SDK elsewhere.
     */
    DMT_STRIPE_WEBHOOK_SECRET: optionalText,
    DMT_STRIPE_AMOUNTS_USD: z._default(text, "10,25,100"),
    DMT_STRIPE_DEPLOYMENT: z._default(text, "local"),
  })
  .check(
    z.refine((env) => (env.DMT_TLS_CERT === undefined) === (env.DMT_TLS_KEY === undefined), {
      message: "set both DMT_TLS_CERT and DMT_TLS_KEY, or neither",
      path: ["DMT_TLS_CERT"],
    }),
    z.refine(
      (env) => env.DMT_STRIPE_WEBHOOK_SECRET === undefined || env.DMT_STRIPE_SECRET_KEY !== undefined,
      {
        message: "DMT_STRIPE_WEBHOOK_SECRET needs DMT_STRIPE_SECRET_KEY too",
        path: ["DMT_STRIPE_WEBHOOK_SECRET"],
      },
    ),
  );

export type LocalConfig = z.infer<typeof schema> & { dataDir: string };

export function parseLocalConfig(env: Record<string, string | undefined> = process.env): LocalConfig {
  const parsed = parseEnv(schema, env);
  return { ...parsed, dataDir: resolve(parsed.DMT_DATA_DIR) };
}

/** The Stripe settings of the local server, or none (payments not configured). */
export function localStripeSettings(config: LocalConfig): StripeSettings | undefined {
  if (config.DMT_STRIPE_SECRET_KEY === undefined || config.DMT_STRIPE_WEBHOOK_SECRET === undefined)
    return undefined;
  return {
    secretKey: config.DMT_STRIPE_SECRET_KEY,
    webhookSecret: config.DMT_STRIPE_WEBHOOK_SECRET,
    amountsMicros: parseAmounts(config.DMT_STRIPE_AMOUNTS_USD),
    deployment: config.DMT_STRIPE_DEPLOYMENT,
    ...(config.DMT_STRIPE_API_URL !== undefined && { apiUrl: config.DMT_STRIPE_API_URL }),
  };
}

/**
 * One vendor's upstream settings. A vendor with neither a key nor an upstream of its own is answered by
 * the built-in simulator; setting its key (`OPENAI_API_KEY`...) makes it real.
 */
export function vendorSettings(
  config: LocalConfig,
  vendor: VendorName,
): { upstream: string | undefined; apiKey: string | undefined; simulated: boolean } {
  const upstream = config[`DMT_UPSTREAM_${vendor.toUpperCase() as Uppercase<typeof vendor>}`];
  const apiKey = config[`${vendor.toUpperCase() as Uppercase<typeof vendor>}_API_KEY`];
  return { upstream, apiKey, simulated: upstream === undefined && apiKey === undefined };
}
