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
import { type Browser, chromium } from "playwright-core";

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
