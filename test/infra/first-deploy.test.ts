/**
 * What breaks a first `cdk deploy` or its first minutes, though the template looks fine (issue 42):
 * the root routes' MOCK integrations on an all-binary API (W1), CloudFront names that collide when the
 * stack is deployed in a second region of the account (W2), and log groups Step Functions and Pipes
 * would add to the account's size-limited CloudWatch Logs resource policy (W4). Synthesized without
 * bundling (stack.test.ts checks the bundles), with cdk-nag, in no region and in two named ones.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, type Environment } from "aws-cdk-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONTEXT, defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";

type Resource = { Type: string; Properties: Record<string, unknown> };
type Resources = Record<string, Resource>;

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

/** The app as `cdk synth` makes it, cdk-nag included (synthesis throws on an unacknowledged finding). */
function synthesize(env?: Environment, context: Record<string, unknown> = {}): Resources {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-first-deploy-"));
  outdirs.push(outdir);
  const app = new App({
    outdir,
    context: { ...CDK_JSON_CONTEXT, ...context, "aws:cdk:bundling-stacks": [] },
  });
  const stack = env ? defineApp(app, env) : defineApp(app);
  return app.synth().getStackByName(stack.stackName).template.Resources;
}

const ofType = (resources: Resources, type: string) =>
  Object.entries(resources).filter(([, r]) => r.Type === type);

/** The properties of the one resource of a type. */
function onlyOfType(all: Resources, type: string): Record<string, unknown> {
  const found = ofType(all, type);
  if (found.length !== 1) throw new Error(`${found.length} resources of type ${type}`);
  return (found[0] as [string, Resource])[1].Properties;
}

let resources: Resources;
beforeAll(() => {
  resources = synthesize();
});

describe("W1: the root routes on an API that takes every media type as binary", () => {
  it("convert the request to text, so that API Gateway applies the MOCK's JSON request template", () => {
    expect(onlyOfType(resources, "AWS::ApiGateway::RestApi").BinaryMediaTypes).toEqual(["*/*"]);
    const mocks = ofType(resources, "AWS::ApiGateway::Method")
      .map(([, m]) => m.Properties.Integration as Record<string, unknown>)
      .filter((integration) => integration.Type === "MOCK");
    expect(mocks).toHaveLength(2);
    for (const integration of mocks) {
      expect(integration.ContentHandling).toBe("CONVERT_TO_TEXT");
      expect(Object.keys(integration.RequestTemplates as object)).toEqual(["application/json"]);
    }
  });
});

describe("W2: the same stack in two regions of one account", () => {
  const account = "123456789012";
  const regions = ["eu-west-1", "us-east-1"];
  let byRegion: Resources[];
  beforeAll(() => {
    byRegion = regions.map((region) => synthesize({ account, region }));
  });

  /**
   * The names given to resources whose names are unique in the account, not the region: CloudFront's
   * (`Name` in their configurations), IAM roles and managed policies (inline policies belong to a role).
   */
  const ACCOUNT_WIDE: Record<string, string> = {
    "AWS::CloudFront::": "Name",
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
  };
  function accountWideNames(all: Resources): string[] {
    const names: string[] = [];
    const visit = (value: unknown, nameKey: string): void => {
      if (Array.isArray(value)) for (const item of value) visit(item, nameKey);
      else if (value !== null && typeof value === "object") {
        for (const [key, inner] of Object.entries(value)) {
          if (key === nameKey) names.push(JSON.stringify(inner));
          else visit(inner, nameKey);
        }
      }
    };
    for (const r of Object.values(all)) {
      const match = Object.entries(ACCOUNT_WIDE).find(([prefix]) => r.Type.startsWith(prefix));
      if (match) visit(r.Properties, match[1]);
    }
    return names;
  }

  it("synthesizes with cdk-nag in both, and gives no account-wide resource the same name in both", () => {
    const [first = [], second = []] = byRegion.map(accountWideNames);
    // The response-headers policy, the origin access control and the CloudFront function at least.
    expect(first.length).toBeGreaterThanOrEqual(3);
    expect(first.filter((name) => second.includes(name))).toEqual([]);
  });

  it("names the response-headers policy and the origin access control after the region", () => {
    regions.forEach((region, i) => {
      const all = byRegion[i] ?? {};
      const policy = onlyOfType(all, "AWS::CloudFront::ResponseHeadersPolicy");
      const access = onlyOfType(all, "AWS::CloudFront::OriginAccessControl");
      const policyName = (policy.ResponseHeadersPolicyConfig as { Name: string }).Name;
      const accessName = (access.OriginAccessControlConfig as { Name: string }).Name;
      expect(policyName).toMatch(new RegExp(`-${region}$`));
      expect(policyName).toMatch(/^[\w-]{1,128}$/);
      expect(accessName).toMatch(new RegExp(`-${region}$`));
      expect(accessName.length).toBeLessThanOrEqual(64);
    });
  });
});

describe("W4: log groups that AWS services deliver to", () => {
  it("are under /aws/vendedlogs/, outside the account's CloudWatch Logs resource policy", () => {
    const groupArns = [
      ...ofType(resources, "AWS::StepFunctions::StateMachine").map(
        ([, m]) =>
          (
            m.Properties.LoggingConfiguration as {
              Destinations: { CloudWatchLogsLogGroup: { LogGroupArn: unknown } }[];
            }
          ).Destinations[0]?.CloudWatchLogsLogGroup.LogGroupArn,
      ),
    ];
    expect(groupArns.length).toBeGreaterThanOrEqual(1);
    for (const arn of groupArns) {
      const [groupId] = (arn as { "Fn::GetAtt": [string, string] })["Fn::GetAtt"];
      const name = resources[groupId]?.Properties.LogGroupName;
      expect(JSON.stringify(name)).toMatch(/^"\/aws\/vendedlogs\/states\//);
    }
  });
});

describe("W3: the proxies through API Gateway's Lambda proxy integration, as an option", () => {
  let streaming: Resources;
  beforeAll(() => {
    streaming = synthesize(undefined, { [CONTEXT.proxyIntegration]: "lambda-stream" });
  });
  /** The vendors' routes that invoke their proxy function with response streaming (the data API's streams too). */
  const streamingRoutes = (all: Resources) =>
    ofType(all, "AWS::ApiGateway::Method").filter(([, m]) => {
      const integration = JSON.stringify(m.Properties.Integration);
      return integration.includes("/response-streaming-invocations") && /"Proxy[A-Z]/.test(integration);
    });

  it("keeps the function URLs and their origin secret by default", () => {
    expect(ofType(resources, "AWS::Lambda::Url")).toHaveLength(4);
    expect(streamingRoutes(resources)).toEqual([]);
  });

  it("routes every vendor through InvokeWithResponseStream, with no function URL and no origin secret", () => {
    expect(ofType(streaming, "AWS::Lambda::Url")).toEqual([]);
    const secrets = ofType(streaming, "AWS::SecretsManager::Secret").map(([id]) => id);
    // The vendors' four, the user-id key, the Stripe key, its webhook secret and the OpenMeter token.
    expect(secrets).toHaveLength(8);
    expect(secrets.filter((id) => id.includes("OriginSecret"))).toEqual([]);
    const routes = streamingRoutes(streaming);
    // `/{vendor}` and `/{vendor}/{proxy+}` for each of the four.
    expect(routes).toHaveLength(8);
    for (const [, method] of routes) {
      expect(method.Properties).toMatchObject({
        HttpMethod: "ANY",
        AuthorizationType: "CUSTOM",
        Integration: {
          Type: "AWS_PROXY",
          IntegrationHttpMethod: "POST",
          ResponseTransferMode: "STREAM",
          TimeoutInMillis: 900_000,
        },
      });
    }
    for (const [, fn] of ofType(streaming, "AWS::Lambda::Function")) {
      expect(JSON.stringify(fn.Properties.Environment ?? {})).not.toContain("DMT_ORIGIN_SECRET_ARN");
    }
    const invokers = ofType(streaming, "AWS::Lambda::Permission").filter(
      ([, p]) => p.Properties.Principal === "apigateway.amazonaws.com",
    );
    expect(invokers.length).toBeGreaterThanOrEqual(8);
  });

  it("refuses an integration it does not know, naming it", () => {
    expect(() => synthesize(undefined, { [CONTEXT.proxyIntegration]: "alb" })).toThrow(
      'dmt:proxyIntegration: "alb" is not one of function-url, lambda-stream.',
    );
  });
});
