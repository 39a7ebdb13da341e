import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { revokeKey } from "../../lambda/core/accounts";
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
 * Refusals in a real browser over the local host (metering on): a key's budget refuses one call (402
 * budget_exceeded), a key's model list another (403 model_not_allowed); the Interactions page finds
 * each with its own filter, and the credits filter finds neither. The budget names its key by name.
 */

const PROJECT = "refusals-demo";
/** Generous: the machine may be busy, and the steps wait on the warehouse. */
const STEP_MS = 180_000;
const SLOW = { timeout: 120_000, interval: 1_000 };

let stack: TestHost;
let browser: Browser;
let page: Page;
const keys = { laptop: { key: "", keyId: "" }, ci: { key: "", keyId: "" } };
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  keys.laptop = await stack.newKey({ projectId: PROJECT, name: "laptop" });
  keys.ci = await stack.newKey({ projectId: PROJECT, name: "ci-runner", models: ["gpt-4o-mini"] });
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(PROJECT, 10_000_000, "invoice");
  await addDevMember(stack, PROJECT);
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "refusals");

async function call(key: string, model: string): Promise<number> {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: `hello ${model}` }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

const rows = () => page.locator("table.interactions tbody tr");
async function shownRows(): Promise<string[]> {
  await page.locator(".loading").first().waitFor({ state: "detached" });
  return rows().allTextContents();
}
async function filterBy(status: string): Promise<string[]> {
  await page.selectOption("#filter-status", status);
  await page.getByRole("button", { name: "Apply" }).click();
  await page.waitForURL((url) => url.searchParams.get("status") === status);
  return shownRows();
}

describe.sequential("refusals in a browser", () => {
  it(
    "sets a key's budget that names the key, and refuses calls over it or outside the key's models",
    async () => {
      await page.goto(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      await page.selectOption("#project", PROJECT);
      await page.goto(`${stack.url}/dashboard/budgets`);
      await page.locator("#budget-scope").selectOption("key");
      await page.locator("#budget-subject").fill(keys.laptop.keyId);
      await page.getByLabel("Limit (USD)").fill("0.000001");
      await page.getByRole("button", { name: "Set budget" }).click();
      await expect.poll(() => page.locator("tr[data-budget]").count()).toBe(1);
      // The key by its name, its id beside it.
      expect(await page.locator("tr[data-budget] td").first().textContent()).toBe(
        `Key laptop (${keys.laptop.keyId})`,
      );

      expect(await call(keys.laptop.key, "gpt-4o-mini")).toBe(402);
      expect(await call(keys.ci.key, "gpt-4o")).toBe(403);
      expect(await call(keys.ci.key, "gpt-4o-mini")).toBe(200);
      await stack.drain();
    },
    STEP_MS,
  );

  it(
    "finds each kind of refusal with its own filter: a budget's 402 is not an out-of-credits 402",
    async () => {
      await page.goto(`${stack.url}/dashboard/interactions`);
      await expect
        .poll(async () => {
          await page.getByRole("button", { name: "Refresh" }).click();
          return (await shownRows()).length;
        }, SLOW)
        .toBe(3);
      const budget = await filterBy("budget");
      expect(budget).toHaveLength(1);
      expect(budget[0]).toContain("402");
      expect(budget[0]).toContain("laptop");
      const policy = await filterBy("policy");
      expect(policy).toHaveLength(1);
      expect(policy[0]).toContain("403");
      expect(policy[0]).toContain("ci-runner");
      // Nobody ran out of credits: the budget's refusal is not among them.
      await filterBy("credits");
      await expect.poll(() => page.getByText("No interactions match these filters").count()).toBe(1);
      expect(await filterBy("rate")).toEqual([]);
      expect(await filterBy("error")).toHaveLength(2);
      const options = await page.locator("#filter-status option").allTextContents();
      expect(options).toEqual(
        expect.arrayContaining([
          "402 · Refused: out of credits",
          "402 · Refused: over a budget",
          "429 · Refused: rate limit",
          "403 · Refused: key's endpoints or models",
        ]),
      );
      await filterBy("budget");
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/refusals-desktop.png`, fullPage: true });
      }
      await page.setViewportSize({ width: 390, height: 844 });
      await page.waitForLoadState("networkidle");
      expect(await tooWide(page)).toEqual([]);
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/refusals-390.png`, fullPage: true });
      }
      await page.setViewportSize({ width: 1366, height: 900 });
    },
    STEP_MS,
  );

  it(
    "counts the refused calls apart on Usage and Overview, and names a revoked key's row as revoked",
    async () => {
      await revokeKey(stack.store, keys.laptop.keyId, Date.now());
      await page.goto(`${stack.url}/dashboard/usage`);
      // 3 calls: one refused by the budget, one by the key's models, one answered.
      await expect.poll(() => page.getByTestId("usage-requests").textContent(), SLOW).toBe("3");
      expect(
        await page.locator(".tile", { has: page.getByTestId("usage-requests") }).textContent(),
      ).toContain("2 refused by dmt");
      await page.locator('button[data-view="key"]').click();
      const laptop = page.locator(`table.breakdown tr[data-id="${keys.laptop.keyId}"]`);
      await expect.poll(() => laptop.count()).toBe(1);
      expect(await laptop.locator(".key-name").textContent()).toBe("laptoprevoked");
      expect(await laptop.locator(".badge.revoked").isVisible()).toBe(true);
      const headers = await page.locator("table.breakdown th").allTextContents();
      const cells = await laptop.locator("td").allTextContents();
      expect(cells[headers.indexOf("Refused")]).toBe("1");
      expect(cells[headers.indexOf("Failed")]).toBe("1");
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/usage-refused-by-key.png`, fullPage: true });
      }
      // On a phone the table's rows become cards: the refused count and the revoked badge stay, nothing overflows.
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await tooWide(page)).toEqual([]);
      expect(await laptop.locator(".badge.revoked").isVisible()).toBe(true);
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/usage-refused-390.png`, fullPage: true });
      }
      await page.setViewportSize({ width: 1366, height: 900 });

      await page.goto(`${stack.url}/dashboard/`);
      const notes = page.locator(".ranking-note");
      await expect.poll(() => notes.allTextContents(), SLOW).toContain("2 calls, 1 refused");
      if (process.env.DMT_SHOTS) {
        await page.screenshot({ path: `${process.env.DMT_SHOTS}/overview-refused.png`, fullPage: true });
      }
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
