import { readFileSync } from "node:fs";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { CSV_HEADER } from "../../lambda/core/export-format";
import { addDevMember, dashboardPage, launchBrowser, screenshotOnFailure, signIn } from "../support/browser";
import { startTestHost, type TestHost } from "../support/host";

/**
 * Settings -> Data export in a real browser over the real local stack (metering on): calls through
 * the proxy, then the Download export button. The dashboard API answers a short-lived download URL
 * (presigned S3 in AWS, a signed link here) and the browser follows it: a file is saved, under the
 * server's name, with the calls' rows.
 */

const PROJECT = "export-demo";
/** Generous: the machine may be busy, and the steps wait on the warehouse. */
const STEP_MS = 180_000;

let stack: TestHost;
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  const { key } = await stack.newKey({ projectId: PROJECT, name: "laptop" });
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(PROJECT, 10_000_000, "invoice");
  await addDevMember(stack, PROJECT);
  for (const model of ["gpt-4o-mini", "gpt-4o-mini", "gpt-4o"]) {
    const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: `hello ${model}` }] }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  }
  await stack.drain();
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "export");

/** Clicks Download export with the chosen format and returns the saved file's name and text. */
async function download(format: "csv" | "json"): Promise<{ name: string; text: string }> {
  await page.selectOption("#export-format", format);
  const [saved] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Download export" }).click(),
  ]);
  const path = await saved.path();
  return { name: saved.suggestedFilename(), text: readFileSync(path, "utf8") };
}

describe.sequential("the dashboard's export download in a browser", () => {
  it(
    "saves the CSV file the server names, with a row per call",
    async () => {
      await page.goto(`${stack.url}/dashboard/settings`);
      await signIn(page, stack, "/dashboard/settings");
      await page.selectOption("#project", PROJECT);
      await page.locator("#export-format").waitFor({ state: "visible" });
      const day = new Date().toISOString().slice(0, 10);
      await page.locator("#export-from").fill(day);
      await page.locator("#export-to").fill(day);

      const csv = await download("csv");
      expect(csv.name).toBe(`dmt-export-${PROJECT}-${day}-to-${day}.csv`);
      expect(csv.text.startsWith(CSV_HEADER)).toBe(true);
      const lines = csv.text.trimEnd().split("\r\n").slice(1);
      expect(lines).toHaveLength(3);
      expect(lines.filter((line) => line.includes(",gpt-4o-mini,"))).toHaveLength(2);
      expect(await page.getByRole("status").filter({ hasText: "Downloading" }).textContent()).toBe(
        `Downloading ${csv.name}.`,
      );
      // The page stays where it was: the link saved a file, it did not navigate away.
      expect(new URL(page.url()).pathname).toBe("/dashboard/settings");
    },
    STEP_MS,
  );

  it(
    "saves the JSON file with the same calls",
    async () => {
      const file = await download("json");
      expect(file.name.endsWith(".json")).toBe(true);
      const rows = JSON.parse(file.text) as { project_id: string; model: string }[];
      expect(rows.map((r) => r.model).sort()).toEqual(["gpt-4o", "gpt-4o-mini", "gpt-4o-mini"]);
      expect(rows.every((r) => r.project_id === PROJECT)).toBe(true);
      expect(problems).toEqual([]);
    },
    STEP_MS,
  );
});
