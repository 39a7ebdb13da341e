import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
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
 * The overview and the credit statement in a real browser (Chromium from @sparticuz/chromium, driven
 * by playwright-core), over the real local stack with metering on: a project with credits and a key,
 * calls through the proxy, the development user made a member with the same code `dmt members add`
 * runs; then the figures on the overview and the statement, and every page at 390 px wide.
 */

const PROJECT = "overview-demo";
/** Generous: the machine may be busy, and the steps wait on the warehouse and lease settlement. */
const STEP_MS = 180_000;

let stack: TestHost;
let browser: Browser;
let page: Page;
let key = "";
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  ({ key } = await stack.newKey({ projectId: PROJECT, name: "laptop" }));
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(PROJECT, 10_000_000, "invoice", "INV-1");
  await addDevMember(stack, PROJECT);
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "overview");

async function call(content: string): Promise<void> {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content }] }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

async function open(path: string): Promise<void> {
  await page.goto(`${stack.url}/dashboard/${path}`);
  await page.waitForURL(`${stack.url}/dashboard/${path}`);
}

/** What the background work (warehouse, lease settlement) needs on a busy machine: polled each second. */
const SLOW = { timeout: 120_000, interval: 1_000 };

/** Opens `path` afresh, then reads what the page shows: for a poll that waits on background work. */
async function reloading<T>(path: string, read: () => Promise<T>): Promise<T> {
  await open(path);
  // The page draws what its API calls answer: read once they have (else a poll can read an empty page
  // every time).
  await page.waitForLoadState("networkidle");
  return read();
}

describe.sequential("overview and statement in a browser", () => {
  it(
    "lands on the overview after signing in, with the project the member was added to",
    async () => {
      for (let i = 0; i < 3; i++) await call(`Hello number ${i}`);
      await stack.drain();
      // The root of the service sends a person to the dashboard.
      await page.goto(`${stack.url}/`);
      await page.waitForURL(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      expect(await page.locator("#project option").allTextContents()).toContain(PROJECT);
      await page.selectOption("#project", PROJECT);
      await expect.poll(() => page.getByTestId("overview-available").textContent()).toContain("Available");
    },
    STEP_MS,
  );

  it(
    "shows spend today, this month and over 30 days, credits left, burn rate and runway",
    async () => {
      // Rollups follow the warehouse within seconds: reload until the calls are counted.
      await expect
        .poll(() => reloading("overview", () => page.getByTestId("overview-top-models").textContent()), SLOW)
        .toContain("3 calls");
      const today = await page.getByTestId("overview-today").textContent();
      expect(today).toMatch(/^Spend today(\$0\.\d\d|<\$0\.01)new vs yesterday/);
      expect(await page.getByTestId("overview-month-spend").textContent()).toContain("This month");
      expect(await page.getByTestId("overview-30").textContent()).toContain("Last 30 days");
      expect(await page.getByTestId("overview-available").textContent()).toMatch(/\$9\.99|\$10\.00/);
      expect(await page.getByTestId("overview-burn").textContent()).toContain("/ day");
      expect(await page.getByTestId("overview-runway").textContent()).toMatch(
        /Runway(Over a year|[\d,]+ days?)/,
      );
      expect(
        await page
          .getByRole("img", { name: /^Spend this month: (\$0\.\d\d|<\$0\.01) charged to credits/ })
          .count(),
      ).toBe(1);
      // No budget yet: its section stays hidden. No alert rule: the section says what one would do.
      expect(await page.locator('[data-section="budgets"]').isHidden()).toBe(true);
      await expect
        .poll(() => page.locator('[data-section="alerts"]').textContent())
        .toContain("No alerts set.");
    },
    STEP_MS,
  );

  it(
    "lists the alert rules on the overview, and says when the low-balance one fired",
    async () => {
      // Set in Settings, as a user does: a low balance above the project's $10 fires at once.
      await page.goto(`${stack.url}/dashboard/settings`);
      await page.locator("#alert-low-balance").fill("1000");
      await page.locator("#alert-thresholds").fill("50,80,100");
      await page.getByRole("button", { name: "Save alerts" }).click();
      await expect.poll(() => page.locator(".toasts").textContent(), SLOW).toContain("Alerts saved");

      await page.goto(`${stack.url}/dashboard/overview`);
      const alerts = page.locator('[data-section="alerts"]');
      await expect.poll(() => alerts.textContent(), SLOW).toContain("Low balance: under $1,000.00");
      expect(await alerts.locator('[data-rule="low-balance"]').textContent()).toMatch(
        /Fired \d{4}-\d\d-\d\d \d\d:\d\d UTC$/,
      );
      expect(await alerts.locator('[data-rule="budget-thresholds"]').textContent()).toContain(
        "50%, 80%, 100% of each budget",
      );
    },
    STEP_MS,
  );

  it(
    "reads the ledger as a statement: the grant a credit, the calls one debit, a running balance",
    async () => {
      // Leases settle when idle (2 s): wait for the one that paid for the calls to be on the ledger.
      await expect
        .poll(() => reloading("credits", () => page.locator('tr[data-kind="charges"]').count()), SLOW)
        .toBe(1);
      const grant = page.locator('tr[data-kind="grant"]');
      expect(await grant.textContent()).toContain("Credits granted");
      expect(await grant.textContent()).toContain("invoice · INV-1");
      expect(await grant.locator(".credit").textContent()).toBe("+$10.00");
      const charges = page.locator('tr[data-kind="charges"]');
      expect(await charges.textContent()).toContain("3 calls in 1 batch");
      // To the cent, with the exact amount on hover.
      const amount = charges.locator("td.num .money").first();
      expect(await amount.textContent()).toMatch(/^-(\$0\.\d\d|<\$0\.01)$/);
      expect(await amount.getAttribute("title")).toMatch(/^-\$0\.\d{2,6}$/);
      expect(await page.getByTestId("opening").textContent()).toContain("$0.00");
      const closing = await page.getByTestId("closing").locator(".money").textContent();
      expect(closing).toMatch(/^\$(9\.99|10\.00)$/);
      // No hold, refund or reservation line: those are the ledger's bookkeeping, not the statement's.
      expect(await page.locator("table.statement").textContent()).not.toMatch(/Reserved|Hold|Release/);

      await page.selectOption("#statement-grouping", "lease");
      await expect.poll(() => charges.textContent()).toContain("Calls settled together");
      // "Lease" is our word, not the customer's; and the page says why its count differs.
      expect((await page.locator("main").textContent())?.toLowerCase()).not.toContain("lease");
      expect(await page.getByTestId("statement-counts").textContent()).toContain("Calls dmt refused");
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/credits-desktop.png`, fullPage: true });
      }
    },
    STEP_MS,
  );

  it(
    "says what to change about a reversed date range, with no retry that would fail again",
    async () => {
      await page.goto(`${stack.url}/dashboard/interactions?from=2026-11-20&to=2026-11-10`);
      const alert = page.getByRole("alert").filter({ hasText: "is after" });
      await expect.poll(() => alert.textContent()).toContain("2026-11-20 is after");
      expect(await page.getByRole("button", { name: "Try again" }).count()).toBe(0);
    },
    STEP_MS,
  );

  it(
    "fits every page into 390 px: nothing wider than the screen, every action reachable",
    async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      for (const path of ["overview", "keys", "interactions", "usage", "credits", "settings"]) {
        await open(path);
        await page.locator(".loading").first().waitFor({ state: "detached" });
        await page.waitForLoadState("networkidle");
        expect(await tooWide(page), path).toEqual([]);
        expect(await page.evaluate(() => document.documentElement.scrollWidth), path).toBeLessThanOrEqual(
          390,
        );
      }
      await page.setViewportSize({ width: 1366, height: 900 });
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
