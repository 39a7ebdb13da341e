import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../lib/lambda-defaults";

const run = promisify(execFile);
const outdir = mkdtempSync(join(tmpdir(), "dmt-cdk-cli-"));
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

/** The environment of a machine with no AWS account: no credentials, no profile, no instance metadata. */
function offlineEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith("AWS_") || name.startsWith("CDK_")) delete env[name];
  }
  return {
    ...env,
    AWS_CONFIG_FILE: join(outdir, "no-aws-config"),
    AWS_SHARED_CREDENTIALS_FILE: join(outdir, "no-aws-credentials"),
    AWS_EC2_METADATA_DISABLED: "true",
    CDK_DISABLE_VERSION_CHECK: "1",
    CDK_DISABLE_CLI_TELEMETRY: "true",
  };
}

describe("npx cdk synth", () => {
  it("synthesizes the app offline, without AWS credentials, bundling with local esbuild", async () => {
    const { stderr } = await run("npx", ["cdk", "synth", "--no-notices", "--quiet", "-o", outdir], {
      cwd: REPO_ROOT,
      env: offlineEnv(),
      timeout: 580_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    expect(stderr).not.toMatch(/docker/i);
    const template = JSON.parse(readFileSync(join(outdir, "Dmt.template.json"), "utf8")) as {
      Resources: Record<string, { Type: string; Properties: { Code?: { S3Key?: string } } }>;
    };
    // Ours only: CDK's BucketDeployment function (Python, uploading the dashboard) has its own asset.
    const functions = Object.entries(template.Resources)
      .filter(([id, r]) => r.Type === "AWS::Lambda::Function" && !id.startsWith("CustomCDKBucketDeployment"))
      .map(([, r]) => r);
    expect(functions.length).toBeGreaterThanOrEqual(2);
    for (const fn of functions) {
      const hash = fn.Properties.Code?.S3Key?.replace(/\.zip$/, "");
      expect(readdirSync(join(outdir, `asset.${hash}`)).sort()).toEqual(["index.mjs", "index.mjs.map"]);
    }
    // cdk-nag ran inside the CLI's synthesis and found nothing unacknowledged.
    const report = JSON.parse(readFileSync(join(outdir, "validation-report.json"), "utf8"));
    expect(report.pluginReports).toEqual([]);
  }, 600_000); // BUNDLING_TIMEOUT_MS of test/support/timeouts.ts; the CLI call is capped just under it
});
