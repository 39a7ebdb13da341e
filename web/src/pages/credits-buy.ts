import type { CreditPurchaseOffer } from "../api";
import { h } from "../dom";
import { loadInto, type PageContext } from "./page";

/**
 * Buy credits (docs/billing.md): the amounts the operator offers, each a button that opens a Stripe
 * Checkout session and goes there; Stripe sends the buyer back to this page. Without Stripe settings
 * the card says so. Viewers get 403 from the API.
 */
export function buySection(ctx: PageContext): HTMLElement {
  const body = h("div", { class: "buy-body" });
  const section = h(
    "section",
    { class: "card", "data-testid": "buy-credits" },
    h("h2", { class: "card-title" }, "Buy credits"),
    body,
  );
  const back = new URLSearchParams(location.search).get("checkout");
  loadInto(
    body,
    { loading: "Loading…", failed: "Buying credits" },
    () => ctx.api.purchaseOffer(ctx.project.projectId),
    (offer: CreditPurchaseOffer) => {
      if (!offer.configured) return h("p", { class: "muted" }, "Payments are not set up on this deployment.");
      const status = h(
        "p",
        { role: "status" },
        back === "done"
          ? "Payment received: the credits appear once Stripe confirms it."
          : back === "cancelled"
            ? "Checkout cancelled: nothing was charged."
            : "",
      );
      const buttons = offer.amounts_usd.map((usd) => {
        const button = h("button", { type: "button", class: "button", "data-usd": usd }, `Buy $${usd}`);
        button.addEventListener("click", async () => {
          button.setAttribute("disabled", "");
          try {
            const session = await ctx.api.checkout(
              ctx.project.projectId,
              usd,
              `${location.origin}/dashboard/credits`,
            );
            location.assign(session.url);
          } catch (err) {
            status.textContent = err instanceof Error ? err.message : String(err);
            button.removeAttribute("disabled");
          }
        });
        return button;
      });
      // The auto-recharge rule has its own card (credits-recharge.ts).
      return [h("div", { class: "buy-amounts" }, ...buttons), status];
    },
  );
  return section;
}
