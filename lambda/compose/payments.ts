import { StripeProvider } from "../adapters/stripe/provider";
import { Payments } from "../billing/payments";
import { Recharges } from "../billing/recharge";
import type { EventPublisher } from "../core/cloudevent";
import type { StripeSettings } from "../core/payments";
import type { Infrastructure } from "./infrastructure";

/** Purchases, refunds and auto-recharge, over one Stripe client. */
export interface Billing {
  payments: Payments;
  recharges: Recharges;
}

/**
 * Credits bought through Stripe (docs/billing.md): the use cases over the store and Stripe's SDK. No
 * settings, no payments: the routes answer that payments are not configured.
 */
export function composePayments(
  infra: Pick<Infrastructure, "store" | "logger" | "clock">,
  settings: StripeSettings | undefined,
  events?: { publisher?: EventPublisher; afterGrant?: (projectId: string) => Promise<void> },
): Billing | undefined {
  if (!settings) return undefined;
  const provider = new StripeProvider(settings);
  const payments = new Payments({
    provider,
    payments: infra.store.payments,
    credits: infra.store.credits,
    projects: infra.store.keys,
    settings,
    ...(events?.publisher && { events: events.publisher }),
    ...(events?.afterGrant && { afterGrant: events.afterGrant }),
    logger: infra.logger,
    clock: infra.clock,
  });
  const recharges = new Recharges({
    payments,
    store: infra.store.payments,
    credits: infra.store.credits,
    provider,
    deployment: settings.deployment,
    ...(events?.publisher && { events: events.publisher }),
    logger: infra.logger,
    clock: infra.clock,
  });
  return { payments, recharges };
}
