import { resolve } from "node:path";
import { z } from "zod";
import { LOG_LEVELS } from "../core/logger";
import type { VendorName } from "../core/vendor-names";

const upstreamUrl = z.url({ protocol: /^https?$/ }).optional();

/** Local configuration, parsed once at start; a bad value fails naming its variable. */
const schema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8787),
    HOST: z.string().min(1).default("127.0.0.1"),
    DMT_DATA_DIR: z.string().min(1).default(".dmt"),
    DMT_TLS_CERT: z.string().min(1).optional(),
    DMT_TLS_KEY: z.string().min(1).optional(),
    /** The HTTPS origin clients use; plain HTTP is redirected there (default: the listening host and port). */
    DMT_PUBLIC_URL: z
      .url({ protocol: /^https$/ })
      .refine((url) => /^https:\/\/[^/?#]+\/?$/.test(url), "must be an https origin, with no path or query")
      .optional(),
    /** Longest wait from a connection's start to a complete request head (slow clients get 408). */
    DMT_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(20_000),
    /** Most connections one client address may hold open at once. */
    DMT_MAX_CONNECTIONS_PER_CLIENT: z.coerce.number().int().min(1).max(100_000).default(256),
    /** How long a key lookup is cached: the revocation delay. */
    DMT_KEY_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(5000),
    DMT_LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
    /** Use an existing DynamoDB endpoint instead of starting the embedded one. */
    DMT_DYNAMODB_ENDPOINT: z.url().optional(),
    /** Vendor upstreams (origin plus optional base path) and managed keys; see vendorSettings. */
    DMT_UPSTREAM_GROQ: upstreamUrl,
    DMT_UPSTREAM_OPENAI: upstreamUrl,
    DMT_UPSTREAM_ANTHROPIC: upstreamUrl,
    DMT_UPSTREAM_GEMINI: upstreamUrl,
    GROQ_API_KEY: z.string().min(1).optional(),
    OPENAI_API_KEY: z.string().min(1).optional(),
    ANTHROPIC_API_KEY: z.string().min(1).optional(),
    GEMINI_API_KEY: z.string().min(1).optional(),
    DMT_UPSTREAM_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(1).max(120_000).default(10_000),
    /** Longest wait for a vendor's first byte and between two chunks (reasoning models think for minutes). */
    DMT_UPSTREAM_IDLE_TIMEOUT_MS: z.coerce.number().int().min(1).max(900_000).default(600_000),
    /** Credits, rate limits and idempotency; `off` relays unmetered (benchmarks measure the difference). */
    DMT_METERING: z.enum(["on", "off"]).default("on"),
    /** How often queued interaction records are written to Parquet (and become queryable). */
    DMT_WAREHOUSE_FLUSH_MS: z.coerce.number().int().min(50).max(5000).default(2000),
    /** How long a credit hold lasts before the sweeper may release it: longer than any call. */
    DMT_HOLD_TTL_MS: z.coerce.number().int().min(1000).max(86_400_000).default(3_600_000),
    /** How often expired holds are swept. */
    DMT_SWEEP_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
    /** Price override (a JSON file or inline JSON) and markup factor; see prices/README.md. */
    DMT_PRICES_OVERRIDE: z.string().min(1).optional(),
    DMT_PRICE_MARKUP: z.string().min(1).optional(),
  })
  .refine((env) => (env.DMT_TLS_CERT === undefined) === (env.DMT_TLS_KEY === undefined), {
    message: "set both DMT_TLS_CERT and DMT_TLS_KEY, or neither",
    path: ["DMT_TLS_CERT"],
  });

export type LocalConfig = z.infer<typeof schema> & { dataDir: string };

export function parseLocalConfig(env: Record<string, string | undefined> = process.env): LocalConfig {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`Invalid configuration: ${issue?.path.join(".")}: ${issue?.message}`);
  }
  return { ...parsed.data, dataDir: resolve(parsed.data.DMT_DATA_DIR) };
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
