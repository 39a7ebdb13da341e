import { composeKeyAuth } from "../compose/authorizer";
import { createAuthorizer } from "./runtime/authorizer-event";
import { awsHost } from "./runtime/aws";
import { parseStoreConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/** The API Gateway REQUEST authorizer: the service key of each call (runtime/authorizer-event.ts). */
const config = parseStoreConfig(process.env);
const aws = awsHost(process.env, "authorizer");
const { keys, usage } = composeKeyAuth(aws, config.DMT_KEY_CACHE_MS);

export const handler = withTelemetry(
  aws.telemetry,
  createAuthorizer({ keys, usage, logger: aws.logger, clock: aws.clock }),
);
