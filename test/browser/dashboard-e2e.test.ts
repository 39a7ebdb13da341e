import OpenAI from "openai";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { activePriceCatalogue } from "../../lambda/adapters/fs/price-catalogue";
import { formatUsd } from "../../lambda/core/money";
import { costMicros } from "../../lambda/core/pricing";
import { launchBrowser, STEP_TIMEOUT_MS, screenshotOnFailure, signIn } from "../support/browser";
import { startTestHost, type TestHost } from "../support/host";

/**
 * The product end to end in a real browser (headless Chromium from npm, driven by playwright-core), with calls
 * made from this process through the proxy with the official OpenAI SDK: sign in, fund the project,
 * create a key, call with it, find the call in Interactions with its tokens and cost, watch Usage
 * count it, switch OpenAI to BYOK and see the next call billed so, revoke the key and see the proxy
 * refuse it, sign out. The steps share one page and run in order; a failing step leaves a screenshot
 * in test-results/.
 */

/** A user id a caller may well send: shown as text everywhere, never as markup. */
const HTML_USER = `<img src=x onerror="alert('xss')">`;

let stack: TestHost;
let browser: Browser;
let page: Page;
let client: OpenAI;
let key = "";
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  browser = await launchBrowser();
  const context = await browser.newContext({ viewport: { width: 1366, height: 900 } });
  page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    if (message.location().url.startsWith(`${stack.url}/dashboard/api/`)) return;
    problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));
  // An alert would mean a user id ran as markup.
  page.on("dialog", (dialog) => {
    problems.push(`unexpected ${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "e2e");

async function chat(content: string, user?: string) {
  const completion = await client.chat.completions.create(
    { model: "gpt-4o-mini", messages: [{ role: "user", content }] },
    user === undefined ? {} : { headers: { "X-User-ID": user } },
  );
  await stack.drain();
  return completion;
}

/** What the call costs from credits: the same price list and markup the proxy charged with. */
function managedCost(usage: OpenAI.CompletionUsage | undefined): number {
  const price = activePriceCatalogue({}).priceFor("openai", "gpt-4o-mini", new Date());
  if (!price || !usage) throw new Error("no price or no usage");
  return costMicros(
    {
      inputTokens: usage.prompt_tokens,
      outputTokens: usage.completion_tokens,
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      estimated: false,
      complete: true,
    },
    price,
    { applyMarkup: true },
  );
}

const rows = () => page.locator("table.interactions tbody tr");

async function openPage(name: string, path = name.toLowerCase()): Promise<void> {
  await page.getByRole("link", { name, exact: true }).click();
  await page.waitForURL(`${stack.url}/dashboard/${path}`);
}

describe.sequential("the dashboard end to end", () => {
  it("signs in through the local identity provider", async () => {
    await page.goto(`${stack.url}/dashboard/`);
    // The overview is the landing page.
    await signIn(page, stack);
    await openPage("API keys", "keys");
    await expect.poll(() => page.getByText("No API keys yet").isVisible()).toBe(true);
  });

  it("shows empty Interactions and Usage pages before any call", async () => {
    await openPage("Interactions");
    await expect.poll(() => page.getByText("No interactions yet").isVisible()).toBe(true);
    await openPage("Usage");
    await expect.poll(() => page.getByText("No usage in this range").isVisible()).toBe(true);
  });

  it("funds the project and creates a key", async () => {
    await openPage("Credits");
    await page.getByLabel("Amount (USD)").fill("10");
    await page.getByRole("button", { name: "Grant credits" }).click();
    await expect.poll(() => page.getByTestId("available").textContent()).toBe("$10.00");

    await openPage("API keys", "keys");
    await page.getByRole("button", { name: "Create key", exact: true }).click();
    await page.getByLabel("Name", { exact: true }).fill("end-to-end");
    await page.locator("dialog").getByRole("button", { name: "Create key" }).click();
    key = await page.getByLabel("Your new API key").inputValue();
    expect(key).toMatch(/^dmt_[a-z0-9]{16}_[A-Za-z0-9]{43}$/);
    await page.getByRole("button", { name: "Done" }).click();
    client = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
  });

  let first: OpenAI.ChatCompletion;
  let streamed = "";

  it("lists calls made through the proxy with their tokens and cost, newest first", async () => {
    first = await chat("How many apples are in the basket?", HTML_USER);
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "Stream a short answer" }],
      stream: true,
    });
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta.content ?? "";
    await stack.drain();

    await openPage("Interactions");
    await expect.poll(() => rows().count()).toBe(2);
    const plain = rows().nth(1);
    const usage = first.usage;
    expect(await plain.textContent()).toContain(`${usage?.prompt_tokens} → ${usage?.completion_tokens}`);
    expect(await plain.textContent()).toContain(formatUsd(managedCost(usage)));
    expect(await plain.locator(".badge").allTextContents()).toEqual(["200", "Credits"]);
    // The user id is text: no image element was made from it.
    expect(await plain.locator(".user-id").textContent()).toBe(HTML_USER);
    expect(await page.locator("table img").count()).toBe(0);
  });

  it("opens a streamed call with its assembled text, bodies and tokens", async () => {
    await rows().first().getByRole("button").click();
    const dialog = page.locator("dialog");
    await expect.poll(() => dialog.getByText("Assembled stream text").isVisible()).toBe(true);
    expect(streamed.length).toBeGreaterThan(0);
    expect(await dialog.locator("#detail-text + pre").textContent()).toBe(streamed);
    expect(await dialog.locator("#detail-request + pre").textContent()).toContain(
      '"content": "Stream a short answer"',
    );
    expect(await dialog.textContent()).toContain("Input");
    await page.keyboard.press("Escape");
    await expect.poll(() => page.locator("dialog").count()).toBe(0);
  });

  it("filters by a user id with markup, shown as text", async () => {
    await page.getByLabel("User ID").fill(HTML_USER);
    await page.getByRole("button", { name: "Apply" }).click();
    await expect.poll(() => rows().count()).toBe(1);
    expect(page.url()).toContain("user_id=");
    expect(await rows().first().locator(".user-id").textContent()).toBe(HTML_USER);
    await page.getByRole("button", { name: "Clear" }).click();
    await expect.poll(() => rows().count()).toBe(2);
  });

  it("counts the calls in Usage and updates the charts after another call", async () => {
    await openPage("Usage");
    const requests = page.locator('.chart-card[data-metric="requests"]');
    await expect.poll(() => requests.getAttribute("data-total")).toBe("2");
    expect(await page.getByTestId("usage-requests").textContent()).toBe("2");
    expect(await page.locator(".chart-card canvas").count()).toBe(3);
    expect(await page.getByRole("img", { name: /^Requests per day: 2 in total/ }).count()).toBe(1);

    await chat("One more, please");
    await openPage("Usage");
    await expect.poll(() => requests.getAttribute("data-total")).toBe("3");
    const tokens = Number(await page.locator('.chart-card[data-metric="tokens"]').getAttribute("data-total"));
    expect(tokens).toBeGreaterThan(0);
    expect(await page.locator(".card").filter({ hasText: "By vendor and model" }).textContent()).toContain(
      "gpt-4o-mini",
    );
  });

  it("bills the next call as BYOK once an OpenAI key is stored", async () => {
    await openPage("Settings");
    await page.getByRole("button", { name: "Set the OpenAI key" }).click();
    await page.getByLabel("Key", { exact: true }).fill("sk-e2e-own-key-0123456789WXYZ");
    await page.getByRole("button", { name: "Save key" }).click();
    await expect.poll(() => page.locator('tr[data-vendor="openai"]').textContent()).toContain("••••WXYZ");

    await openPage("Credits");
    const before = await page.getByTestId("available").textContent();
    await chat("Use my own key");
    await openPage("Interactions");
    await expect.poll(() => rows().count()).toBe(4);
    expect(await rows().first().locator(".badge").allTextContents()).toEqual(["200", "BYOK"]);
    await page.getByLabel("Billing").selectOption("byok");
    await page.getByRole("button", { name: "Apply" }).click();
    await expect.poll(() => rows().count()).toBe(1);
    await openPage("Credits");
    await expect.poll(() => page.getByTestId("available").textContent()).toBe(before);
  });

  it("revokes the key, after which the proxy refuses it", async () => {
    await openPage("API keys", "keys");
    await page.getByRole("button", { name: "Revoke key end-to-end" }).click();
    await page.locator("dialog").getByRole("button", { name: "Revoke key" }).click();
    await expect.poll(() => page.locator("tbody tr .badge").textContent()).toBe("Revoked");
    const refused = await chat("Still there?").then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
  });

  it("signs out", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Yes, sign me out" }).click();
    await page.waitForURL(`${stack.url}/dashboard/signed-out`);
    await expect.poll(() => page.getByText("You have signed out.").isVisible()).toBe(true);
  });

  it("logged no error on any page (no CSP violation, no failed script, no alert)", () => {
    expect(problems).toEqual([]);
  });
});
