import { handle } from "hono/aws-lambda";
import { composeDataApi } from "../compose/data-api";
import { authorizerAuth } from "./runtime/authorizer-context";
import { athenaExports, awsHost, s3Destinations } from "./runtime/aws";
import { parseDataApiConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The data API (`/api/v1/...`) behind API Gateway, auth from the authorizer: exports query the
 * warehouse through Athena and, for a project with a bucket destination, are written to that `s3://`
 * bucket (which the stack must let this function write to: docs/aws.md). Deletion requests are stored
 * in DynamoDB, whose stream starts the deletion workflow.
 */
const config = parseDataApiConfig(process.env);
const aws = awsHost(process.env, "data-api");
const exports = { ...athenaExports(config), openDestination: s3Destinations(config.DMT_S3_ENDPOINT) };
const app = composeDataApi({ ...aws, ...exports }, { auth: authorizerAuth, rateLimited: true });

export const handler = withTelemetry(aws.telemetry, handle(app));
