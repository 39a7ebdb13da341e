import type { Browser, Page } from "playwright-core";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  addDevMember,
  dashboardPage,
  launchBrowser,
  screenshotOnFailure,
  signIn,
  tooWide,
} from "../support/browser";
import { startTestHost, type TestHost } from "../support/host";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * Settings -> Alerts and Webhooks in a real browser, over the real local stack: an admin adds a
 * webhook and sees its secret once, sends a test that a local receiver gets signed, sees it in the
 * delivery log, sets budget thresholds; the page fits 390 px.
 */

const PROJECT = "alerts-demo";
/** Generous: the machine may be busy. */
const STEP_MS = 180_000;
const SLOW = { timeout: 60_000, interval: 500 };

let stack: TestHost;
let receiver: WebhookReceiver;
let browser: Browser;
let page: Page;
let secret = "";
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost();
  receiver = await startWebhookReceiver();
  await stack.newKey({ projectId: PROJECT, name: "laptop" });
  await addDevMember(stack, PROJECT);
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "alerts");

async function openSettings(): Promise<void> {
  await page.goto(`${stack.url}/dashboard/settings`);
  await page.waitForURL(`${stack.url}/dashboard/settings`);
  await page.locator("#webhook-url").waitFor({ state: "visible", timeout: 60_000 });
}

describe.sequential("alerts and webhooks in a browser", () => {
  it(
    "adds a webhook and shows its signing secret once",
    async () => {
      await page.goto(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      await page.selectOption("#project", PROJECT);
      await openSettings();
      // The URL box looks like every other text box of the form.
      const look = (selector: string) =>
        page.locator(selector).evaluate((el) => {
          const style = getComputedStyle(el);
          return [style.borderTopWidth, style.borderRadius, style.padding, el.getBoundingClientRect().height];
        });
      expect(await look("#webhook-url")).toEqual(await look("#webhook-events"));
      await page.locator("#webhook-url").fill(receiver.url);
      await page.getByRole("button", { name: "Add webhook" }).click();
      await page.locator("#webhook-secret").waitFor({ state: "visible" });
      secret = (await page.locator("#webhook-secret").textContent()) ?? "";
      expect(secret).toMatch(/^whsec_/);
      await expect.poll(() => page.locator("li.webhook").count(), SLOW).toBe(1);
      expect(await page.locator("li.webhook code").first().textContent()).toBe(receiver.url);

      // Shown once: after a reload only the webhook is listed, never its secret.
      await openSettings();
      await expect.poll(() => page.locator("li.webhook").count(), SLOW).toBe(1);
      expect(await page.locator("#webhook-secret").count()).toBe(0);
      expect(await page.content()).not.toContain(secret);
    },
    STEP_MS,
  );

  it(
    "sends a test, which the receiver gets signed, and shows it in the delivery log",
    async () => {
      await page.getByRole("button", { name: "Send test" }).click();
      await expect.poll(() => page.locator(".toasts").textContent(), SLOW).toContain("Test delivered");
      const row = page.locator("table.deliveries tbody tr").first();
      await row.waitFor({ state: "visible" });
      expect(await row.textContent()).toContain("webhook.test");
      expect(await row.textContent()).toContain("Delivered");
      expect(await row.locator("td").nth(2).textContent()).toBe("200");
      expect(receiver.received).toHaveLength(1);
      const [got] = receiver.received;
      expect(
        new Webhook(secret).verify(got?.body ?? "", got?.headers as Record<string, string>),
      ).toMatchObject({
        type: "webhook.test",
      });
    },
    STEP_MS,
  );

  it(
    "sets budget thresholds, and shows the API's message for a bad list",
    async () => {
      await page.locator("#alert-thresholds").fill("50,50");
      await page.getByRole("button", { name: "Save alerts" }).click();
      const alert = page.locator("form:has(#alert-thresholds) .form-error");
      await expect.poll(() => alert.textContent(), SLOW).toContain("50 is given twice");
      await page.locator("#alert-thresholds").fill("50,80,100");
      await page.getByRole("button", { name: "Save alerts" }).click();
      await expect.poll(() => page.locator(".toasts").textContent(), SLOW).toContain("Alerts saved");
      await expect.poll(() => page.locator(".alert-rules").textContent(), SLOW).toContain("50%, 80%, 100%");
      // Opened again, the form shows the rules as saved, not placeholders.
      await openSettings();
      await expect.poll(() => page.locator("#alert-thresholds").inputValue(), SLOW).toBe("50,80,100");
      if (process.env.DMT_SHOTS) {
        await page.locator("#alert-thresholds").scrollIntoViewIfNeeded();
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/alerts-form-desktop.png` });
      }
      // Saving what is saved already sends nothing, and says what to change.
      await page.getByRole("button", { name: "Save alerts" }).click();
      await expect
        .poll(() => page.locator("form:has(#alert-thresholds) .form-error").textContent(), SLOW)
        .toContain("Change the amount or the thresholds");
    },
    STEP_MS,
  );

  it(
    "fits 390 px with the delivery log open: nothing wider than the screen",
    async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await openSettings();
      await page.getByRole("button", { name: "Deliveries" }).click();
      await page.locator("table.deliveries tbody tr").first().waitFor({ state: "visible" });
      expect(await tooWide(page)).toEqual([]);
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/settings-alerts-390.png`, fullPage: true });
      }
      await page.getByRole("button", { name: "Add webhook" }).scrollIntoViewIfNeeded();
      expect(await page.getByRole("button", { name: "Add webhook" }).isVisible()).toBe(true);
      expect(problems).toEqual([]);
    },
    STEP_MS,
  );
});
