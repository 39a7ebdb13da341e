import type { Browser, Page } from "playwright-core";
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

/**
 * The Privacy card of Settings in a real browser, over the real local stack: an admin sets the store
 * level and retention, saves, reloads and sees them kept; a bad value shows the API's message; the
 * page fits 390 px.
 */

const PROJECT = "privacy-demo";
/** Generous: the machine may be busy. */
const STEP_MS = 180_000;
const SLOW = { timeout: 60_000, interval: 500 };

let stack: TestHost;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost();
  await stack.newKey({ projectId: PROJECT, name: "laptop" });
  await addDevMember(stack, PROJECT);
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "privacy");

/** Opens Settings afresh and waits for the Privacy card's form. */
async function openSettings(): Promise<void> {
  await page.goto(`${stack.url}/dashboard/settings`);
  await page.waitForURL(`${stack.url}/dashboard/settings`);
  await page.locator("#privacy-store").waitFor({ state: "visible", timeout: 60_000 });
}

describe.sequential("privacy settings in a browser", () => {
  it(
    "signs in and shows the defaults: full, kept until deleted",
    async () => {
      await page.goto(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      await page.selectOption("#project", PROJECT);
      await openSettings();
      expect(await page.locator("#privacy-store").inputValue()).toBe("full");
      expect(await page.getByTestId("privacy-store-hint").textContent()).toBe("Bodies, each cut to 64 KiB.");
      expect(await page.locator("#privacy-retention").inputValue()).toBe("");
      expect(await page.locator("#privacy-body-retention").inputValue()).toBe("");
    },
    STEP_MS,
  );

  it(
    "saves metadata with 30 and 7 days, and shows them again after a reload",
    async () => {
      await page.selectOption("#privacy-store", "metadata");
      expect(await page.getByTestId("privacy-store-hint").textContent()).toContain(
        "No request or response body",
      );
      await page.locator("#privacy-retention").fill("30");
      await page.locator("#privacy-body-retention").fill("7");
      await page.getByRole("button", { name: "Save privacy" }).click();
      await expect.poll(() => page.locator(".toasts").textContent(), SLOW).toContain("Privacy saved");
      await openSettings();
      expect(await page.locator("#privacy-store").inputValue()).toBe("metadata");
      expect(await page.locator("#privacy-retention").inputValue()).toBe("30");
      expect(await page.locator("#privacy-body-retention").inputValue()).toBe("7");
    },
    STEP_MS,
  );

  it(
    "shows the API's message inline for a bad value, and keeps what was saved",
    async () => {
      await page.locator("#privacy-body-retention").fill("60");
      await page.getByRole("button", { name: "Save privacy" }).click();
      const alert = page.locator("form:has(#privacy-store) .form-error");
      await expect
        .poll(() => alert.textContent(), SLOW)
        .toContain("cannot be longer than the record retention");
      await page.locator("#privacy-retention").fill("0");
      await page.locator("#privacy-body-retention").fill("");
      await page.getByRole("button", { name: "Save privacy" }).click();
      await expect.poll(() => alert.textContent(), SLOW).toContain("from 1 to 3650");
      await openSettings();
      expect(await page.locator("#privacy-retention").inputValue()).toBe("30");
      expect(await page.locator("#privacy-body-retention").inputValue()).toBe("7");
    },
    STEP_MS,
  );

  it(
    "fits 390 px: nothing wider than the screen",
    async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await openSettings();
      expect(await tooWide(page)).toEqual([]);
      await page.locator("#privacy-store").scrollIntoViewIfNeeded();
      expect(await page.getByRole("button", { name: "Save privacy" }).isVisible()).toBe(true);
      expect(problems).toEqual([]);
    },
    STEP_MS,
  );
});
