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
 * The Interactions page in a real browser over the real local stack (metering on): calls through the
 * proxy with two keys, then the list's key column and key filter, dates in the time column, a model
 * found by part of its name, and a detail whose link opens it again after a reload, also at 390 px.
 */

const PROJECT = "interactions-demo";
/** Generous: the machine may be busy, and the steps wait on the warehouse. */
const STEP_MS = 180_000;
/** What the background work (the warehouse) needs on a busy machine: polled each second. */
const SLOW = { timeout: 120_000, interval: 1_000 };

let stack: TestHost;
let browser: Browser;
let page: Page;
const keys = { laptop: { key: "", keyId: "" }, ci: { key: "", keyId: "" } };
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  keys.laptop = await stack.newKey({ projectId: PROJECT, name: "laptop" });
  keys.ci = await stack.newKey({ projectId: PROJECT, name: "ci-runner" });
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(PROJECT, 10_000_000, "invoice");
  await addDevMember(stack, PROJECT);
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "interactions");

async function call(key: string, model: string, user?: string): Promise<void> {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${key}`,
      "Content-Type": "application/json",
      ...(user ? { "X-User-ID": user } : {}),
    },
    body: JSON.stringify({ model, messages: [{ role: "user", content: `hello ${model}` }] }),
  });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}

const rows = () => page.locator("table.interactions tbody tr");
/** The list once drawn: its rows' text, or [] for an empty state. */
async function shownRows(): Promise<string[]> {
  await page.locator(".loading").first().waitFor({ state: "detached" });
  return rows().allTextContents();
}

describe.sequential("the Interactions page in a browser", () => {
  it(
    "lists calls with their key's name and the date in the time column",
    async () => {
      await call(keys.laptop.key, "gpt-4o-mini", "user-ada");
      await call(keys.laptop.key, "gpt-4o-mini");
      await call(keys.ci.key, "gpt-4o", "user-ada");
      await stack.drain();
      await page.goto(`${stack.url}/dashboard/interactions`);
      await signIn(page, stack, "/dashboard/interactions");
      await page.selectOption("#project", PROJECT);
      await expect
        .poll(async () => {
          await page.getByRole("button", { name: "Refresh" }).click();
          return (await shownRows()).length;
        }, SLOW)
        .toBe(3);
      const keyCells = await page.locator('table.interactions td[data-label="Key"]').allTextContents();
      expect(keyCells).toEqual([
        `ci-runner${keys.ci.keyId}`,
        `laptop${keys.laptop.keyId}`,
        `laptop${keys.laptop.keyId}`,
      ]);
      // Today's calls too show their date, not only their time: UTC, ISO-like, the zone shown.
      const time = page.locator("table.interactions tbody tr time").first();
      const iso = (await time.getAttribute("datetime")) ?? "";
      expect(Date.now() - Date.parse(iso)).toBeLessThan(3_600_000);
      expect(await time.textContent()).toBe(`${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`);
    },
    STEP_MS,
  );

  it(
    "finds a model by part of its name in any case, and filters by key; the URL keeps the filters",
    async () => {
      await page.getByLabel("Model").fill("MINI");
      await page.getByRole("button", { name: "Apply" }).click();
      await expect.poll(async () => (await shownRows()).length).toBe(2);
      expect((await shownRows()).every((text) => text.includes("gpt-4o-mini"))).toBe(true);
      expect(new URL(page.url()).searchParams.get("model")).toBe("MINI");

      await page.getByRole("button", { name: "Clear" }).click();
      await expect.poll(async () => (await shownRows()).length).toBe(3);
      await page.selectOption("#filter-key", keys.ci.keyId);
      await page.getByRole("button", { name: "Apply" }).click();
      await expect.poll(async () => (await shownRows()).length).toBe(1);
      expect((await shownRows())[0]).toContain("ci-runner");
      expect(new URL(page.url()).searchParams.get("key_id")).toBe(keys.ci.keyId);
      // A reload keeps the filter chosen.
      await page.reload();
      await expect.poll(() => page.locator("#filter-key").inputValue()).toBe(keys.ci.keyId);
      await expect.poll(async () => (await shownRows()).length).toBe(1);
    },
    STEP_MS,
  );

  it(
    "opens a detail whose URL names it, and that URL opens it again after a reload",
    async () => {
      const id = (await rows().first().getAttribute("data-transaction-id")) ?? "";
      await rows().first().getByRole("button").click();
      const dialog = page.getByRole("dialog");
      await expect.poll(() => dialog.textContent()).toContain("Transaction ID");
      expect(new URL(page.url()).searchParams.get("interaction")).toBe(id);
      expect(await dialog.textContent()).toContain(`ci-runner${keys.ci.keyId}`);
      // The cost's total is one band under its rows: its label and its figure look alike.
      const total = dialog.locator("table tfoot tr");
      expect(await total.textContent()).toMatch(/^Total\$\d+\.\d{6}$/);
      // Each line's amount in dollars too, exact: no micro-dollar unit.
      const amounts = await dialog.locator("table tbody td:last-child").allTextContents();
      expect(amounts.length).toBeGreaterThan(0);
      for (const amount of amounts) expect(amount).toMatch(/^\$\d+\.\d{2,}$/);
      expect(await dialog.textContent()).not.toContain("µ");
      const looks = await total
        .locator("th, td")
        .evaluateAll((cells) =>
          cells.map((c) => `${getComputedStyle(c).backgroundColor} ${getComputedStyle(c).fontWeight}`),
        );
      expect(looks).toHaveLength(2);
      expect(looks[0]).toBe(looks[1]);

      await page.reload();
      await expect.poll(() => page.getByRole("dialog").textContent()).toContain(id);
      expect(await page.getByRole("heading", { name: /gpt-4o/ }).textContent()).toContain("OpenAI");
      await page.getByRole("button", { name: "Close" }).click();
      await expect.poll(() => new URL(page.url()).searchParams.has("interaction")).toBe(false);

      // A link to an interaction this project does not have says so, with no retry.
      await page.goto(`${stack.url}/dashboard/interactions?interaction=tx-unknown`);
      await expect.poll(() => page.getByRole("dialog").textContent()).toContain("No interaction tx-unknown");
      expect(await page.getByRole("button", { name: "Try again" }).count()).toBe(0);
    },
    STEP_MS,
  );

  it(
    "fits the list and the detail into 390 px",
    async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await page.goto(`${stack.url}/dashboard/interactions`);
      await expect.poll(async () => (await shownRows()).length).toBe(3);
      await page.waitForLoadState("networkidle");
      expect(await tooWide(page)).toEqual([]);
      await rows().first().getByRole("button").click();
      await expect.poll(() => page.getByRole("dialog").textContent()).toContain("Transaction ID");
      expect(await tooWide(page)).toEqual([]);
      // The transaction id reads on one or two lines, not three characters a line.
      const idBox = await page.locator(".detail-facts dd code").first().boundingBox();
      expect(idBox?.height ?? 0).toBeLessThan(60);
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/interactions-detail-390.png` });
        await page.getByRole("button", { name: "Close" }).click();
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/interactions-390.png`, fullPage: true });
        await page.setViewportSize({ width: 1366, height: 900 });
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/interactions-desktop.png` });
        await rows().first().getByRole("button").click();
        await expect.poll(() => page.getByRole("dialog").textContent()).toContain("Transaction ID");
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/interactions-detail-desktop.png` });
      }
      await page.setViewportSize({ width: 1366, height: 900 });
    },
    STEP_MS,
  );

  it(
    "breaks the period's usage down by model, by API key and by end user, dearest first",
    async () => {
      await page.goto(`${stack.url}/dashboard/usage`);
      // One day of calls in a 30-day range: each chart draws the range's 30 days, and lists its two
      // models in a legend of its own.
      const requestsChart = page.locator('.chart-card[data-metric="requests"]');
      await expect.poll(() => requestsChart.getAttribute("data-days")).toBe("30");
      for (const metric of ["tokens", "cost"]) {
        expect(await page.locator(`.chart-card[data-metric="${metric}"]`).getAttribute("data-days")).toBe(
          "30",
        );
      }
      expect(await requestsChart.locator(".chart-legend li").allTextContents()).toEqual([
        "OpenAI · gpt-4o",
        "OpenAI · gpt-4o-mini",
      ]);
      const table = page.locator('[data-section="breakdown"] table');
      await expect.poll(() => table.locator("tbody tr").count()).toBe(2);
      expect(await page.locator('[data-section="breakdown"] thead').textContent()).toContain(
        "Vendor and model",
      );

      await page.getByRole("button", { name: "By API key" }).click();
      await expect.poll(() => table.locator("thead").textContent()).toContain("API key");
      await expect.poll(() => table.locator("tbody tr").count()).toBe(2);
      const byKey = await table.locator("tbody tr").allTextContents();
      // gpt-4o costs more than two gpt-4o-mini calls: the CI key comes first.
      expect(byKey[0]).toContain("ci-runner");
      expect(byKey[1]).toContain("laptop");
      expect(byKey[1]).toContain("2");

      await page.getByRole("button", { name: "By end user" }).click();
      await expect.poll(() => table.locator("thead").textContent()).toContain("End user");
      // The calls that named no user have their row, so the rows add up to the project's 3 calls.
      await expect
        .poll(() => table.locator("tbody tr").allTextContents())
        .toEqual([expect.stringContaining("user-ada"), expect.stringContaining("No end user")]);
      expect(await table.locator('tbody td[data-label="Requests"]').allTextContents()).toEqual(["2", "1"]);
      expect(await page.getByRole("button", { name: "By end user" }).getAttribute("aria-pressed")).toBe(
        "true",
      );

      await page.setViewportSize({ width: 390, height: 844 });
      await page.waitForLoadState("networkidle");
      expect(await tooWide(page)).toEqual([]);
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/usage-390.png`, fullPage: true });
        await page.setViewportSize({ width: 1366, height: 900 });
        await page.getByRole("button", { name: "By API key" }).click();
        await expect.poll(() => table.locator("tbody tr").count()).toBe(2);
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/usage-desktop.png`, fullPage: true });
      }
      await page.setViewportSize({ width: 1366, height: 900 });
    },
    STEP_MS,
  );

  it(
    "shows on the overview the budgets nearest their limits, and the top keys and end users by cost",
    async () => {
      await page.goto(`${stack.url}/dashboard/overview`);
      const section = page.locator('[data-section="budgets"]');
      await expect.poll(() => page.getByTestId("overview-available").count()).toBe(1);
      expect(await section.isHidden()).toBe(true);

      await page.goto(`${stack.url}/dashboard/budgets`);
      await expect.poll(() => page.getByLabel("Limit (USD)").count()).toBe(1);
      await page.getByLabel("Limit (USD)").fill("500");
      await page.locator("#budget-window").selectOption("month");
      await page.getByRole("button", { name: "Set budget" }).click();
      await expect.poll(() => page.locator("tr[data-budget]").count()).toBe(1);

      await page.goto(`${stack.url}/dashboard/overview`);
      await expect.poll(() => section.isVisible()).toBe(true);
      expect(await section.textContent()).toContain("Project · per month");
      // Summaries are to the cent, the exact amount on hover.
      expect(await section.textContent()).toMatch(/(\$0\.\d\d|<\$0\.01) of \$500\.00/);
      expect(await section.locator(".money").first().getAttribute("title")).toMatch(/^\$0\.\d{2,6}$/);
      expect(await section.locator("meter").count()).toBe(1);
      // Beside the top models: the top keys and end users by cost.
      await expect
        .poll(() => page.getByTestId("overview-top-keys").locator("li").allTextContents())
        .toEqual([
          // Each key by its name over its id, as the Usage page names it.
          expect.stringMatching(new RegExp(`^ci-runner${keys.ci.keyId}(\\$0\\.\\d\\d|<\\$0\\.01)1 call$`)),
          expect.stringMatching(new RegExp(`^laptop${keys.laptop.keyId}(\\$0\\.\\d\\d|<\\$0\\.01)2 calls$`)),
        ]);
      await expect
        .poll(() => page.getByTestId("overview-top-users").locator("li").allTextContents())
        .toEqual([expect.stringMatching(/^user-ada(\$0\.\d\d|<\$0\.01)2 calls$/)]);
      await page.setViewportSize({ width: 390, height: 844 });
      await page.waitForLoadState("networkidle");
      expect(await tooWide(page)).toEqual([]);
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/overview-390.png`, fullPage: true });
        await page.setViewportSize({ width: 1366, height: 900 });
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/overview-desktop.png`, fullPage: true });
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
