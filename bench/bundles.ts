/**
 * Lambda bundle size and cold initialisation per function. Run: `npx tsx bench/bundles.ts`
 * (`BENCH_RUNS=30` for more samples). Never part of the tests.
 *
 * The bundles are exactly the ones `cdk synth` makes: the CDK app is synthesized in this process and
 * NodejsFunction runs the local esbuild with the stack's bundling options. Cold initialisation is the
 * time `import()` of a bundle takes in a fresh Node process (module evaluation plus everything a handler
 * does at module scope: configuration, clients), with the function's environment from the template
 * (NODE_OPTIONS=--enable-source-maps included); it is measured once more without NODE_OPTIONS, run for
 * run in alternation, to show what mapped stack traces cost. Functions that share a bundle (the four
 * proxy functions run one, parameterized by `DMT_VENDORS`) are measured once, with the first one's
 * environment. Streaming handlers call the Lambda runtime's `awslambda` global at import; the import
 * script defines it as the runtime does.
 * Prints a table and writes `bench/results/bundles.json`.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { App } from "aws-cdk-lib";
import { CfnFunction } from "aws-cdk-lib/aws-lambda";
import { defineApp } from "../lib/app";
import { REPO_ROOT } from "../lib/lambda-defaults";
import { formatTable } from "./lib/table";

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const run = promisify(execFile);

interface LambdaResource {
  Properties: { Code: { S3Key: string }; Environment?: { Variables: Record<string, unknown> } };
}

interface InitStats {
  p50: number;
  min: number;
  max: number;
}

interface BundleResult {
  /** The functions that run this bundle. */
  function: string;
  bundleBytes: number;
  gzipBytes: number;
  sourceMapBytes: number;
  /** import() of the bundle, as deployed. */
  init: InitStats;
  initWithoutSourceMaps: InitStats;
  /** Node start to the end of the import, as deployed. */
  processReady: InitStats;
}

/**
 * The function's environment with CloudFormation references replaced by placeholders: a URL where the
 * configuration wants one (the warehouse's queue URLs), identifier characters elsewhere (Athena names).
 */
function environmentOf(resource: LambdaResource): Record<string, string> {
  const variables = resource.Properties.Environment?.Variables ?? {};
  const placeholder = (name: string) =>
    name.endsWith("_URL") || name.endsWith("_ISSUER") ? `https://bench.invalid/${name}` : `bench_${name}`;
  return Object.fromEntries(
    Object.entries(variables).map(([name, value]) => [
      name,
      typeof value === "string" ? value : placeholder(name),
    ]),
  );
}

const IMPORT_SCRIPT = `
globalThis.awslambda = { streamifyResponse: (handler) => handler, HttpResponseStream: { from: (s) => s } };
const started = performance.now();
await import(process.env.BENCH_BUNDLE);
const ended = performance.now();
process.stdout.write(JSON.stringify({ importMs: ended - started, readyMs: ended }));
`;

type Sample = { importMs: number; readyMs: number };

async function importOnce(bundle: string, env: Record<string, string>): Promise<Sample> {
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", IMPORT_SCRIPT], {
    env: {
      PATH: process.env.PATH,
      AWS_REGION: "eu-west-1",
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true",
      ...env,
      BENCH_BUNDLE: pathToFileURL(bundle).href,
    },
  });
  return JSON.parse(stdout) as Sample;
}

/** Alternates the two configurations run by run, so that both see the same (shared) machine. */
async function measure(
  bundle: string,
  env: Record<string, string>,
): Promise<{ deployed: Sample[]; withoutSourceMaps: Sample[] }> {
  const { NODE_OPTIONS: _sourceMaps, ...bare } = env;
  const deployed: Sample[] = [];
  const withoutSourceMaps: Sample[] = [];
  for (let i = 0; i < RUNS; i++) {
    deployed.push(await importOnce(bundle, env));
    withoutSourceMaps.push(await importOnce(bundle, bare));
  }
  return { deployed, withoutSourceMaps };
}

function stats(values: number[]): InitStats {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    p50: sorted[Math.floor(sorted.length / 2)] ?? Number.NaN,
    min: sorted[0] ?? Number.NaN,
    max: sorted.at(-1) ?? Number.NaN,
  };
}

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const outdir = mkdtempSync(join(tmpdir(), "dmt-bundles-"));
  try {
    const cdkJson = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")) as { context: object };
    const app = new App({ outdir, context: cdkJson.context });
    const stack = defineApp(app);
    const assembly = app.synth();
    const resources = assembly.getStackByName(stack.stackName).template.Resources as Record<
      string,
      LambdaResource
    >;

    const bundles = new Map<string, { names: string[]; env: Record<string, string> }>();
    for (const fn of stack.node.findAll().filter((c): c is CfnFunction => c instanceof CfnFunction)) {
      // `Dmt/Warehouse/Consumer/Function/Resource` -> `Warehouse/Consumer`.
      const name = fn.node.path
        .split("/")
        .slice(1)
        .filter((part) => part !== "Function" && part !== "Resource")
        .join("/");
      const resource = resources[stack.getLogicalId(fn)] as LambdaResource;
      const dir = join(outdir, `asset.${resource.Properties.Code.S3Key.replace(/\.zip$/, "")}`);
      const seen = bundles.get(dir);
      if (seen) seen.names.push(name);
      else bundles.set(dir, { names: [name], env: environmentOf(resource) });
    }

    const results: BundleResult[] = [];
    for (const [dir, { names, env }] of bundles) {
      const bundle = join(dir, "index.mjs");
      const { deployed, withoutSourceMaps } = await measure(bundle, env);
      results.push({
        function: names.join(", "),
        bundleBytes: statSync(bundle).size,
        gzipBytes: gzipSync(readFileSync(bundle), { level: 9 }).byteLength,
        sourceMapBytes: statSync(join(dir, "index.mjs.map")).size,
        init: stats(deployed.map((s) => s.importMs)),
        initWithoutSourceMaps: stats(withoutSourceMaps.map((s) => s.importMs)),
        processReady: stats(deployed.map((s) => s.readyMs)),
      });
    }

    const kb = (bytes: number) => bytes / 1024;
    console.log(
      `Lambda bundles (${RUNS} cold imports each; Node ${machine.node} on this machine, load ${machine.loadavg
        .map((l) => l.toFixed(2))
        .join(" ")})\n`,
    );
    console.log(
      formatTable(
        [
          "function",
          "bundle KB",
          "gzip KB",
          "map KB",
          "init p50 ms",
          "init min ms",
          "no maps p50 ms",
          "no maps min ms",
          "node+init p50 ms",
        ],
        results.map((r) => [
          r.function,
          kb(r.bundleBytes),
          kb(r.gzipBytes),
          kb(r.sourceMapBytes),
          r.init.p50,
          r.init.min,
          r.initWithoutSourceMaps.p50,
          r.initWithoutSourceMaps.min,
          r.processReady.p50,
        ]),
      ),
    );
    mkdirSync(join(REPO_ROOT, "bench", "results"), { recursive: true });
    writeFileSync(
      join(REPO_ROOT, "bench", "results", "bundles.json"),
      `${JSON.stringify({ date: new Date().toISOString(), machine, runs: RUNS, results }, null, 2)}\n`,
    );
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

await main();
