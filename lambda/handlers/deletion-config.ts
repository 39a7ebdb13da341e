// zod/mini, as config.ts: the full build adds ~450 KB to a bundle.
import * as z from "zod/mini";
import { LOG_LEVELS } from "../core/logger";
import { parseEnv } from "./config";

const text = z.string().check(z.minLength(1));
const endpoint = z.optional(z.url({ protocol: /^https?$/ }));

/** The deletion step Lambda (lib/deletion.ts sets every variable). */
const steps = z.object({
  DMT_LOG_LEVEL: z._default(z.enum(LOG_LEVELS), "info"),
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
  /** The secret that keys the user-id hash of level `none`. */
  DMT_USER_ID_KEY_SECRET_ARN: text,
  DMT_SECRETS_ENDPOINT: endpoint,
  /** Other endpoints than AWS's own (tests); unset in AWS. */
  DMT_S3_ENDPOINT: endpoint,
  DMT_ATHENA_ENDPOINT: endpoint,
  DMT_DYNAMODB_ENDPOINT: endpoint,
});

/** What the data API needs to take deletion requests (`deletionRoutesFromEnv`). */
const routes = z.object({
  DMT_TABLE_DELETIONREQUESTS: text,
  DMT_DYNAMODB_ENDPOINT: endpoint,
});

export type DeletionStepsConfig = z.infer<typeof steps>;
export type DeletionRoutesConfig = z.infer<typeof routes>;

export const parseDeletionStepsConfig = (env: Record<string, string | undefined>) => parseEnv(steps, env);
export const parseDeletionRoutesConfig = (env: Record<string, string | undefined>) => parseEnv(routes, env);
