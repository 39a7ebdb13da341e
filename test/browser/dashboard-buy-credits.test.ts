import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { addDevMember, dashboardPage, launchBrowser, screenshotOnFailure, signIn } from "../support/browser";
import { startTestHost, type TestHost } from "../support/host";
import { type StripeStandIn, startStripe } from "../support/stripe";

/**
 * Buy credits on the Credits page, in a real browser, against the Stripe stand-in: an amount button
 * opens the stand-in's Checkout page, paying there comes back to Credits, and the balance and the
 * statement show the purchase. Screenshots go to $DMT_SHOTS when it is set.
 */

const PROJECT = "buy-demo";
const STEP_MS = 180_000;

let stripe: StripeStandIn;
let stack: TestHost;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  stripe = await startStripe();
  stack = await startTestHost({
    DMT_STRIPE_SECRET_KEY: stripe.secretKey,
    DMT_STRIPE_WEBHOOK_SECRET: stripe.webhookSecret,
    DMT_STRIPE_API_URL: stripe.url,
    DMT_STRIPE_AMOUNTS_USD: "10,25",
  });
  stripe.webhookUrl = `${stack.url}/stripe/webhook`;
  await stack.newKey({ projectId: PROJECT, name: "laptop" });
  await addDevMember(stack, PROJECT);
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await stripe?.close();
});

screenshotOnFailure(() => page, "buy-credits");

const shot = async (name: string) => {
  if (process.env.DMT_SHOTS)
    await page.screenshot({ path: `${process.env.DMT_SHOTS}/${name}.png`, fullPage: true });
};

describe.sequential("Buy credits", () => {
  it(
    "goes to Stripe Checkout for an offered amount and comes back with the credits on the statement",
    async () => {
      await page.goto(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      await page.selectOption("#project", PROJECT);
      await page.getByRole("link", { name: "Credits" }).click();
      const card = page.getByTestId("buy-credits");
      await card.getByRole("button", { name: "Buy $25.00" }).waitFor();
      await shot("buy-credits-offer");
      await card.getByRole("button", { name: "Buy $25.00" }).click();
      await page.waitForURL(`${stripe.url}/c/pay/**`);
      expect(await page.getByRole("heading").textContent()).toBe("Pay USD 25.00");
      await shot("buy-credits-checkout");
      await page.getByRole("button", { name: "Pay" }).click();
      await page.waitForURL(/\/dashboard\/credits\?checkout=done/);
      await expect.poll(() => page.getByTestId("buy-credits").textContent()).toContain("Payment received");
      await page.reload();
      await expect.poll(() => page.locator("main").textContent()).toContain("Credits bought");
      await shot("buy-credits-done");
      expect(problems).toEqual([]);
    },
    STEP_MS,
  );
});
