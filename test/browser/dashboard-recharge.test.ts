import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoMemberStore } from "../../lambda/adapters/dynamodb/members";
import { DynamoPayments } from "../../lambda/adapters/dynamodb/payments";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { localUserDirectory } from "../../lambda/local/oidc";
import {
  addDevMember,
  dashboardPage,
  launchBrowser,
  screenshotOnFailure,
  signIn,
  tooWide,
} from "../support/browser";
import { dashboardToken } from "../support/dashboard-token";
import { startTestHost, type TestHost } from "../support/host";
import { type StripeStandIn, startStripe } from "../support/stripe";

/**
 * The auto-recharge rule on the Credits page, in a real browser over the local stack and the Stripe
 * stand-in: an admin is told there is no saved card until a Buy credits purchase saves one; sets,
 * changes and turns off the rule at desktop width and at 390 px, and the server holds what the page
 * shows; bad input is refused in the page (not a number, negative, zero, an amount not offered) and
 * the server's refusal shows its message; a viewer sees the rule with the controls disabled, and the
 * API refuses them. Screenshots go to $DMT_SHOTS when it is set.
 */

const PROJECT = "recharge-demo";
/** Generous: the machine may be busy. */
const STEP_MS = 180_000;

let stripe: StripeStandIn;
let stack: TestHost;
let payments: DynamoPayments;
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
  payments = new DynamoPayments(stack.db, tableNames(process.env));
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await stripe?.close();
});

screenshotOnFailure(() => page, "recharge");

const shot = async (name: string) => {
  if (process.env.DMT_SHOTS)
    await page.screenshot({ path: `${process.env.DMT_SHOTS}/${name}.png`, fullPage: true });
};

const card = () => page.getByTestId("auto-recharge");
const rule = () => card().getByTestId("recharge-rule");
const threshold = () => page.locator("#recharge-threshold");
const amount = () => page.locator("#recharge-amount");
const formError = () => page.locator("#recharge-error");
/** The rule the server holds, in micro-dollars; null when off. */
const held = async () => (await payments.getProfile(PROJECT))?.recharge ?? null;

async function openCredits(): Promise<void> {
  await page.goto(`${stack.url}/dashboard/credits`);
  await page.waitForURL(`${stack.url}/dashboard/credits`);
  await rule().waitFor();
}

/** Submits the form and waits for the page's answer: an error, or the card drawn again. */
async function submitRule(button: "Turn on" | "Save rule", usd: string, offered: string): Promise<void> {
  await threshold().fill(usd);
  await amount().selectOption({ label: offered });
  await card().getByRole("button", { name: button }).click();
}

async function setChangeAndTurnOff(width: string): Promise<void> {
  await submitRule("Turn on", "5", "$25.00");
  await expect
    .poll(() => rule().textContent())
    .toContain("When the balance falls below $5.00, $25.00 is charged");
  expect(await held()).toEqual({ thresholdMicros: 5_000_000, amountMicros: 25_000_000 });
  // The form reads back the saved rule.
  expect(await threshold().inputValue()).toBe("5.00");
  expect(await amount().inputValue()).toBe("25.00");

  await submitRule("Save rule", "12.5", "$10.00");
  await expect
    .poll(() => rule().textContent())
    .toContain("When the balance falls below $12.50, $10.00 is charged");
  expect(await held()).toEqual({ thresholdMicros: 12_500_000, amountMicros: 10_000_000 });
  // What the page shows is what the server holds: drawn again from it.
  await openCredits();
  expect(await rule().textContent()).toContain("below $12.50, $10.00 is charged");
  expect(await tooWide(page)).toEqual([]);
  await shot(`recharge-on-${width}`);

  await card().getByRole("button", { name: "Turn off" }).click();
  await expect.poll(() => rule().textContent()).toContain("Off");
  expect(await held()).toBeNull();
  expect(await card().getByRole("button", { name: "Turn off" }).isVisible()).toBe(false);
  expect(await card().getByRole("button", { name: "Turn on" }).isVisible()).toBe(true);
}

describe.sequential("the auto-recharge rule on the Credits page", () => {
  it(
    "refuses bad input in the page and shows the server's refusal, with nothing saved",
    async () => {
      await page.goto(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      await page.selectOption("#project", PROJECT);
      await openCredits();
      expect(await rule().textContent()).toContain("Off");
      expect(await card().getByTestId("recharge-no-card").textContent()).toContain("No saved card yet");
      // The amounts are the operator's, in the page's money format.
      expect(await amount().locator("option").allTextContents()).toEqual(["$10.00", "$25.00"]);

      const refused = async (usd: string, message: string) => {
        await submitRule("Turn on", usd, "$25.00");
        await expect.poll(() => formError().textContent()).toBe(message);
        expect(await threshold().getAttribute("aria-invalid")).toBe("true");
      };
      await refused("ten", "The threshold must be a number of dollars, like 10 or 12.50.");
      await refused("-5", "The threshold cannot be negative.");
      await refused("0", "The threshold must be above $0.00: the balance never falls below zero.");
      await refused("", "Enter the balance to recharge below, in dollars, like 10 or 12.50.");
      // The server's own limits, in its error's message.
      await refused("2000000", "Invalid field 'threshold_usd': must be at most $1000000.00");
      await refused(
        "1.1234567",
        "Invalid field 'threshold_usd': must be an amount in US dollars with at most 6 decimals, like 25 or 12.50",
      );

      // An amount the operator does not offer (a page edited, or left open while the offer changed).
      await page.evaluate(() => {
        const select = document.querySelector<HTMLSelectElement>("#recharge-amount");
        select?.append(new Option("$7.00", "7.00"));
      });
      await submitRule("Turn on", "5", "$7.00");
      await expect
        .poll(() => formError().textContent())
        .toBe("Pick one of the amounts offered: $10.00, $25.00.");
      expect(await amount().getAttribute("aria-invalid")).toBe("true");
      expect(await held()).toBeNull();
      await shot("recharge-bad-amount-desktop");
    },
    STEP_MS,
  );

  it(
    "is told of the saved card once a purchase saved one",
    async () => {
      const buy = page.getByTestId("buy-credits");
      await buy.getByRole("button", { name: "Buy $10.00" }).click();
      await page.waitForURL(`${stripe.url}/c/pay/**`);
      await page.getByRole("button", { name: "Pay" }).click();
      await page.waitForURL(/\/dashboard\/credits\?checkout=done/);
      await expect
        .poll(async () => {
          await openCredits();
          return card().getByTestId("recharge-no-card").count();
        })
        .toBe(0);
    },
    STEP_MS,
  );

  it(
    "lets an admin set, change and turn off the rule at desktop width, the server holding what the page shows",
    async () => {
      await openCredits();
      await setChangeAndTurnOff("desktop");
    },
    STEP_MS,
  );

  it(
    "does the same at 390 px wide, nothing wider than the screen",
    async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await openCredits();
      // The statement's payment ids wrap inside their line rather than run past the card.
      const overflowing = await page.evaluate(() =>
        [...document.querySelectorAll(".statement .what small")]
          .filter((el) => el.scrollWidth > el.clientWidth + 1)
          .map((el) => el.textContent),
      );
      expect(overflowing).toEqual([]);
      await setChangeAndTurnOff("390");
      await page.setViewportSize({ width: 1366, height: 900 });
    },
    STEP_MS,
  );

  it(
    "shows a viewer the rule with the controls disabled, and the API refuses their change",
    async () => {
      await payments.updateProfile(PROJECT, {
        recharge: { thresholdMicros: 8_000_000, amountMicros: 25_000_000 },
        armed: true,
      });
      const devUserId = (await localUserDirectory(stack.dataDir).findUserId(stack.dashboard.email)) ?? "";
      const members = new DynamoMemberStore(stack.db, tableNames(process.env));
      await members.setRole(devUserId, PROJECT, "viewer");
      await openCredits();
      expect(await rule().textContent()).toContain("When the balance falls below $8.00, $25.00 is charged");
      expect(await threshold().isDisabled()).toBe(true);
      expect(await amount().isDisabled()).toBe(true);
      expect(await card().getByRole("button", { name: "Save rule" }).isDisabled()).toBe(true);
      expect(await card().getByRole("button", { name: "Turn off" }).isDisabled()).toBe(true);
      expect(await threshold().getAttribute("aria-describedby")).toContain("viewer-note");

      const token = await dashboardToken(stack.dataDir, stack.url, devUserId);
      const res = await fetch(`${stack.url}/dashboard/api/projects/${PROJECT}/credits/recharge`, {
        method: "DELETE",
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(403);
      expect(await held()).toEqual({ thresholdMicros: 8_000_000, amountMicros: 25_000_000 });
      await members.setRole(devUserId, PROJECT, "admin");
    },
    STEP_MS,
  );

  it(
    "logged no error on any page",
    () => {
      expect(problems).toEqual([]);
    },
    STEP_MS,
  );
});
