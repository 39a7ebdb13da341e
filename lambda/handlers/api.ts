import type { Context as LambdaContext } from "aws-lambda";
import { composeDataApi } from "../compose/data-api";
import { authorizerAuth } from "./runtime/authorizer-context";
import {
  athenaExports,
  awsHost,
  DATA_API_STREAM_MINUTES,
  STREAMING_ATHENA_TIMEOUT_MS,
  s3Destinations,
} from "./runtime/aws";
import { parseDataApiConfig } from "./runtime/config";
import { streamingDataApi } from "./runtime/data-api-stream";

/**
 * The data API (`/api/v1/...`) behind API Gateway's streaming Lambda proxy integration (15 minutes),
 * auth from the authorizer: exports query the warehouse through Athena and stream as the results are
 * paged, or, for a project with a bucket destination, are written to that `s3://` bucket (which the
 * stack must let this function write to: docs/aws.md). Deletion requests are stored in DynamoDB,
 * whose stream starts the deletion workflow.
 */
const config = parseDataApiConfig(process.env);
const aws = awsHost(process.env, "data-api");
const exports = {
  ...athenaExports(config, STREAMING_ATHENA_TIMEOUT_MS),
  openDestination: s3Destinations(config.DMT_S3_ENDPOINT),
};
export const app = composeDataApi(
  { ...aws, ...exports },
  {
    auth: authorizerAuth,
    rateLimited: true,
    exportTimeLimit: {
      minutes: DATA_API_STREAM_MINUTES,
      // hono's Lambda adapter passes the invocation's context in the bindings.
      timeLeftMs: (c) => (c.env as { context?: LambdaContext }).context?.getRemainingTimeInMillis(),
    },
  },
);

export const handler = awslambda.streamifyResponse(
  streamingDataApi(app, { logger: aws.logger, telemetry: aws.telemetry }),
);
