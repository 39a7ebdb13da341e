import { handle } from "hono/aws-lambda";
import { createRemoteJWKSet } from "jose";
import { activePriceCatalogue } from "../adapters/fs/price-catalogue";
import { undiciWebhookSender } from "../adapters/undici/webhook-sender";
import { tokenVerifier } from "../app/dashboard/auth";
import { composeDashboardApi } from "../compose/dashboard-api";
import { composeEvents } from "../compose/events";
import { athenaExports, awsHost, eventBridgePublisher, kmsKeyWrapper, sqsDeliveryQueue } from "./runtime/aws";
import { parseDashboardConfig, parseEventsConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The dashboard API (`/dashboard/api/...`) behind the HTTP API's JWT authorizer: over DynamoDB, KMS
 * for the BYOK keys it stores (as the proxy functions, which unwrap them), Athena for export downloads,
 * the deletion requests table (its stream starts the workflow, so no starter here), and Cognito's keys
 * for its own token check (the authorizer has checked the token already; the app checks it again and
 * reads the groups).
 */
const config = parseDashboardConfig(process.env);
const { DMT_DASHBOARD_ISSUER: issuer, DMT_DASHBOARD_CLIENT_ID: clientId } = config;
const aws = awsHost(process.env, "dashboard", { keyWrapper: kmsKeyWrapper(config) });
// Settings -> Alerts and Webhooks: the rules, the webhooks (secrets under the BYOK key, as the
// delivery function reads them), tests and resends sent from here; retries go to the delivery queue.
const eventsConfig = parseEventsConfig(process.env);
const events = composeEvents({
  db: aws.store.db,
  tables: eventsConfig.tables,
  wrapper: kmsKeyWrapper(eventsConfig)(),
  queue: sqsDeliveryQueue(eventsConfig),
  sender: undiciWebhookSender({ policy: "public", timeoutMs: 10_000 }),
  // key.created, key.revoked, credits.granted.
  publisher: eventBridgePublisher(eventsConfig),
  credits: aws.store.credits,
  logger: aws.logger,
  clock: aws.clock,
});
const app = composeDashboardApi(
  { ...aws, ...athenaExports(config) },
  {
    verifyToken: tokenVerifier({
      issuer,
      clientId,
      keys: createRemoteJWKSet(new URL(`${issuer}/.well-known/jwks.json`)),
    }),
    prices: activePriceCatalogue(process.env),
    events: events.publisher,
    alerting: {
      rules: events.rules,
      cached: events.cachedRules,
      alerts: events.alerts,
      webhooks: events.webhooks,
      log: events.log,
      deliveries: events.deliveries,
      policy: "public",
    },
  },
);

export const handler = withTelemetry(aws.telemetry, handle(app));
