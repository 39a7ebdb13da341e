/**
 * OpenTelemetry in the stack: an OTLP receiver from context reaches each proxy function as the standard
 * `OTEL_EXPORTER_OTLP_*` variables, its headers as a secret the function alone may read; without one,
 * no variable (telemetry off). Synthesized as `cdk synth` does (cdk-nag included), without bundling.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { afterAll, describe, expect, it } from "vitest";
import * as z from "zod/mini";
import { parseEnv } from "../../lambda/core/config";
import { OTLP_VARIABLES, otlpSettings } from "../../lambda/telemetry/config";
import { CONTEXT, defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { VENDORS } from "../../lib/secrets";
import type { DmtStack } from "../../lib/stack";

type Resource = { Type: string; Properties: Record<string, unknown> };
type Template = { Resources: Record<string, Resource> };

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

function synthesize(context: Record<string, unknown> = {}): { stack: DmtStack; template: Template } {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-telemetry-"));
  outdirs.push(outdir);
  const app = new App({
    outdir,
    context: { ...CDK_JSON_CONTEXT, ...context, "aws:cdk:bundling-stacks": [] },
  });
  const stack = defineApp(app);
  return { stack, template: app.synth().getStackByName(stack.stackName).template as Template };
}

function proxyEnvironments({ stack, template }: ReturnType<typeof synthesize>): Record<string, unknown>[] {
  return VENDORS.map((vendor) => {
    const fn = stack.proxies[vendor].fn.function;
    const id = stack.getLogicalId(fn.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]);
    const env = template.Resources[id]?.Properties.Environment as { Variables: Record<string, unknown> };
    return env.Variables;
  });
}

describe("the proxy functions' OTLP receiver, from context", () => {
  it("is off by default: no OTEL variable on any proxy function", () => {
    for (const env of proxyEnvironments(synthesize())) {
      expect(Object.keys(env).filter((name) => name.startsWith("OTEL_"))).toEqual([]);
    }
  });

  it("sets the standard variables, which the function's configuration accepts", () => {
    const synth = synthesize({
      [CONTEXT.otlpEndpoint]: "http://adot-collector.internal:4318",
      [CONTEXT.otlpProtocol]: "http/json",
    });
    for (const env of proxyEnvironments(synth)) {
      expect(env).toMatchObject({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://adot-collector.internal:4318",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_SERVICE_NAME: "dmt",
      });
      expect(env.DMT_OTLP_HEADERS_SECRET_ARN).toBeUndefined();
      const strings = Object.fromEntries(
        Object.entries(env).filter((entry): entry is [string, string] => typeof entry[1] === "string"),
      );
      expect(otlpSettings(parseEnv(z.object(OTLP_VARIABLES), strings))).toMatchObject({
        tracesUrl: "http://adot-collector.internal:4318/v1/traces",
        protocol: "http/json",
      });
    }
  });

  it("passes a headers secret by ARN, readable by the proxy functions", () => {
    const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:otlp-headers-AbCdEf";
    const synth = synthesize({
      [CONTEXT.otlpEndpoint]: "https://otlp.example.com",
      [CONTEXT.otlpHeadersSecret]: arn,
    });
    for (const env of proxyEnvironments(synth)) {
      expect(env.DMT_OTLP_HEADERS_SECRET_ARN).toBe(arn);
      expect(env.OTEL_EXPORTER_OTLP_HEADERS).toBeUndefined();
    }
    const policies = Object.values(synth.template.Resources).filter((r) => r.Type === "AWS::IAM::Policy");
    const readers = policies.filter((p) => JSON.stringify(p.Properties).includes(arn));
    expect(readers.length).toBe(VENDORS.length);
  });

  it("refuses a bad endpoint, protocol or a protocol without endpoint, naming the key", () => {
    expect(() => synthesize({ [CONTEXT.otlpEndpoint]: "adot:4317" })).toThrow(/dmt:otlpEndpoint/);
    expect(() =>
      synthesize({ [CONTEXT.otlpEndpoint]: "http://c:4318", [CONTEXT.otlpProtocol]: "grpc" }),
    ).toThrow(/dmt:otlpProtocol/);
    expect(() => synthesize({ [CONTEXT.otlpProtocol]: "http/json" })).toThrow(/need dmt:otlpEndpoint/);
  });
});
