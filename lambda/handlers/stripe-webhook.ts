import { handle } from "hono/aws-lambda";
import { stripeWebhookRoutes } from "../app/data-api/stripe-webhook";
import { mountRoutes } from "../app/routing";
import { appShell } from "../app/shell";
import { errors } from "../core/errors";
import { awsHost } from "./runtime/aws";
import { parseStoreConfig, parseStripeConfig } from "./runtime/config";
import { awsBilling, stripeEventsPublisher } from "./runtime/stripe";
import { withTelemetry } from "./runtime/telemetry";

/**
 * `POST /stripe/webhook` in AWS (docs/billing.md): the data API's route, on its own path of the REST
 * API without the authorizer, in a function of its own so that the official Stripe SDK stays out of the
 * data API's bundle. The `Stripe-Signature` header is the only credential; the webhook secret and the
 * key are read from Secrets Manager (runtime/stripe.ts). While either is empty: 404
 * `payments_not_configured`. A grant raises `credits.granted` on the stack's bus, as locally.
 */
parseStoreConfig(process.env);
const aws = awsHost(process.env, "stripe-webhook");
const billing = awsBilling(aws, parseStripeConfig(process.env), stripeEventsPublisher(process.env));

const app = appShell(aws.logger);
mountRoutes(
  app,
  stripeWebhookRoutes(async (payload, signature) => {
    const current = await billing();
    if (!current) throw errors.paymentsNotConfigured();
    return current.payments.handleWebhook(payload, signature);
  }),
);

export const handler = withTelemetry(aws.telemetry, handle(app));
