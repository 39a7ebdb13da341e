import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser, STEP_TIMEOUT_MS, screenshotOnFailure, signIn } from "../support/browser";
import { startTestHost, type TestHost } from "../support/host";

/**
 * The dashboard in a real browser (headless Chromium from npm, driven by playwright-core): sign in through the
 * local provider, create a key, copy it, use it, revoke it, sign out. One browser for the file; the
 * steps share one page and run in order. A failing step leaves a screenshot in test-results/.
 */

let stack: TestHost;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost();
  browser = await launchBrowser();
  context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: stack.url });
  page = await context.newPage();
  page.setDefaultTimeout(STEP_TIMEOUT_MS);
  // Anything the page logs as an error (a CSP violation, a failed script) fails the run at the end.
  // (Refusals the test provokes from the dashboard API are expected; the page shows their message.)
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    if (message.location().url.startsWith(`${stack.url}/dashboard/api/`)) return;
    problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "dashboard");

const KEY_NAME = "<b>bold</b> & <script>alert(1)</script>";
let copiedKey = "";

async function status(key: string): Promise<number> {
  return (await fetch(`${stack.url}/api/v1/status`, { headers: { Authorization: `Bearer ${key}` } })).status;
}

describe.sequential("the dashboard in a browser", () => {
  it("signs in through the local identity provider", async () => {
    await page.goto(`${stack.url}/dashboard/`);
    // The overview is the landing page.
    await signIn(page, stack);
    await page.getByRole("link", { name: "API keys", exact: true }).click();
    await page.waitForURL(`${stack.url}/dashboard/keys`);
    await expect.poll(() => page.getByText("No API keys yet").isVisible()).toBe(true);
    await expect.poll(() => page.getByText(stack.dashboard.email).isVisible()).toBe(true);
  });

  it("opens the create form by keyboard and closes it with Escape", async () => {
    const create = page.getByRole("button", { name: "Create key", exact: true });
    await create.focus();
    await page.keyboard.press("Enter");
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("key-name");
    await page.keyboard.press("Escape");
    await expect.poll(() => page.locator("dialog").count()).toBe(0);
  });

  it("explains why a 10 KB name is refused", async () => {
    await page.getByRole("button", { name: "Create key", exact: true }).click();
    await page.getByLabel("Name", { exact: true }).fill("n".repeat(10 * 1024));
    await page.locator("dialog").getByRole("button", { name: "Create key" }).click();
    await expect
      .poll(() => page.getByRole("alert").textContent())
      .toContain("Invalid field 'name': must be at most 100 characters");
    await page.getByRole("button", { name: "Cancel" }).click();
  });

  it("creates one key on a double submit and shows it once, with a copy button", async () => {
    await page.getByRole("button", { name: "Create key", exact: true }).click();
    await page.getByLabel("Name", { exact: true }).fill(KEY_NAME);
    await page.locator("dialog").getByRole("button", { name: "Create key" }).dblclick();
    await expect
      .poll(() => page.getByText("This is the only time the full key is shown.").isVisible())
      .toBe(true);
    await page.getByRole("button", { name: "Copy" }).click();
    await expect.poll(() => page.getByText("Copied to the clipboard.").isVisible()).toBe(true);
    copiedKey = await page.evaluate(() => navigator.clipboard.readText());
    expect(copiedKey).toMatch(/^dmt_[a-z0-9]{16}_[A-Za-z0-9]{43}$/);
    expect(await page.getByLabel("Your new API key").inputValue()).toBe(copiedKey);
    await page.getByRole("button", { name: "Done" }).click();

    const rows = page.locator("tbody tr");
    await expect.poll(() => rows.count()).toBe(1);
    // The name is shown as text: no element was made from its markup.
    expect(await rows.first().locator(".key-name").textContent()).toBe(KEY_NAME);
    expect(await rows.first().locator("b, script").count()).toBe(0);
    expect(await rows.first().textContent()).toContain(copiedKey.slice(0, 20));
    expect(await rows.first().textContent()).not.toContain(copiedKey.slice(21));
  });

  it("lets the copied key call the API", async () => {
    expect(await status(copiedKey)).toBe(200);
  });

  it("revokes the key after a confirmation, and the API refuses it", async () => {
    await page.getByRole("button", { name: `Revoke key ${KEY_NAME}` }).click();
    const confirm = page.locator("dialog").getByRole("button", { name: "Revoke key" });
    await confirm.click();
    await expect.poll(() => page.locator("tbody tr .badge").textContent()).toBe("Revoked");
    await expect.poll(() => page.getByText("was revoked.").isVisible()).toBe(true);
    expect(await status(copiedKey)).toBe(401);
  });

  it("lets an operator grant credits and shows them in the balance and the ledger", async () => {
    await page.getByRole("link", { name: "Credits" }).click();
    await expect.poll(() => page.getByTestId("available").textContent()).toBe("$0.00");
    await page.getByLabel("Amount (USD)").fill("25");
    await page.getByLabel("Source").selectOption("invoice");
    await page.getByLabel("Note (optional)").fill("first invoice");
    await page.getByRole("button", { name: "Grant credits" }).click();
    await expect.poll(() => page.getByTestId("available").textContent()).toBe("$25.00");
    // The statement: the grant is a credit line between the opening and closing balances.
    const grant = page.locator("tbody tr", { hasText: "+$25.00" });
    await expect.poll(() => grant.count()).toBe(1);
    expect(await grant.textContent()).toContain("invoice");
    expect(await grant.textContent()).toContain("first invoice");
  });

  it("sets a budget with a spend bar, explains a refused one, edits and deletes it", async () => {
    await page.getByRole("link", { name: "Budgets" }).click();
    await expect.poll(() => page.getByRole("heading", { name: "No budgets" }).count()).toBe(1);
    // A checkbox keeps its own size, its words on the same line beside it.
    const soft = await page.getByLabel("Soft: report only, never refuse").boundingBox();
    const softWords = await page.getByText("Soft: report only, never refuse").boundingBox();
    expect(soft?.width).toBeLessThan(30);
    expect(softWords && soft && softWords.x > soft.x && softWords.x - soft.x < 40).toBe(true);
    expect(softWords?.height).toBeLessThan(30);
    await page.getByLabel("Limit (USD)").fill("0");
    await page.getByRole("button", { name: "Set budget" }).click();
    await expect.poll(() => page.getByRole("alert").first().textContent()).toMatch(/more than \$0/);
    await page.getByLabel("Limit (USD)").fill("500");
    await page.locator("#budget-window").selectOption("month");
    await page.getByRole("button", { name: "Set budget" }).click();
    const row = page.locator("tr[data-budget]");
    await expect.poll(() => row.textContent()).toContain("$0.00 of $500.00");
    expect(await row.locator("meter").count()).toBe(1);
    await row.getByRole("button", { name: "Edit" }).click();
    await page.getByLabel("Limit (USD)").fill("450");
    await page.getByRole("button", { name: "Save budget" }).click();
    await expect.poll(() => row.textContent()).toContain("$0.00 of $450.00");
    await row.getByRole("button", { name: "Delete" }).click();
    await expect.poll(() => page.getByRole("heading", { name: "No budgets" }).count()).toBe(1);
  });

  it("stores a vendor key, shows only its last 4 characters, and deletes it", async () => {
    await page.getByRole("link", { name: "Settings" }).click();
    await page.getByRole("button", { name: "Set the OpenAI key" }).click();
    const secret = "sk-browser-test-0123456789LAST";
    await page.getByLabel("Key", { exact: true }).fill(`${secret} `);
    await page.getByRole("button", { name: "Save key" }).click();
    await expect.poll(() => page.locator("dialog").getByRole("alert").textContent()).toMatch(/whitespace/);
    await page.getByLabel("Key", { exact: true }).fill(secret);
    await page.getByRole("button", { name: "Save key" }).click();
    const row = page.locator('tr[data-vendor="openai"]');
    await expect.poll(() => row.textContent()).toContain("••••LAST");
    expect(await page.content()).not.toContain(secret);
    await page.getByRole("button", { name: "Delete the OpenAI key" }).click();
    await page.locator("dialog").getByRole("button", { name: "Delete key" }).click();
    await expect.poll(() => row.textContent()).toContain("Not set");
  });

  it("opens the deletion request form by keyboard, and explains refused inputs", async () => {
    await expect.poll(() => page.getByText("No deletion requests yet").isVisible()).toBe(true);
    await page.getByRole("button", { name: "Request a deletion" }).focus();
    await page.keyboard.press("Enter");
    await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe("deletion-user-id");
    const dialog = page.locator("dialog");
    const alert = () => dialog.getByRole("alert").filter({ hasText: /\S/ }).textContent();

    // Checked here: no user id.
    await page.getByLabel("Reason").fill("cleanup");
    await dialog.getByRole("button", { name: "Review request" }).click();
    await expect.poll(alert).toBe("Enter the user ID whose data to delete.");

    // Checked by the API, after the confirmation: a malformed transaction id, an oversized user id.
    await page.getByLabel("Specific transactions").check();
    await page.getByLabel("Transaction IDs").fill("tx-1\n<b>x</b>");
    await dialog.getByRole("button", { name: "Review request" }).click();
    await expect.poll(() => dialog.getByText("2 transactions of this project.").isVisible()).toBe(true);
    await dialog.getByRole("button", { name: "Delete data" }).click();
    await expect.poll(alert).toContain("Invalid field 'transaction_ids[1]': is not a transaction id");
    await dialog.getByRole("button", { name: "Back" }).click();
    await page.getByLabel("All data of a user").check();
    await page.getByLabel("User ID").fill("u".repeat(300));
    await dialog.getByRole("button", { name: "Review request" }).click();
    await dialog.getByRole("button", { name: "Delete data" }).click();
    await expect.poll(alert).toContain("Invalid field 'user_id': must be at most 256 characters");
    await dialog.getByRole("button", { name: "Back" }).click();
    await page.keyboard.press("Escape");
    await expect.poll(() => dialog.count()).toBe(0);
    await expect.poll(() => page.getByText("No deletion requests yet").isVisible()).toBe(true);
  });

  it("requests a user's deletion after a confirmation, once on a double submit, and lists it until it completes", async () => {
    const user = "<b>alice</b>@example.com";
    const reason = "<i>GDPR</i> erasure #42";
    await page.getByRole("button", { name: "Request a deletion" }).click();
    await page.getByLabel("User ID").fill(user);
    await page.getByLabel("Reason").fill(reason);
    const dialog = page.locator("dialog");
    await dialog.getByRole("button", { name: "Review request" }).click();
    // The confirmation says what goes, as text.
    await expect.poll(() => dialog.locator("strong.deletion-subject").textContent()).toBe(user);
    expect(await dialog.locator("p b, p i").count()).toBe(0);

    // Every status the row shows, in order, from the moment the request is accepted.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { deletionStatuses: string[] }).deletionStatuses = seen;
      new MutationObserver(() => {
        const text = document.querySelector("table.deletion-requests tbody tr .badge")?.textContent;
        if (text && seen.at(-1) !== text) seen.push(text);
      }).observe(document.body, { childList: true, subtree: true, characterData: true });
    });
    await dialog.getByRole("button", { name: "Delete data" }).dblclick();
    await expect.poll(() => dialog.count()).toBe(0);
    await expect
      .poll(() => page.getByText(/Deletion request del_[0-9a-f]{24} was queued\./).isVisible())
      .toBe(true);

    const rows = page.locator("table.deletion-requests tbody tr");
    await expect
      .poll(() => rows.first().locator(".badge").textContent(), { timeout: 60_000, interval: 200 })
      .toBe("Completed");
    const statuses = await page.evaluate(
      () => (window as unknown as { deletionStatuses: string[] }).deletionStatuses,
    );
    expect(statuses[0]).toBe("Queued");
    expect(statuses.at(-1)).toBe("Completed");
    const order = ["Queued", "Running", "Completed"];
    expect(statuses.map((s) => order.indexOf(s))).toEqual([...statuses.map((s) => order.indexOf(s))].sort());
    await expect
      .poll(() => page.getByText(/Deletion request del_[0-9a-f]{24} completed\./).isVisible())
      .toBe(true);

    expect(await rows.count()).toBe(1);
    const row = rows.first();
    expect(await row.locator(".reason").textContent()).toBe(reason);
    expect(await row.locator("b, i").count()).toBe(0);
    expect(await row.textContent()).toContain("0 rows deleted · 0 files changed · 0 copies purged");
    expect(await row.textContent()).toMatch(/User [0-9a-f]{10}…/);
    // The user id itself is shown nowhere once the dialog is gone: only its hash.
    expect(await page.content()).not.toContain("alice");

    // The admin finds the request again by the id they gave: hashed in the browser, matched to the row.
    const find = page.getByLabel("Find a user's requests");
    const found = () => page.locator("#deletion-find-result").textContent();
    await find.fill("bob@example.com");
    await expect.poll(found).toBe("No request for this user among those loaded.");
    expect(await row.isHidden()).toBe(true);
    await find.fill(user);
    await expect.poll(found).toBe("1 request for this user.");
    expect(await row.isVisible()).toBe(true);
    await find.fill("");
    await expect.poll(found).toBe("");
    expect(await row.isVisible()).toBe(true);
  });

  it("signs out of the dashboard and of the provider", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("button", { name: "Yes, sign me out" }).click();
    await page.waitForURL(`${stack.url}/dashboard/signed-out`);
    await expect.poll(() => page.getByText("You have signed out.").isVisible()).toBe(true);
    // The provider's session is gone too: signing in again asks for the password.
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(/\/oidc\/interaction\//);
    expect(await page.getByLabel("Password").isVisible()).toBe(true);
  });

  it("logged no error on any page (no CSP violation, no failed script)", () => {
    expect(problems).toEqual([]);
  });
});
