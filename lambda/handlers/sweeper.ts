import { composeSweeper } from "../compose/sweeper";
import { awsHost } from "./runtime/aws";
import { parseStoreConfig, parseStripeConfig } from "./runtime/config";
import { awsBilling, stripeEventsPublisher } from "./runtime/stripe";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The credit sweeper, run every minute by an EventBridge schedule (lambda/compose/sweeper.ts), then
 * auto-recharge's crossing check once the Stripe secrets are filled (docs/billing.md).
 */
parseStoreConfig(process.env);
const aws = awsHost(process.env, "sweeper");

// Auto-recharge's check after each sweep, with the Stripe secrets read again every 5 minutes; a
// declined card raises credits.recharge_failed on the stack's bus, a recharge credits.granted.
const billing = awsBilling(aws, parseStripeConfig(process.env), stripeEventsPublisher(process.env));

export const handler = withTelemetry(aws.telemetry, async () => {
  // Unreadable secrets (logged) must not stop the sweep: holds are released all the same.
  const current = await billing().catch(() => undefined);
  return composeSweeper(aws, current)();
});
