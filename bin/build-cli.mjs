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

/**
 * The AWS SDK is CommonJS. Imported as ES modules, Node runs its CommonJS lexer over every file of the
 * SDK to find their named exports (most of a store command's start); required, it does not. Each
 * `@aws-sdk/*` or `@smithy/*` import becomes a CommonJS module of one line, `require(<the package>)`,
 * through the banner's require, and the package itself stays in node_modules (see `external`).
 */
const requireAwsSdk = {
  name: "require-aws-sdk",
  setup(build) {
    const sdk = /^@(aws-sdk|smithy)\//;
    // A dynamic import() stays one: esbuild's chunk for a CommonJS module only exports `default`.
    build.onResolve({ filter: sdk }, (args) =>
      args.namespace === "aws-sdk-require" || args.kind === "dynamic-import"
        ? { path: args.path, external: true }
        : { path: args.path, namespace: "aws-sdk-require" },
    );
    build.onLoad({ filter: /.*/, namespace: "aws-sdk-require" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

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
  // (They are required, not imported: requireAwsSdk.)
  external: ["@duckdb/*", "dynalite", "oidc-provider", "esbuild", "tsx"],
  plugins: [requireAwsSdk],
  // CommonJS dependencies call require(): give the ES module one.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  minify: true,
  metafile: true,
  logLevel: "warning",
});
// The embedded store's worker is loaded by path beside the code that starts it, with the module it imports.
const copied = ["lambda/local/dynamo-worker.mjs", "lambda/local/dynalite-iterators.mjs"];
for (const path of copied) copyFileSync(join(root, path), join(outdir, path.split("/").pop()));
// Files of this repository only (not node_modules, nor the SDK's one-line modules, which have no file).
const inputs = [
  ...Object.keys(result.metafile.inputs).filter(
    (path) => !path.startsWith("node_modules/") && !path.startsWith("aws-sdk-require:"),
  ),
  ...copied,
];
writeFileSync(join(outdir, "inputs.json"), JSON.stringify({ builtAt: Date.now(), inputs }));
process.stdout.write(`Bundled the dmt CLI into ${relative(root, outdir)}/ (${inputs.length} sources).\n`);
