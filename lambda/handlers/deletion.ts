import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoExportSettings } from "../adapters/dynamodb/export-settings";
import { DynamoInteractionIndex } from "../adapters/dynamodb/interactions";
import { S3ObjectStore } from "../adapters/objectstore/s3";
import { type DeletionState, type DeletionTaskEvent, runDeletionStep } from "../core/deletion-steps";
import { jsonLogger } from "../core/logger";
import { S3WarehouseFiles } from "../deletion/files-s3";
import { ExportFilesPurger, QueryResultsPurger } from "../deletion/purgers";
import { AthenaDeletionQuery } from "../deletion/query-athena";
import { DynamoDeletionRequests } from "../deletion/requests-dynamodb";
import { createDeletionSteps } from "../deletion/steps";
import { DynamoTombstones } from "../deletion/tombstones-dynamodb";
import { parseDeletionStepsConfig } from "./deletion-config";
import { createSecretsClient, secretUserIdHasher } from "./secrets";
import { createAthenaClient, createS3Client } from "./warehouse";

/**
 * Every task of the deletion state machine (lib/deletion.ts): the payload names the step
 * (`{"step": "find", "state": {...}}`), the same handlers the local runner calls. An error's `name`
 * becomes the Step Functions error the state machine's retriers and catchers match.
 */
const config = parseDeletionStepsConfig(process.env);
const db = createDynamoClient(config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {});
const s3 = createS3Client(config.DMT_S3_ENDPOINT);

const steps = createDeletionSteps({
  requests: new DynamoDeletionRequests(db, config.DMT_TABLE_DELETIONREQUESTS),
  tombstones: new DynamoTombstones(db, config.DMT_TABLE_DELETIONTOMBSTONES),
  query: new AthenaDeletionQuery(createAthenaClient(config.DMT_ATHENA_ENDPOINT), {
    workGroup: config.DMT_ATHENA_WORKGROUP,
    database: config.DMT_WAREHOUSE_DATABASE,
    table: config.DMT_WAREHOUSE_TABLE,
    bucket: config.DMT_WAREHOUSE_BUCKET,
  }),
  files: new S3WarehouseFiles(s3, config.DMT_WAREHOUSE_BUCKET),
  purgers: [
    new ExportFilesPurger(new DynamoExportSettings(db, config.DMT_TABLE_PROJECTSETTINGS), (destination) => {
      // DynamoExportSettings stores s3:// destinations only.
      if (destination.kind !== "s3") throw new Error(`export destination ${destination.url} is not s3://`);
      return new S3ObjectStore(s3, destination.bucket);
    }),
    new QueryResultsPurger(new S3ObjectStore(s3, config.DMT_ATHENA_RESULTS_BUCKET)),
    // The dashboard's interactions index and its rollups.
    new DynamoInteractionIndex(db, {
      interactions: config.DMT_TABLE_INTERACTIONS,
      usageRollups: config.DMT_TABLE_USAGEROLLUPS,
    }),
  ],
  userIds: secretUserIdHasher(
    createSecretsClient(config.DMT_SECRETS_ENDPOINT),
    config.DMT_USER_ID_KEY_SECRET_ARN,
    jsonLogger(config.DMT_LOG_LEVEL),
  ),
  logger: jsonLogger(config.DMT_LOG_LEVEL),
});

export const handler = (event: DeletionTaskEvent): Promise<DeletionState | null> =>
  runDeletionStep(steps, event);
