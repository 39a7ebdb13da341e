// zod/mini, not zod: the full build adds ~450 KB to every bundle, the mini one ~20 KB.
import * as z from "zod/mini";
import { TABLES, type TableNames, tableNames } from "../adapters/dynamodb/tables";
import { LOG_LEVELS } from "../core/logger";

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

export type BaseConfig = z.infer<typeof base>;
export type StoreConfig = z.infer<typeof store> & { tables: TableNames };

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
