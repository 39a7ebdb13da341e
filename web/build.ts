import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build } from "esbuild";

/**
 * Builds the dashboard SPA with esbuild: `index.html`, `assets/app.{js,css}` (with source maps) and
 * the icon.
 * The local server builds it in memory on first use; `npm run build:web` writes it to a folder for
 * CDK to upload. No inline script or style anywhere, so `default-src 'self'` holds.
 */

/** Set where this file is bundled (the CLI's bundle in dist/cli/): where the sources are from there. */
declare const DMT_WEB_SOURCES: string | undefined;
/** The dashboard's sources: this file's folder. */
const root = fileURLToPath(
  new URL(typeof DMT_WEB_SOURCES === "string" ? DMT_WEB_SOURCES : ".", import.meta.url),
);

/** Files by path below the dashboard's base (`index.html`, `assets/app.js`, ...). */
export type WebFiles = Map<string, Uint8Array>;

export async function bundleWeb(): Promise<WebFiles> {
  const result = await build({
    absWorkingDir: root,
    entryPoints: [
      { in: "src/main.ts", out: "app" },
      { in: "src/styles.css", out: "app" },
    ],
    outdir: "assets",
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    sourcemap: true,
    write: false,
    logLevel: "silent",
  });
  const files: WebFiles = new Map();
  files.set("index.html", readFileSync(join(root, "index.html")));
  files.set("assets/favicon.svg", readFileSync(join(root, "favicon.svg")));
  for (const output of result.outputFiles) files.set(relative(root, output.path), output.contents);
  return files;
}

async function main(outdir: string): Promise<void> {
  const files = await bundleWeb();
  for (const [path, contents] of files) {
    const target = join(outdir, path);
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, contents);
  }
  process.stdout.write(`Built the dashboard into ${outdir} (${[...files.keys()].join(", ")}).\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  await main(resolve(process.argv[2] ?? "dist/web"));
}
