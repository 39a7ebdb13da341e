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
 * The local configuration (`lambda/local/config.ts`, read by every command) is bundled on its own, into
 * `config.js`, which the chunks import. zod/mini and the full zod (the dashboard's request schemas) share
 * most of zod's files, and esbuild puts a file that two chunks reach into a chunk both load, with all
 * that either uses: in one bundle, every command loaded the whole of zod with its locales (~400 KB).
 * On its own, the configuration and what it uses of zod/mini are ~25 KB.
 */
const CONFIG = join(root, "lambda", "local", "config.ts");
const configOnItsOwn = {
  name: "config-on-its-own",
  setup(build) {
    build.onResolve({ filter: /config$/ }, async (args) => {
      if (args.pluginData === "config-on-its-own") return undefined;
      const resolved = await build.resolve(args.path, {
        kind: args.kind,
        resolveDir: args.resolveDir,
        pluginData: "config-on-its-own",
      });
      return resolved.path === CONFIG ? { path: "./config.js", external: true } : undefined;
    });
  },
};

rmSync(outdir, { recursive: true, force: true });
const common = {
  absWorkingDir: root,
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  minify: true,
  metafile: true,
  logLevel: "warning",
};
const config = await build({ ...common, entryPoints: [CONFIG], outfile: join(outdir, "config.js") });
/** What the CLI and the warehouse worker are bundled with. */
const withDependencies = {
  ...common,
  define: { DMT_VERSION: JSON.stringify(pkg.version), DMT_WEB_SOURCES: JSON.stringify("../../web/") },
  // The AWS SDK's ES module builds, bundled as the Lambda functions bundle them (lib/lambda-defaults.ts):
  // esbuild keeps what the commands use, where its CommonJS builds load whole packages (a store command
  // compiled and ran ~0.9 MB of them). Their classes survive the split into chunks; the CommonJS builds'
  // did not ("is not a constructor" under --stack).
  mainFields: ["module", "main"],
  // Native or self-loading packages stay in node_modules.
  external: ["@duckdb/*", "dynalite", "oidc-provider", "esbuild", "tsx"],
  plugins: [configOnItsOwn],
  // CommonJS dependencies call require(): give the ES module one.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
};
const result = await build({
  ...withDependencies,
  entryPoints: ["bin/cli-entry.ts"],
  outdir,
  entryNames: "dmt",
  // Each command's modules in chunks of their own, loaded when it runs: --version reads one small file.
  splitting: true,
});
// `dmt serve`'s warehouse worker, loaded by path beside the code that starts it (lambda/local/warehouse-thread.ts).
const worker = await build({
  ...withDependencies,
  stdin: {
    contents:
      'import { runWarehouseWorker } from "./lambda/local/warehouse-thread.ts";\nawait runWarehouseWorker();\n',
    resolveDir: root,
    sourcefile: "warehouse-worker.ts",
    loader: "ts",
  },
  outfile: join(outdir, "warehouse-worker.mjs"),
});
// The embedded store's worker is loaded by path beside the code that starts it, with the modules it imports.
const copied = [
  "lambda/local/dynamo-worker.mjs",
  "lambda/local/dynalite-server.mjs",
  "lambda/local/dynalite-iterators.mjs",
  "lambda/local/dynalite-caches.mjs",
];
for (const path of copied) copyFileSync(join(root, path), join(outdir, path.split("/").pop()));
// Files of this repository only (not node_modules).
const inputs = [
  ...new Set(
    [config, result, worker]
      .flatMap(({ metafile }) => Object.keys(metafile.inputs))
      .filter((path) => !path.startsWith("node_modules/") && path !== "warehouse-worker.ts"),
  ),
  ...copied,
];
writeFileSync(join(outdir, "inputs.json"), JSON.stringify({ builtAt: Date.now(), inputs }));
process.stdout.write(`Bundled the dmt CLI into ${relative(root, outdir)}/ (${inputs.length} sources).\n`);
