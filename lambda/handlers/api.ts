import type { Context } from "aws-lambda";
import type { MiddlewareHandler } from "hono";
import { handle } from "hono/aws-lambda";
import { DynamoBudgets } from "../adapters/dynamodb/budgets";
import { createDynamoClient } from "../adapters/dynamodb/client";
import { DynamoExportSettings } from "../adapters/dynamodb/export-settings";
import { DynamoRateLimiter } from "../adapters/dynamodb/rate-limit";
import { S3ObjectStore } from "../adapters/objectstore/s3";
import { AthenaWarehouseQuery } from "../adapters/query/athena";
import { createDataApp } from "../app/data-api";
import type { AppEnv } from "../app/env";
import { rateLimitMiddleware } from "../app/metering-rate-limit";
import { ApiError } from "../core/errors";
import { authorizerAuth } from "./authorizer-context";
import { parseDataApiConfig } from "./config";
import { deletionRoutesFromEnv } from "./deletion-routes";
import { lambdaTelemetry, MetricUnit } from "./telemetry";
import { createAthenaClient, createS3Client } from "./warehouse";

/**
 * Longest wait for an export's Athena query before it is stopped: inside API Gateway's 29 s, leaving
 * time to read the results and answer.
 */
const ATHENA_TIMEOUT_MS = 20_000;

/**
 * The data API (`/api/v1/...`) behind API Gateway: the same app as locally, auth from the authorizer;
 * exports query the warehouse through Athena and, for a project with a bucket destination, are written
 * to that `s3://` bucket (which the stack must let this function write to: docs/aws.md). Deletion
 * requests are stored in DynamoDB, whose stream starts the deletion workflow.
 */
const config = parseDataApiConfig(process.env);
const telemetry = lambdaTelemetry(config, "data-api");
const logger = telemetry.logger;
const s3 = createS3Client(config.DMT_S3_ENDPOINT);
const db = createDynamoClient(config.DMT_DYNAMODB_ENDPOINT ? { endpoint: config.DMT_DYNAMODB_ENDPOINT } : {});

/** The per-key rate limit, the bucket the proxy functions take from too; refusals are counted. */
const limited = rateLimitMiddleware(new DynamoRateLimiter(db, { rateLimits: config.DMT_TABLE_RATELIMITS }));
const rateLimit: MiddlewareHandler<AppEnv> = async (c, next) => {
  try {
    await limited(c, next);
  } catch (err) {
    if (err instanceof ApiError && err.status === 429)
      telemetry.metrics.add("RateLimited", MetricUnit.Count, 1);
    throw err;
  }
};

const serve = handle(
  createDataApp({
    auth: authorizerAuth,
    rateLimit,
    logger,
    budgets: new DynamoBudgets(db, {
      budgets: config.DMT_TABLE_BUDGETS,
      budgetCounters: config.DMT_TABLE_BUDGETCOUNTERS,
    }),
    exports: {
      query: new AthenaWarehouseQuery(createAthenaClient(config.DMT_ATHENA_ENDPOINT), {
        workGroup: config.DMT_ATHENA_WORKGROUP,
        database: config.DMT_WAREHOUSE_DATABASE,
        table: config.DMT_WAREHOUSE_TABLE,
        timeoutMs: ATHENA_TIMEOUT_MS,
      }),
      settings: new DynamoExportSettings(db, config.DMT_TABLE_PROJECTSETTINGS),
      openDestination: (destination) => {
        // DynamoExportSettings stores s3:// destinations only.
        if (destination.kind !== "s3") throw new Error(`export destination ${destination.url} is not s3://`);
        return new S3ObjectStore(s3, destination.bucket);
      },
      logger,
    },
    deletion: deletionRoutesFromEnv(process.env, logger),
  }),
);

/** The context is optional, as in hono's own handler: Lambda always passes one. */
export async function handler(event: Parameters<typeof serve>[0], context?: Context) {
  if (context) telemetry.begin(context);
  try {
    return await serve(event, context);
  } finally {
    telemetry.end();
  }
}
