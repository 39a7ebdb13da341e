import { StripeProvider } from "../adapters/stripe/provider";
import { Payments } from "../billing/payments";
import type { EventPublisher } from "../core/cloudevent";
import type { StripeSettings } from "../core/payments";
import type { Infrastructure } from "./infrastructure";

/**
 * Credits bought through Stripe (docs/billing.md): the use case over the store and Stripe's SDK. No
 * settings, no payments: the routes answer that payments are not configured.
 */
export function composePayments(
  infra: Pick<Infrastructure, "store" | "logger" | "clock">,
  settings: StripeSettings | undefined,
  events?: { publisher?: EventPublisher; afterGrant?: (projectId: string) => Promise<void> },
): Payments | undefined {
  if (!settings) return undefined;
  return new Payments({
    provider: new StripeProvider(settings),
    payments: infra.store.payments,
    credits: infra.store.credits,
    projects: infra.store.keys,
    settings,
    ...(events?.publisher && { events: events.publisher }),
    ...(events?.afterGrant && { afterGrant: events.afterGrant }),
    logger: infra.logger,
    clock: infra.clock,
  });
}
