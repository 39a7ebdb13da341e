import { z } from "zod";
import type { Payments } from "../../billing/payments";
import type { Recharges } from "../../billing/recharge";
import { decimalUsd, parseUsd } from "../../core/credits";
import { errors } from "../../core/errors";
import { readJsonObject } from "../body";
import type { RouteTable } from "../routing";
import { parseBody, projectOf } from "./requests";

const BODY_LIMIT = 16 * 1024;
const checkoutBody = z.strictObject({
  /** One of the offered amounts, in dollars as shown ("25"). */
  usd: z.string(),
  /** The dashboard page Stripe sends the admin back to; must be this dashboard's origin. */
  return_url: z.string(),
});
const rechargeBody = z.strictObject({
  /** When the charged balance falls below this many dollars... */
  threshold_usd: z.string(),
  /** ...this many are bought with the saved card; one of the offered amounts. */
  amount_usd: z.string(),
});

type PaymentParts = { payments: Payments; recharges: Recharges };

/**
 * Where the routes find payments: composed once (locally), or read per request (in AWS the Stripe
 * secrets are read from Secrets Manager and may still be empty: not configured until both are filled).
 */
export type BillingSource = PaymentParts | (() => Promise<PaymentParts | undefined>);

/**
 * Buy credits (Credits page): what may be bought, and a Stripe Checkout session for one amount.
 * Reading is for every member; buying changes the project, so viewers are refused by the membership
 * check before this (admins and owners buy). No Stripe settings: `configured: false`, and buying 404s.
 */
export function paymentRoutes(
  base: string,
  source: BillingSource | undefined,
  /** The dashboard's own address (`https://<distribution>/dashboard/` in AWS): Stripe sends the admin back only below it. */
  dashboardUrl?: string,
): RouteTable {
  const current = typeof source === "function" ? source : async () => source;
  return {
    [`${base}/credits/purchase`]: {
      GET: async (c) => {
        const payments = (await current())?.payments;
        if (!payments) return c.json({ configured: false, amounts_usd: [] });
        const profile = await payments.profile(projectOf(c));
        return c.json({
          configured: true,
          amounts_usd: payments.amountsMicros.map((micros) => decimalUsd(micros)),
          saved_card: profile?.customerId !== undefined,
          recharge: profile?.recharge
            ? {
                threshold_usd: decimalUsd(profile.recharge.thresholdMicros),
                amount_usd: decimalUsd(profile.recharge.amountMicros),
              }
            : null,
          last_recharge: profile?.lastRecharge ?? null,
        });
      },
    },
    [`${base}/credits/checkout`]: {
      POST: async (c) => {
        const payments = (await current())?.payments;
        if (!payments) throw errors.paymentsNotConfigured();
        const input = parseBody(checkoutBody, await readJsonObject(c, BODY_LIMIT));
        const micros = parseUsd(input.usd, "usd");
        let back: URL;
        try {
          back = new URL(input.return_url);
        } catch {
          throw errors.invalidField("return_url", "must be an absolute URL");
        }
        // Only back to this dashboard: never an open redirect through Stripe. Where its address is
        // known (AWS: the distribution) that is the one; else the origin the request came from.
        const home = dashboardUrl !== undefined ? new URL(dashboardUrl) : undefined;
        const origin = home?.origin ?? c.req.header("origin") ?? new URL(c.req.url).origin;
        if (back.origin !== origin || !back.pathname.startsWith(home?.pathname ?? "/dashboard")) {
          throw errors.invalidField("return_url", "must be a page of this dashboard");
        }
        const session = await payments.startCheckout(projectOf(c), micros, back.toString());
        return c.json({ session_id: session.sessionId, url: session.url }, 201);
      },
    },
    [`${base}/credits/recharge`]: {
      PUT: async (c) => {
        const billing = await current();
        if (!billing) throw errors.paymentsNotConfigured();
        const input = parseBody(rechargeBody, await readJsonObject(c, BODY_LIMIT));
        const thresholdMicros = parseUsd(input.threshold_usd, "threshold_usd");
        const amountMicros = parseUsd(input.amount_usd, "amount_usd");
        const profile = await billing.recharges.setRule(projectOf(c), { thresholdMicros, amountMicros });
        return c.json({
          recharge: { threshold_usd: input.threshold_usd, amount_usd: input.amount_usd },
          saved_card: profile.customerId !== undefined,
        });
      },
      DELETE: async (c) => {
        const billing = await current();
        if (!billing) throw errors.paymentsNotConfigured();
        await billing.recharges.setRule(projectOf(c), null);
        return c.json({ recharge: null });
      },
    },
  };
}
