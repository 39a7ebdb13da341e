// zod/mini, not zod: the full build adds ~450 KB to every bundle, the mini one ~20 KB.
import * as z from "zod/mini";
import { TABLES, type TableNames, tableNames } from "../adapters/dynamodb/tables";
import { LOG_LEVELS } from "../core/logger";
import { VENDOR_NAMES } from "../vendors/types";

/** Lambda configuration, parsed once at cold start; a bad or missing value fails naming its variable. */
const base = z.object({
  DMT_LOG_LEVEL: z._default(z.enum(LOG_LEVELS), "info"),
});

const tableVariables = Object.fromEntries(
  Object.keys(TABLES).map((name) => [`DMT_TABLE_${name.toUpperCase()}`, z.string().check(z.minLength(1))]),
);

const store = z.extend(base, {
  ...tableVariables,
  /** How long a key lookup is cached in a warm container: the revocation delay in AWS. */
  DMT_KEY_CACHE_MS: z._default(z.coerce.number().check(z.minimum(0), z.maximum(60_000)), 5000),
  /** Another DynamoDB endpoint (tests point this at dynalite); unset in AWS. */
  DMT_DYNAMODB_ENDPOINT: z.optional(z.url()),
});

const text = z.string().check(z.minLength(1));
const httpUrl = z.url({ protocol: /^https?$/ });

const proxy = z.extend(base, {
  /** The vendor this function serves: every proxy function runs the same bundle. */
  DMT_VENDOR: z.enum(VENDOR_NAMES),
  /** Secrets Manager secrets (ARNs): the managed vendor key, and the origin secret API Gateway sends. */
  DMT_VENDOR_KEY_SECRET_ARN: text,
  DMT_ORIGIN_SECRET_ARN: text,
  /** How long a container keeps secret values before reading them again. */
  DMT_SECRET_CACHE_MS: z._default(z.coerce.number().check(z.minimum(0), z.maximum(3_600_000)), 300_000),
  /** Another Secrets Manager endpoint (tests); unset in AWS. */
  DMT_SECRETS_ENDPOINT: z.optional(httpUrl),
  /** Another upstream than the vendor's own (origin plus base path); unset in AWS. */
  DMT_UPSTREAM_URL: z.optional(httpUrl),
  DMT_UPSTREAM_CONNECT_TIMEOUT_MS: z._default(
    z.coerce.number().check(z.minimum(1), z.maximum(120_000)),
    10_000,
  ),
  /** Longest wait for a vendor's first byte and between two chunks (the function may run 15 minutes). */
  DMT_UPSTREAM_IDLE_TIMEOUT_MS: z._default(
    z.coerce.number().check(z.minimum(1), z.maximum(900_000)),
    600_000,
  ),
});

export type BaseConfig = z.infer<typeof base>;
export type StoreConfig = z.infer<typeof store> & { tables: TableNames };
export type ProxyConfig = z.infer<typeof proxy>;

function parse<T extends z.ZodMiniType>(schema: T, env: Record<string, string | undefined>): z.infer<T> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`Invalid configuration: ${issue?.path.join(".")}: ${issue?.message}`);
  }
  return parsed.data;
}

export function parseBaseConfig(env: Record<string, string | undefined>): BaseConfig {
  return parse(base, env);
}

/** For functions that use the store: every `DMT_TABLE_<NAME>` must be set (CDK sets them all). */
export function parseStoreConfig(env: Record<string, string | undefined>): StoreConfig {
  return { ...parse(store, env), tables: tableNames(env) };
}

/** For the proxy functions (`lambda/handlers/proxy.ts`). */
export function parseProxyConfig(env: Record<string, string | undefined>): ProxyConfig {
  return parse(proxy, env);
}
