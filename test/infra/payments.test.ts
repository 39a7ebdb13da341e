import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STRIPE_AMOUNTS_OUTPUT } from "../../bin/aws-target";
import { defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";

/** Credits bought through Stripe in the synthesized template (bundling skipped: stack.test.ts bundles). */

type Resource = { Type: string; Properties: Record<string, unknown> };
type Resources = Record<string, Resource>;

let resources: Resources;
let outputs: Record<string, { Value: unknown }>;
let templateText: string;
let outdir: string;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), "dmt-cdk-payments-"));
  const context = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
    string,
    unknown
  >;
  const app = new App({ outdir, context: { ...context, "aws:cdk:bundling-stacks": [] } });
  const stack = defineApp(app);
  const json = app.synth({ validateOnSynthesis: false }).getStackByName(stack.stackName).template;
  resources = json.Resources;
  outputs = json.Outputs;
  templateText = JSON.stringify(json);
}, 240_000);

afterAll(() => rmSync(outdir, { recursive: true, force: true }));

const idMatching = (pattern: RegExp) => Object.keys(resources).find((id) => pattern.test(id)) ?? "";
const ofType = (type: string) => Object.entries(resources).filter(([, r]) => r.Type === type);

/** The logical id of the Lambda function whose description is `description`. */
function functionId(description: string): string {
  const found = ofType("AWS::Lambda::Function").find(([, r]) => r.Properties.Description === description);
  if (!found) throw new Error(`no function described ${description}`);
  return found[0];
}

function environmentOf(id: string): Record<string, unknown> {
  const env = resources[id]?.Properties.Environment as { Variables: Record<string, unknown> } | undefined;
  return env?.Variables ?? {};
}

/** The resources of every statement that allows `secretsmanager:GetSecretValue` to the function's role. */
function secretsReadBy(fnId: string): unknown[] {
  const roleRef = resources[fnId]?.Properties.Role as { "Fn::GetAtt": [string, string] } | undefined;
  const role = roleRef?.["Fn::GetAtt"][0];
  expect(role).toBeDefined();
  const read: unknown[] = [];
  for (const [, policy] of ofType("AWS::IAM::Policy")) {
    const roles = policy.Properties.Roles as { Ref: string }[];
    if (!roles.some((r) => r.Ref === role)) continue;
    const doc = policy.Properties.PolicyDocument as {
      Statement: { Action: string | string[]; Resource: unknown }[];
    };
    for (const statement of doc.Statement) {
      const actions = [statement.Action].flat();
      if (actions.some((a) => a.startsWith("secretsmanager:"))) {
        expect(
          actions.every(
            (a) => a === "secretsmanager:GetSecretValue" || a === "secretsmanager:DescribeSecret",
          ),
        ).toBe(true);
        read.push(...[statement.Resource].flat());
      }
    }
  }
  return read;
}

const WEBHOOK = "dmt: Stripe webhook (/stripe/webhook)";
const DATA_API = "dmt: data API (/api/v1)";
const SWEEPER = "dmt: releases expired credit holds (every minute)";
const DASHBOARD = "dmt: dashboard API (/dashboard/api)";

/** Every statement of the function's role's policies. */
function statementsOf(fnId: string): { Action: string | string[]; Resource: unknown }[] {
  const roleRef = resources[fnId]?.Properties.Role as { "Fn::GetAtt": [string, string] } | undefined;
  const role = roleRef?.["Fn::GetAtt"][0];
  return ofType("AWS::IAM::Policy")
    .filter(([, policy]) => (policy.Properties.Roles as { Ref: string }[]).some((r) => r.Ref === role))
    .flatMap(
      ([, policy]) =>
        (
          policy.Properties.PolicyDocument as {
            Statement: { Action: string | string[]; Resource: unknown }[];
          }
        ).Statement,
    );
}

/** The actions the function may take on the table it is told of (`DMT_TABLE_<NAME>`), not its indexes. */
function tableActions(fnId: string, name: string): string[] {
  const table = (environmentOf(fnId)[`DMT_TABLE_${name.toUpperCase()}`] as { Ref?: string } | undefined)?.Ref;
  expect(table).toBeDefined();
  return statementsOf(fnId)
    .filter((statement) =>
      [statement.Resource].flat().some((r) => JSON.stringify(r) === `{"Fn::GetAtt":["${table}","Arn"]}`),
    )
    .flatMap((statement) => [statement.Action].flat());
}

describe("Stripe payments in AWS", () => {
  it("routes POST /stripe/webhook to its own function without the authorizer", () => {
    const stripe = ofType("AWS::ApiGateway::Resource").find(([, r]) => r.Properties.PathPart === "stripe");
    expect(stripe).toBeDefined();
    const webhook = ofType("AWS::ApiGateway::Resource").find(
      ([, r]) =>
        r.Properties.PathPart === "webhook" &&
        (r.Properties.ParentId as { Ref?: string }).Ref === stripe?.[0],
    );
    expect(webhook).toBeDefined();
    const methods = ofType("AWS::ApiGateway::Method").filter(
      ([, r]) => (r.Properties.ResourceId as { Ref?: string }).Ref === webhook?.[0],
    );
    expect(methods.map(([, r]) => r.Properties.HttpMethod)).toEqual(["POST"]);
    const method = methods[0]?.[1].Properties ?? {};
    expect(method.AuthorizationType).toBe("NONE");
    expect(method).not.toHaveProperty("AuthorizerId");
    // A Lambda proxy integration of the webhook's function (Stripe's SDK stays out of the data API's).
    expect(JSON.stringify(method.Integration)).toContain(functionId(WEBHOOK));
    expect(JSON.stringify(method.Integration)).not.toContain(functionId(DATA_API));
    expect(method.Integration).toMatchObject({ Type: "AWS_PROXY" });
    expect(JSON.stringify(outputs.StripeWebhookUrl?.Value)).toContain("stripe/webhook");
  });

  it("keeps one Stripe secret key, shared with billing exports, and a webhook secret created empty", () => {
    const secrets = ofType("AWS::SecretsManager::Secret");
    const stripeKeys = secrets.filter(([, r]) => /Stripe secret key/.test(String(r.Properties.Description)));
    expect(stripeKeys).toHaveLength(1);
    const key = idMatching(/^BillingStripeSecretKey[0-9A-F]{8}$/);
    expect(stripeKeys[0]?.[0]).toBe(key);
    const webhook = idMatching(/^PaymentsWebhookSecret[0-9A-F]{8}$/);
    for (const id of [key, webhook]) {
      expect(resources[id]?.Properties).not.toHaveProperty("GenerateSecretString");
      expect(resources[id]?.Properties).not.toHaveProperty("SecretString");
    }
    expect(outputs.StripeWebhookSecretArn?.Value).toEqual({ Ref: webhook });
    // What `dmt credits recharge set --stack` checks its amount against: the default offer here.
    expect(outputs[STRIPE_AMOUNTS_OUTPUT]?.Value).toBe("10,25,100");
  });

  it("names the secrets by ARN in the webhook's and the sweeper's environment, never a value", () => {
    const key = idMatching(/^BillingStripeSecretKey[0-9A-F]{8}$/);
    const webhook = idMatching(/^PaymentsWebhookSecret[0-9A-F]{8}$/);
    for (const description of [WEBHOOK, SWEEPER, DASHBOARD]) {
      const env = environmentOf(functionId(description));
      expect(env.DMT_STRIPE_SECRET_ARN).toEqual({ Ref: key });
      expect(env.DMT_STRIPE_WEBHOOK_SECRET_ARN).toEqual({ Ref: webhook });
      expect(env.DMT_TABLE_PAYMENTS).toBeDefined();
      expect(env).not.toHaveProperty("DMT_STRIPE_SECRET_KEY");
      expect(env).not.toHaveProperty("DMT_STRIPE_WEBHOOK_SECRET");
    }
    // Nothing in the template looks like a Stripe key or signing secret.
    expect(templateText).not.toMatch(/\b(sk|rk)_(live|test)_|whsec_[A-Za-z0-9]/);
  });

  it("lets the webhook, the sweeper and the dashboard API read those two secrets, and the data API none", () => {
    const key = idMatching(/^BillingStripeSecretKey[0-9A-F]{8}$/);
    const webhook = idMatching(/^PaymentsWebhookSecret[0-9A-F]{8}$/);
    for (const description of [WEBHOOK, SWEEPER, DASHBOARD]) {
      const read = secretsReadBy(functionId(description));
      expect(read).toEqual(expect.arrayContaining([{ Ref: key }, { Ref: webhook }]));
      // Least privilege: every secret it may read is named (no wildcard).
      for (const resource of read) expect(JSON.stringify(resource)).not.toContain("*");
    }
    expect(secretsReadBy(functionId(DATA_API))).toEqual([]);
    // Only the functions that need it: the webhook, the sweeper and the dashboard API.
    const readers = ofType("AWS::IAM::Policy").filter(([, r]) =>
      JSON.stringify(r.Properties.PolicyDocument).includes(`{"Ref":"${webhook}"}`),
    );
    expect(readers).toHaveLength(3);
  });

  it("gives the dashboard API Buy credits and the recharge rule: the profile read and written, nothing granted", () => {
    const dashboard = functionId(DASHBOARD);
    const env = environmentOf(dashboard);
    // Checkout returns the admin to the dashboard's own address, never one a request names elsewhere.
    expect(JSON.stringify(env.DMT_DASHBOARD_URL)).toContain("DomainName");
    expect(JSON.stringify(env.DMT_DASHBOARD_URL)).toContain("/dashboard/");
    expect(env.DMT_STRIPE_DEPLOYMENT).toBeDefined();
    expect(tableActions(dashboard, "payments").sort()).toEqual(["dynamodb:GetItem", "dynamodb:UpdateItem"]);
  });

  it("lets the webhook and the sweeper put their events on the stack's bus, and that bus only", () => {
    const bus = idMatching(/^EventsBus[0-9A-F]{8}$/);
    for (const description of [WEBHOOK, SWEEPER]) {
      const fn = functionId(description);
      expect(environmentOf(fn).DMT_EVENT_BUS_NAME).toEqual({ Ref: bus });
      const puts = statementsOf(fn).filter((statement) =>
        [statement.Action].flat().includes("events:PutEvents"),
      );
      expect(puts.length).toBeGreaterThan(0);
      for (const statement of puts) {
        expect([statement.Resource].flat()).toEqual([{ "Fn::GetAtt": [bus, "Arn"] }]);
      }
    }
  });
});
