import { handle } from "hono/aws-lambda";
import { createRemoteJWKSet } from "jose";
// zod/mini, as in config.ts: the full build adds ~450 KB to the bundle.
import * as z from "zod/mini";
import { DynamoBudgets } from "../adapters/dynamodb/budgets";
import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoCredits } from "../adapters/dynamodb/credits";
import { DynamoExportSettings } from "../adapters/dynamodb/export-settings";
import { DynamoInteractionIndex } from "../adapters/dynamodb/interactions";
import { DynamoMemberStore } from "../adapters/dynamodb/members";
import { DynamoProjectTiers } from "../adapters/dynamodb/project-tier";
import { DynamoStore } from "../adapters/dynamodb/store";
import { DynamoVendorKeys } from "../adapters/dynamodb/vendor-keys";
import { AthenaWarehouseQuery } from "../adapters/query/athena";
import { createKmsClient, KmsKeyWrapper } from "../adapters/secrets/kms";
import { createDashboardApp } from "../app/dashboard";
import { tokenVerifier } from "../app/dashboard-auth";
import { catalogueModels } from "../app/prices";
import { jsonLogger } from "../core/logger";
import { DynamoDeletionRequests } from "../deletion/requests-dynamodb";
import { parseDataApiConfig, parseMeteringConfig } from "./config";
import { createAthenaClient } from "./warehouse";

/** Longest wait for an export download's Athena query: inside the HTTP API's 30 s, as for the data API. */
const ATHENA_TIMEOUT_MS = 20_000;

/** Who issues the dashboard's access tokens (the Cognito user pool) and to which client. */
const identity = z.object({
  DMT_DASHBOARD_ISSUER: z.url({ protocol: /^https?$/ }),
  DMT_DASHBOARD_CLIENT_ID: z.string().check(z.minLength(1)),
});

function parseIdentity(env: Record<string, string | undefined>): z.infer<typeof identity> {
  const parsed = identity.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`Invalid configuration: ${issue?.path.join(".")}: ${issue?.message}`);
  }
  return parsed.data;
}

/**
 * The dashboard API (`/dashboard/api/...`) behind the HTTP API's JWT authorizer: the same app as
 * locally, over DynamoDB, KMS for the BYOK keys it stores (as the proxy functions, which unwrap them),
 * Athena for export downloads, the deletion requests table (its stream starts the workflow, so no
 * starter here), and Cognito's keys for its own token check (the authorizer has checked
 * the token already; the app checks it again and reads the groups).
 */
// The store and BYOK settings are the proxy's metering ones (its hold TTL is not used here).
const config = { ...parseMeteringConfig(process.env), ...parseDataApiConfig(process.env) };
const { DMT_DASHBOARD_ISSUER: issuer, DMT_DASHBOARD_CLIENT_ID: clientId } = parseIdentity(process.env);
const logger = jsonLogger(config.DMT_LOG_LEVEL);
const db = createDynamoClient(config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {});
const members = new DynamoMemberStore(db, config.tables);
const interactions = new DynamoInteractionIndex(db, config.tables);

export const handler = handle(
  createDashboardApp({
    store: new DynamoStore(db, config.tables),
    members,
    requests: members,
    credits: new DynamoCredits(db, config.tables),
    vendorKeys: new DynamoVendorKeys(
      db,
      config.tables,
      new KmsKeyWrapper(
        createKmsClient(config.DMT_KMS_ENDPOINT ? { endpoint: config.DMT_KMS_ENDPOINT } : {}),
        config.DMT_BYOK_KEY_ARN,
      ),
    ),
    verifyToken: tokenVerifier({
      issuer,
      clientId,
      keys: createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`)),
    }),
    logger,
    interactions: { interactions, usage: interactions.rollups },
    settings: {
      exportSettings: new DynamoExportSettings(db, config.DMT_TABLE_PROJECTSETTINGS),
      tiers: new DynamoProjectTiers(db, config.tables),
      warehouse: new AthenaWarehouseQuery(createAthenaClient(config.DMT_ATHENA_ENDPOINT), {
        workGroup: config.DMT_ATHENA_WORKGROUP,
        database: config.DMT_WAREHOUSE_DATABASE,
        table: config.DMT_WAREHOUSE_TABLE,
        timeoutMs: ATHENA_TIMEOUT_MS,
      }),
    },
    deletion: { requests: new DynamoDeletionRequests(db, config.tables.deletionRequests) },
    budgets: { store: new DynamoBudgets(db, config.tables), catalogueModels: catalogueModels() },
  }),
);
