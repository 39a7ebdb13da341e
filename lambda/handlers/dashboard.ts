import { handle } from "hono/aws-lambda";
import { createRemoteJWKSet } from "jose";
import { cognitoUserDirectory } from "../adapters/cognito/user-directory";
import { activePriceCatalogue } from "../adapters/fs/price-catalogue";
import { tokenVerifier } from "../app/dashboard/auth";
import { composeDashboardApi } from "../compose/dashboard-api";
import {
  athenaExports,
  awsHost,
  dashboardDownloads,
  eventBridgePublisher,
  kmsKeyWrapper,
} from "./runtime/aws";
import { awsWebhooks } from "./runtime/aws-webhooks";
import { parseDashboardConfig, parseEventsConfig, parseStripeConfig } from "./runtime/config";
import { awsBilling } from "./runtime/stripe";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The dashboard API (`/dashboard/api/...`) behind the HTTP API's JWT authorizer: over DynamoDB, KMS
 * for the BYOK keys it stores (as the proxy functions, which unwrap them), Athena for export downloads,
 * the deletion requests table (its stream starts the workflow, so no starter here), Cognito's keys
 * for its own token check, the results bucket for export downloads (presigned), and its user pool for the Members page's invitations (the authorizer has checked the token already; the app checks it again and
 * reads the groups). Settings -> Alerts and Webhooks: the webhooks' secrets under the BYOK key, as the
 * delivery function reads them; retries go to the delivery queue; events to the stack's bus. Buy
 * credits and auto-recharge rules through Stripe once its secrets are filled (docs/billing.md).
 */
const config = parseDashboardConfig(process.env);
const { DMT_DASHBOARD_ISSUER: issuer, DMT_DASHBOARD_CLIENT_ID: clientId } = config;
const eventsConfig = parseEventsConfig(process.env);
const aws = awsHost(process.env, "dashboard", { keyWrapper: kmsKeyWrapper(config) });
const events = eventBridgePublisher(eventsConfig);
// Buy credits and the auto-recharge rule: the Stripe secrets by ARN, read again every 5 minutes;
// while either is empty (or unnamed), the routes answer 404 payments_not_configured as locally.
const billing = awsBilling(aws, parseStripeConfig(process.env), events);
const app = composeDashboardApi(
  {
    ...aws,
    ...athenaExports(config),
    ...awsWebhooks(eventsConfig, aws.store.db),
    events,
  },
  {
    billing,
    ...(config.DMT_DASHBOARD_URL && { dashboardUrl: config.DMT_DASHBOARD_URL }),
    verifyToken: tokenVerifier({
      issuer,
      clientId,
      keys: createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`)),
    }),
    prices: activePriceCatalogue(process.env),
    webhookPolicy: "public",
    downloads: dashboardDownloads(config),
    ...(config.DMT_DASHBOARD_USER_POOL_ID && {
      directory: cognitoUserDirectory({
        userPoolId: config.DMT_DASHBOARD_USER_POOL_ID,
        region: process.env.AWS_REGION ?? "us-east-1",
        ...(config.DMT_COGNITO_ENDPOINT && { endpoint: config.DMT_COGNITO_ENDPOINT }),
      }),
    }),
  },
);

export const handler = withTelemetry(aws.telemetry, handle(app));
