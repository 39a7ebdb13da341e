import { handle } from "hono/aws-lambda";
import { createDataApp } from "../app/data-api";
import { jsonLogger } from "../core/logger";
import { authorizerAuth } from "./authorizer-context";
import { parseBaseConfig } from "./config";

/** The data API (`/api/v1/...`) behind API Gateway: the same app as locally, auth from the authorizer. */
const config = parseBaseConfig(process.env);

export const handler = handle(
  createDataApp({ auth: authorizerAuth, logger: jsonLogger(config.DMT_LOG_LEVEL) }),
);
