import { checkoutRoutes } from "./checkout";
import { paymentRoutes } from "./payments";
import { type StandInOptions, type StripeStandIn, startStripeStandIn } from "./server";

export { completeCheckout } from "./checkout";
export { declineCard, loseDispute } from "./payments";
export * from "./server";
export { type StripeEvent, signedHeader } from "./webhooks";

/** The route modules dmt's credits use; a test adds others (meter events) beside them. */
export const creditRoutes = [checkoutRoutes, paymentRoutes];

/** The stand-in with the credit routes and any `extra` modules. */
export function startStripe(options: Partial<StandInOptions> = {}): Promise<StripeStandIn> {
  return startStripeStandIn({ ...options, modules: [...creditRoutes, ...(options.modules ?? [])] });
}
