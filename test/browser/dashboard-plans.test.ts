import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { DynamoMemberStore } from "../../lambda/adapters/dynamodb/members";
import { DynamoPlans } from "../../lambda/adapters/dynamodb/plans";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { createPlan, setProjectPlan, updatePlan } from "../../lambda/core/plans";
import { readStatement } from "../../lambda/core/statement";
import { localUserDirectory } from "../../lambda/local/oidc";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { addDevMember, dashboardPage, launchBrowser, screenshotOnFailure, signIn } from "../support/browser";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

/**
 * The project's price plan on the Credits page, in a real browser over the local stack with metering
 * on: the plan in force with its rules and the change scheduled, read-only (no control in the card,
 * for an admin or a viewer); the calls' charges at the plan's price on the statement. Screenshots go to
 * $DMT_SHOTS when it is set.
 */

const PROJECT = "plans-demo";
/** Generous: the machine may be busy. */
const STEP_MS = 180_000;
const WEEK_MS = 7 * 86_400_000;

let simulator: Simulator;
let stack: TestHost;
let browser: Browser;
let page: Page;
let key = "";
const problems: string[] = [];
const billed: number[] = [];

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost({ ...simulatorEnv(simulator.origins), DMT_METERING: "on" });
  key = (await stack.newKey({ projectId: PROJECT, name: "laptop" })).key;
  await addDevMember(stack, PROJECT);
  const tables = tableNames(process.env);
  const plans = new DynamoPlans(stack.db, tables);
  const models = ["gpt-4o-mini", "gpt-4o"];
  const now = Date.now();
  await createPlan(
    plans,
    "resellers",
    { name: "Reseller pricing", percent: "20", vendors: { anthropic: "12.5" }, models: { "gpt-4o*": "-10" } },
    models,
    now,
  );
  await updatePlan(plans, "resellers", { percent: "25", at: now + WEEK_MS }, models, now);
  await setProjectPlan(plans, PROJECT, "resellers", undefined, now);
  await new DynamoCredits(stack.db, tables).grant(PROJECT, 5_000_000, "test");
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await simulator?.close();
});

screenshotOnFailure(() => page, "plans");

const shot = async (name: string) => {
  if (process.env.DMT_SHOTS)
    await page.screenshot({ path: `${process.env.DMT_SHOTS}/${name}.png`, fullPage: true });
};

async function chat(): Promise<number> {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "Hi there." }],
      max_tokens: 50,
    }),
  });
  expect(res.status).toBe(200);
  const json = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
  // gpt-4o-mini at $0.15 / $0.60 per million tokens, -10% (the plan's gpt-4o* rule), rounded up once.
  const nanos = BigInt(json.usage.prompt_tokens * 150 + json.usage.completion_tokens * 600) * 90n;
  const micros = Number((nanos + 99_999n) / 100_000n);
  expect(Math.round(Number(res.headers.get("x-dmt-cost-usd")) * 1e6)).toBe(micros);
  return micros;
}

describe.sequential("the price plan on the Credits page", () => {
  it(
    "shows the plan in force with its rules and the scheduled change, with no control to change it",
    async () => {
      await page.goto(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      await page.selectOption("#project", PROJECT);
      await page.getByRole("link", { name: "Credits" }).click();
      const card = page.getByTestId("price-plan");
      await expect.poll(() => card.getByTestId("plan-name").textContent()).toContain("Reseller pricing");
      expect(await card.getByTestId("plan-name").textContent()).toContain("plan resellers, version 1");
      const rules = await card.getByTestId("plan-rules").innerText();
      expect(rules).toMatch(/Every model\s+\+20%/);
      expect(rules).toMatch(/anthropic models\s+\+12\.5%/);
      expect(rules).toMatch(/gpt-4o\*\s+-10%/);
      expect(await card.getByTestId("plan-scheduled").textContent()).toMatch(
        /^From \d{4}-\d\d-\d\d \d\d:\d\d UTC: Reseller pricing \(version 2\), \+25% for every model with its own rules\.$/,
      );
      // Read-only: operators change plans with the CLI.
      expect(await card.locator("button, input, select, textarea, form").count()).toBe(0);
      await shot("credits-plan-admin");
    },
    STEP_MS,
  );

  it(
    "charges calls at the plan's price, as the statement shows",
    async () => {
      for (let i = 0; i < 3; i++) billed.push(await chat());
      const day = new Date().toISOString().slice(0, 10);
      const credits = new DynamoCredits(stack.db, tableNames(process.env));
      // Settled charges are lines, those of a batch still open are in flight (noted within a moment):
      // together, what the calls cost at the plan's price.
      const charged = async () => {
        const statement = await readStatement(credits, PROJECT, { from: day, to: day, grouping: "day" });
        const settled = statement.lines
          .filter((l) => l.kind !== "grant")
          .reduce((sum, l) => sum - l.amountMicros, 0);
        return settled + statement.inFlight.chargedMicros;
      };
      await expect.poll(charged, { timeout: 60_000 }).toBe(billed.reduce((a, b) => a + b, 0));
      await page.reload();
      await expect.poll(() => page.getByTestId("price-plan").getByTestId("plan-name").count()).toBe(1);
    },
    STEP_MS,
  );

  it(
    "shows a viewer the same plan, read-only",
    async () => {
      const members = new DynamoMemberStore(stack.db, tableNames(process.env));
      const devUserId = (await localUserDirectory(stack.dataDir).findUserId(stack.dashboard.email)) ?? "";
      await members.setRole(devUserId, PROJECT, "viewer");
      await page.reload();
      const card = page.getByTestId("price-plan");
      await expect.poll(() => card.getByTestId("plan-name").textContent()).toContain("Reseller pricing");
      expect(await card.locator("button, input, select, textarea, form").count()).toBe(0);
      await shot("credits-plan-viewer");
      expect(problems).toEqual([]);
    },
    STEP_MS,
  );
});
