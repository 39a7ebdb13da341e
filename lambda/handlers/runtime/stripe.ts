import { CachedSecret, createSecretsClient } from "../../adapters/secrets-manager/secrets";
import { composeAlerts } from "../../compose/alerts";
import type { Infrastructure } from "../../compose/infrastructure";
import { type Billing, composePayments } from "../../compose/payments";
import type { EventPublisher } from "../../core/cloudevent";
import { errorFields, type Logger } from "../../core/logger";
import { parseAmounts, type StripeSettings } from "../../core/payments";
import { eventBridgePublisher } from "./aws";
import { parseEventBusConfig } from "./config";

/**
 * The Stripe settings of a function in AWS (docs/billing.md): the secret key and the webhook secret
 * are Secrets Manager secrets (lib/payments.ts) named by ARN in the environment, never their values.
 * Both are created empty; until the operator fills both, payments are not configured. They are read
 * again after `STRIPE_SECRET_TTL_MS`, so a rolled key applies without a deploy.
 */
export interface StripeSecretConfig {
  DMT_STRIPE_SECRET_ARN?: string | undefined;
  DMT_STRIPE_WEBHOOK_SECRET_ARN?: string | undefined;
  DMT_STRIPE_AMOUNTS_USD?: string | undefined;
  DMT_STRIPE_DEPLOYMENT?: string | undefined;
  DMT_STRIPE_API_URL?: string | undefined;
  DMT_SECRETS_ENDPOINT?: string | undefined;
}

export const STRIPE_SECRET_TTL_MS = 5 * 60_000;

/** The settings as the secrets hold them now; `undefined` while either is empty or unset. */
export function awsStripeSettings(
  config: StripeSecretConfig,
  logger: Logger,
): () => Promise<StripeSettings | undefined> {
  const keyArn = config.DMT_STRIPE_SECRET_ARN;
  const webhookArn = config.DMT_STRIPE_WEBHOOK_SECRET_ARN;
  if (keyArn === undefined || webhookArn === undefined) return async () => undefined;
  const client = createSecretsClient(config.DMT_SECRETS_ENDPOINT);
  const key = new CachedSecret(client, keyArn, ["AWSCURRENT"], STRIPE_SECRET_TTL_MS, logger);
  const webhook = new CachedSecret(client, webhookArn, ["AWSCURRENT"], STRIPE_SECRET_TTL_MS, logger);
  // Checked at cold start: a bad list fails the function naming the variable, as other settings do.
  const amountsMicros = parseAmounts(config.DMT_STRIPE_AMOUNTS_USD ?? "10,25,100");
  const deployment = config.DMT_STRIPE_DEPLOYMENT ?? "aws";
  return async () => {
    const [[secretKey], [webhookSecret]] = await Promise.all([key.values(), webhook.values()]);
    if (!secretKey || !webhookSecret) return undefined;
    return {
      secretKey: secretKey.trim(),
      webhookSecret: webhookSecret.trim(),
      amountsMicros,
      deployment,
      ...(config.DMT_STRIPE_API_URL !== undefined && { apiUrl: config.DMT_STRIPE_API_URL }),
    };
  };
}

/**
 * Payments over the current secrets: composed again only when a secret's value changed. A secret that
 * cannot be read is logged (never its value) and rethrown: the webhook answers 500 and Stripe retries.
 */
export function awsBilling(
  infra: Pick<Infrastructure, "store" | "logger" | "clock">,
  config: StripeSecretConfig,
  /** The stack's bus: purchases, take-backs, failed recharges and low-balance alerts raise their events there. */
  events?: EventPublisher,
): () => Promise<Billing | undefined> {
  const settings = awsStripeSettings(config, infra.logger);
  // A purchase or a recharge re-checks the project's low-balance alert at once, as the local server
  // does: a balance back above re-arms it, one still below an armed rule fires balance.low on the bus.
  const alerts =
    events && composeAlerts({ events, logger: infra.logger, clock: infra.clock, store: infra.store }).alerts;
  const paymentEvents = events && {
    publisher: events,
    ...(alerts && { afterGrant: (projectId: string) => alerts.check(projectId) }),
  };
  let current: { settings: StripeSettings; billing: Billing } | undefined;
  return async () => {
    let now: StripeSettings | undefined;
    try {
      now = await settings();
    } catch (err) {
      infra.logger.error("the Stripe secrets could not be read", {
        ...errorFields(err),
        secret: "DMT_STRIPE_SECRET_ARN, DMT_STRIPE_WEBHOOK_SECRET_ARN",
      });
      throw err;
    }
    if (!now) return undefined;
    if (
      current?.settings.secretKey !== now.secretKey ||
      current.settings.webhookSecret !== now.webhookSecret
    ) {
      const billing = composePayments(infra, now, paymentEvents);
      if (!billing) return undefined;
      current = { settings: now, billing };
    }
    return current.billing;
  };
}

/**
 * The bus a function with the Stripe secrets publishes payments' events on (`credits.granted`,
 * `credits.recharge_failed`: docs/events.md), as the local server does. The stack
 * names the bus wherever it names the secrets; a function without the secrets publishes none.
 */
export function stripeEventsPublisher(env: Record<string, string | undefined>): EventPublisher | undefined {
  if (env.DMT_STRIPE_SECRET_ARN === undefined) return undefined;
  return eventBridgePublisher(parseEventBusConfig(env));
}
