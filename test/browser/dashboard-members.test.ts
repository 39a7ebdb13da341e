import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoMemberStore } from "../../lambda/adapters/dynamodb/members";
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
import { startTestHost, type TestHost } from "../support/host";

/**
 * The Members page, a viewer's view of the dashboard and the phone layout, in a real browser over the
 * local stack: an admin lists, invites, changes a role and removes; a viewer sees the list and every
 * control that would change the project disabled, with the reason; at 390 px the page starts near the
 * top and the navigation is a menu. Screenshots go to $DMT_SHOTS when it is set.
 */

const PROJECT = "members-demo";
const COLLEAGUE = { userId: "colleague-user", email: "colleague@example.com" };
/** Generous: the machine may be busy. */
const STEP_MS = 180_000;

let stack: TestHost;
let members: DynamoMemberStore;
let devUserId = "";
let browser: Browser;
let page: Page;
const problems: string[] = [];

beforeAll(async () => {
  stack = await startTestHost();
  await stack.newKey({ projectId: PROJECT, name: "laptop" });
  await addDevMember(stack, PROJECT);
  members = new DynamoMemberStore(stack.db, tableNames(process.env));
  devUserId = (await localUserDirectory(stack.dataDir).findUserId(stack.dashboard.email)) ?? "";
  await members.addMembership({
    ...COLLEAGUE,
    projectId: PROJECT,
    role: "viewer",
    createdAt: Date.now(),
  });
  browser = await launchBrowser();
  page = await dashboardPage(browser, stack, problems);
}, STEP_MS);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
});

screenshotOnFailure(() => page, "members");

const shot = async (name: string, fullPage = true) => {
  if (process.env.DMT_SHOTS)
    await page.screenshot({ path: `${process.env.DMT_SHOTS}/${name}.png`, fullPage });
};
const rows = () => page.locator("table.members tbody tr");
const row = (userId: string) => page.locator(`tr[data-member="${userId}"]`);
const lastToast = () => page.locator(".toast").last().textContent();

async function openMembers(): Promise<void> {
  await page.goto(`${stack.url}/dashboard/members`);
  await page.waitForURL(`${stack.url}/dashboard/members`);
  await rows().first().waitFor({ state: "visible", timeout: 60_000 });
}

describe.sequential("members, viewers and the phone layout in a browser", () => {
  it(
    "lists the members with their roles, and invites by email with the CLI's rules",
    async () => {
      await page.goto(`${stack.url}/dashboard/`);
      await signIn(page, stack);
      await page.selectOption("#project", PROJECT);
      await page.getByRole("link", { name: "Members" }).click();
      await rows().first().waitFor({ state: "visible", timeout: 60_000 });
      expect(await rows().count()).toBe(2);
      expect(await row(devUserId).textContent()).toContain(stack.dashboard.email);
      expect(await row(devUserId).textContent()).toContain("You");
      expect(await row(devUserId).locator("select").inputValue()).toBe("admin");
      expect(await row(COLLEAGUE.userId).textContent()).toContain(COLLEAGUE.email);
      expect(await row(COLLEAGUE.userId).locator("select").inputValue()).toBe("viewer");
      // Added: the one date format, UTC with the zone shown.
      expect(await row(COLLEAGUE.userId).locator("time").textContent()).toMatch(
        /^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/,
      );

      // Someone the identity provider does not know: the service's message, in the form.
      await page.getByLabel("Email").fill("nobody@example.com");
      await page.getByRole("button", { name: "Invite" }).click();
      await expect
        .poll(() => page.locator(".form-error").first().textContent())
        .toContain("No dashboard user has the email nobody@example.com");
      expect(await page.getByLabel("Email").getAttribute("aria-invalid")).toBe("true");
      // An empty email is named before anything is sent.
      await page.getByLabel("Email").fill("");
      await page.getByRole("button", { name: "Invite" }).click();
      await expect
        .poll(() => page.locator(".form-error").first().textContent())
        .toBe("Enter the email of the person to invite.");
      // A member already: nothing changes, and the page says so.
      await page.getByLabel("Email").fill(stack.dashboard.email);
      await page.getByRole("button", { name: "Invite" }).click();
      await expect.poll(lastToast).toContain("is already a member (Admin); nothing changed.");
      await expect.poll(() => rows().count()).toBe(2);
      await shot("members-desktop");
    },
    STEP_MS,
  );

  it(
    "changes a member's role and removes a member",
    async () => {
      await row(COLLEAGUE.userId).locator("select").selectOption("admin");
      await expect.poll(lastToast).toContain(`${COLLEAGUE.email} is now admin.`);
      expect((await members.getMembership(COLLEAGUE.userId, PROJECT))?.role).toBe("admin");

      await row(COLLEAGUE.userId)
        .getByRole("button", { name: `Remove ${COLLEAGUE.email}` })
        .click();
      const dialog = page.getByRole("dialog");
      expect(await dialog.textContent()).toContain(`Remove ${COLLEAGUE.email}?`);
      await shot("members-remove-desktop", false);
      await dialog.getByRole("button", { name: "Remove" }).click();
      await expect.poll(() => rows().count()).toBe(1);
      expect(await members.getMembership(COLLEAGUE.userId, PROJECT)).toBeUndefined();
    },
    STEP_MS,
  );

  it(
    "at 390 px starts the page within 120 px and folds the navigation into a menu",
    async () => {
      await page.setViewportSize({ width: 390, height: 844 });
      await openMembers();
      const heading = await page.locator("#page-title").boundingBox();
      expect(heading?.y ?? 1000).toBeLessThan(120);
      const link = page.getByRole("link", { name: "Members" });
      expect(await link.isVisible()).toBe(false);
      const menu = page.getByRole("button", { name: "Menu" });
      expect(await menu.getAttribute("aria-expanded")).toBe("false");
      expect(await tooWide(page)).toEqual([]);
      await shot("members-390");

      await menu.click();
      expect(await menu.getAttribute("aria-expanded")).toBe("true");
      expect(await link.isVisible()).toBe(true);
      expect(await page.getByRole("button", { name: "Sign out" }).isVisible()).toBe(true);
      expect(await page.locator("#project").isVisible()).toBe(true);
      await shot("menu-open-390", false);
      await page.getByRole("link", { name: "API keys" }).click();
      await page.waitForURL(`${stack.url}/dashboard/keys`);
      // Choosing a page closes the menu.
      expect(await menu.getAttribute("aria-expanded")).toBe("false");
      expect(await page.getByRole("link", { name: "Members" }).isVisible()).toBe(false);
      await page.setViewportSize({ width: 1366, height: 900 });
      expect(await page.getByRole("link", { name: "Members" }).isVisible()).toBe(true);
      expect(await menu.isVisible()).toBe(false);
    },
    STEP_MS,
  );

  it(
    "shows a viewer every control that would change the project disabled, and why",
    async () => {
      await members.setRole(devUserId, PROJECT, "viewer");
      await openMembers();
      const note = page.getByTestId("viewer-note");
      expect(await note.isVisible()).toBe(true);
      expect(await note.textContent()).toContain("You are a viewer of this project");
      // The list still reads; its controls do not.
      expect(await row(devUserId).locator("select").isDisabled()).toBe(true);
      expect(await page.getByRole("button", { name: "Invite" }).isDisabled()).toBe(true);
      expect(await page.getByLabel("Email").isDisabled()).toBe(true);
      expect(await page.getByRole("button", { name: "Invite" }).getAttribute("aria-describedby")).toContain(
        "viewer-note",
      );
      await shot("members-viewer-desktop");

      const disabled = async (path: string, names: string[]) => {
        await page.goto(`${stack.url}/dashboard/${path}`);
        await page.locator(".loading").first().waitFor({ state: "detached" });
        for (const name of names) {
          const control = page.getByRole("button", { name, exact: true }).first();
          await control.waitFor({ state: "visible" });
          expect(await control.isDisabled(), `${path}: ${name}`).toBe(true);
        }
      };
      await disabled("keys", ["Create key", "Revoke key laptop"]);
      await shot("keys-viewer-desktop", false);
      await disabled("budgets", ["Set budget"]);
      await disabled("settings", ["Save alerts", "Add webhook", "Set the OpenAI key", "Request a deletion"]);
      expect(await page.locator("#alert-low-balance").isDisabled()).toBe(true);
      expect(await page.locator("#privacy-store").isDisabled()).toBe(true);

      await page.setViewportSize({ width: 390, height: 844 });
      await openMembers();
      expect(await note.isVisible()).toBe(true);
      expect(await tooWide(page)).toEqual([]);
      await shot("members-viewer-390");
      await page.setViewportSize({ width: 1366, height: 900 });

      // Back to admin: the same controls work again.
      await members.setRole(devUserId, PROJECT, "admin");
      await openMembers();
      expect(await note.isVisible()).toBe(false);
      expect(await page.getByRole("button", { name: "Invite" }).isDisabled()).toBe(false);
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
