import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoDeletionRequests } from "../adapters/dynamodb/deletion-requests";
import type { DeletionRouteDeps } from "../app/data-api/deletion";
import type { Logger } from "../core/logger";
import { parseDeletionRoutesConfig } from "./runtime/deletion-config";

/**
 * The data API's deletion routes in AWS (`createDataApp({ ..., deletion: deletionRoutesFromEnv(...) })`
 * in api.ts): requests are written to DynamoDB, whose stream starts the state machine, so there is no
 * starter here.
 */
export function deletionRoutesFromEnv(
  env: Record<string, string | undefined>,
  logger: Logger,
): DeletionRouteDeps {
  const config = parseDeletionRoutesConfig(env);
  const db = createDynamoClient(
    config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {},
  );
  return { requests: new DynamoDeletionRequests(db, config.DMT_TABLE_DELETIONREQUESTS), logger };
}
