import { resolve } from "node:path";
import { z } from "zod";
import { LOG_LEVELS } from "../core/logger";

/** Local configuration, parsed once at start; a bad value fails naming its variable. */
const schema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8787),
    HOST: z.string().min(1).default("127.0.0.1"),
    DMT_DATA_DIR: z.string().min(1).default(".dmt"),
    DMT_TLS_CERT: z.string().min(1).optional(),
    DMT_TLS_KEY: z.string().min(1).optional(),
    /** How long a key lookup is cached: the revocation delay. */
    DMT_KEY_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(5000),
    DMT_LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
    /** Use an existing DynamoDB endpoint instead of starting the embedded one. */
    DMT_DYNAMODB_ENDPOINT: z.url().optional(),
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
