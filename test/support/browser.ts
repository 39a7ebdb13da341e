import { execFileSync } from "node:child_process";
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import { brotliDecompressSync, createBrotliDecompress } from "node:zlib";
import { type Browser, chromium, type Page } from "playwright-core";
import { beforeEach } from "vitest";
import { DynamoMemberStore } from "../../lambda/adapters/dynamodb/members";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { addMember, type GrantedRole } from "../../lambda/core/members";
import { localUserDirectory } from "../../lambda/local/oidc";
import type { TestHost } from "./host";

/**
 * The browser that the browser tests (and the benchmark report's charts) drive: the headless Chromium
 * shipped inside the `@sparticuz/chromium` npm package, so `npm install` brings it and nothing is
 * downloaded or installed from the system. The package holds the binary, the NSS libraries it links
 * against and a font, brotli-compressed. They are unpacked once per package version beside the package
 * (node_modules/.cache/), into a folder of their own that is renamed into place whole: test files
 * launching at the same time never run a half-written binary, and a run killed mid-unpack leaves only
 * a stray temporary folder. (The package's own `executablePath()` unpacks into a shared /tmp/chromium,
 * checked by existence only, which concurrent test files would race on.)
 */

/** Headless, as root, offline: no sandbox (root), no GPU, and none of the calls home that a closed network refuses. */
const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

const require = createRequire(import.meta.url);

/** The package's folder: its entry is build/index.js. */
const packageDir = () => dirname(dirname(require.resolve("@sparticuz/chromium")));

/** Unpacks the binary, its libraries and the font into a folder for this package version; returns the folder. */
async function unpacked(): Promise<string> {
  const pkg = packageDir();
  const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { version: string };
  const dir = join(pkg, "..", "..", ".cache", `sparticuz-chromium-${version}`);
  if (existsSync(dir)) return dir;

  const staging = `${dir}.${process.pid}.${Date.now()}`;
  mkdirSync(staging, { recursive: true });
  try {
    const bin = join(pkg, "bin");
    await pipeline(
      createReadStream(join(bin, "chromium.br")),
      createBrotliDecompress(),
      createWriteStream(join(staging, "chromium"), { mode: 0o755 }),
    );
    // al2023: the NSS and expat libraries the binary links against, so no system package is needed.
    for (const archive of ["al2023.tar.br", "fonts.tar.br"]) {
      execFileSync("tar", ["-x", "-C", staging], {
        input: brotliDecompressSync(readFileSync(join(bin, archive))),
      });
    }
    // The package's fonts.conf names Lambda's paths; this one names the unpacked font.
    writeFileSync(
      join(staging, "fonts.conf"),
      `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig><dir>${join(dir, "fonts")}</dir><cachedir>${join(dir, "fonts-cache")}</cachedir></fontconfig>\n`,
    );
    renameSync(staging, dir);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    // Another process renamed its complete copy into place first.
    if (!existsSync(dir)) throw error;
  }
  return dir;
}

/** How long one browser step (a click, a wait for text) may take on a 2-core machine busy with other work. */
export const STEP_TIMEOUT_MS = 30_000;

/** Launches the packaged headless Chromium through playwright-core. */
export async function launchBrowser(): Promise<Browser> {
  const dir = await unpacked();
  return chromium.launch({
    executablePath: join(dir, "chromium"),
    args: FLAGS,
    env: { ...process.env, LD_LIBRARY_PATH: join(dir, "lib"), FONTCONFIG_FILE: join(dir, "fonts.conf") },
  });
}

/** What the dashboard helpers need of a test stack. */
interface DashboardStack {
  url: string;
  dashboard: { email: string; password: string };
}

/**
 * A desktop-sized page for the dashboard, collecting into `problems` what a user would see go wrong:
 * uncaught errors and console errors, except the API's own 4xx/5xx answers (tests provoke those).
 */
export async function dashboardPage(
  browser: Browser,
  stack: DashboardStack,
  problems: string[],
): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1366, height: 900 } })).newPage();
  page.setDefaultTimeout(60_000);
  page.on("console", (message) => {
    if (message.type() !== "error") return;
    if (message.location().url.startsWith(`${stack.url}/dashboard/api/`)) return;
    problems.push(message.text());
  });
  page.on("pageerror", (error) => problems.push(error.message));
  return page;
}

/**
 * From the dashboard's sign-in screen: the development user signs in at the local identity provider,
 * and the page is back on `returnTo` (the overview, or the page the sign-in started from).
 */
export async function signIn(
  page: Page,
  stack: DashboardStack,
  returnTo = "/dashboard/overview",
): Promise<void> {
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/oidc\/interaction\//);
  await page.getByLabel("Email").fill(stack.dashboard.email);
  await page.getByLabel("Password").fill(stack.dashboard.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(`${stack.url}${returnTo}`);
}

/** Elements wider than the viewport, or reaching past its right edge: none may exist. */
export function tooWide(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...document.querySelectorAll("body *")]
      .filter((el) => {
        const box = el.getBoundingClientRect();
        return box.width > 0 && (box.width > window.innerWidth || box.right > window.innerWidth + 0.5);
      })
      .map((el) => `${el.tagName.toLowerCase()}.${el.className}`),
  );
}

/** Where a failed browser test leaves its screenshot. */
const SHOTS = "test-results";

/** Each failed test of the file saves a full-page screenshot, `test-results/<prefix>-<test name>.png`. */
export function screenshotOnFailure(page: () => Page | undefined, prefix: string): void {
  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(async () => {
      mkdirSync(SHOTS, { recursive: true });
      await page()?.screenshot({
        path: `${SHOTS}/${prefix}-${task.name.replace(/\W+/g, "-")}.png`,
        fullPage: true,
      });
    });
  });
}

/** The development user made a member of `projectId`, with the code `dmt members add` runs. */
export async function addDevMember(
  stack: TestHost,
  projectId: string,
  role: GrantedRole = "admin",
): Promise<void> {
  await addMember(
    stack.store,
    new DynamoMemberStore(stack.db, tableNames(process.env)),
    localUserDirectory(stack.dataDir),
    { projectId, email: stack.dashboard.email, role },
    Date.now(),
  );
}
