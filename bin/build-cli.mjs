// Bundles the `dmt` CLI into dist/cli/ with esbuild, so that a command starts without compiling
// TypeScript (tsx takes seconds). Run by `npm install` (the `prepare` script) and by hand after a
// change; bin/dmt.mjs falls back to tsx while the bundle is missing or older than its sources.
import { copyFileSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const outdir = join(root, "dist", "cli");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

rmSync(outdir, { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  entryPoints: ["bin/cli.ts"],
  outdir,
  entryNames: "dmt",
  // Each command's modules in chunks of their own, loaded when it runs: --version reads one small file.
  splitting: true,
  bundle: true,
  format: "esm",
  define: { DMT_VERSION: JSON.stringify(pkg.version) },
  platform: "node",
  target: "node20",
  // Native or self-loading packages stay in node_modules, and so does the AWS SDK: bundled and split
  // into chunks, its clients lost their classes ("is not a constructor") under --stack.
  external: ["@duckdb/*", "dynalite", "oidc-provider", "esbuild", "tsx", "@aws-sdk/*", "@smithy/*"],
  // CommonJS dependencies call require(): give the ES module one.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  minify: true,
  metafile: true,
  logLevel: "warning",
});
// The embedded store's worker is loaded by path beside the code that starts it.
copyFileSync(join(root, "lambda/local/dynamo-worker.mjs"), join(outdir, "dynamo-worker.mjs"));
const inputs = Object.keys(result.metafile.inputs).filter((path) => !path.startsWith("node_modules/"));
writeFileSync(join(outdir, "inputs.json"), JSON.stringify({ builtAt: Date.now(), inputs }));
process.stdout.write(`Bundled the dmt CLI into ${relative(root, outdir)}/ (${inputs.length} sources).\n`);
