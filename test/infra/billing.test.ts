import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { METER_QUEUE_OUTPUT } from "../../bin/aws-target";
import { CONTEXT, defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";

/** Billing exports in the synthesized template (bundling skipped: stack.test.ts bundles). */

type Resources = Record<string, { Type: string; Properties: Record<string, unknown> }>;

let template: Template;
let resources: Resources;
let outputs: Record<string, { Value: unknown }>;
let outdir: string;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), "dmt-cdk-billing-"));
  const context = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
    string,
    unknown
  >;
  const app = new App({
    outdir,
    context: {
      ...context,
      "aws:cdk:bundling-stacks": [],
      [CONTEXT.openMeterUrl]: "https://openmeter.example.com",
    },
  });
  const stack = defineApp(app);
  const json = app.synth({ validateOnSynthesis: false }).getStackByName(stack.stackName).template;
  template = Template.fromJSON(json);
  resources = json.Resources;
  outputs = json.Outputs;
}, 240_000);

afterAll(() => rmSync(outdir, { recursive: true, force: true }));

const idMatching = (pattern: RegExp) => Object.keys(resources).find((id) => pattern.test(id)) ?? "";

describe("billing exports", () => {
  it("has a meter queue with retries into a dead-letter queue, and an alarm at its first message", () => {
    const queue = idMatching(/^BillingMeterQueue[0-9A-F]{8}$/);
    const dead = idMatching(/^BillingDeadLetterQueue[0-9A-F]{8}$/);
    expect(resources[queue]?.Properties).toMatchObject({
      RedrivePolicy: { deadLetterTargetArn: { "Fn::GetAtt": [dead, "Arn"] }, maxReceiveCount: 5 },
      SqsManagedSseEnabled: true,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      Dimensions: [{ Name: "QueueName", Value: { "Fn::GetAtt": [dead, "QueueName"] } }],
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
    });
    expect(outputs[METER_QUEUE_OUTPUT]?.Value).toEqual({ Ref: queue });
  });

  it("runs the sender behind the queue with partial batch failures, its secrets and the endpoint", () => {
    const queue = idMatching(/^BillingMeterQueue[0-9A-F]{8}$/);
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: { "Fn::GetAtt": [queue, "Arn"] },
      FunctionResponseTypes: ["ReportBatchItemFailures"],
      BatchSize: 10,
    });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Description: "dmt: billing exports (Stripe meter events, OpenMeter CloudEvents)",
      Environment: {
        Variables: Match.objectLike({
          DMT_STRIPE_SECRET_ARN: { Ref: idMatching(/^BillingStripeSecretKey[0-9A-F]{8}$/) },
          DMT_OPENMETER_TOKEN_ARN: { Ref: idMatching(/^BillingOpenMeterToken[0-9A-F]{8}$/) },
          DMT_OPENMETER_URL: "https://openmeter.example.com",
          DMT_METER_SOURCE: "dmt://Dmt",
          DMT_TABLE_BILLINGMETER: Match.anyValue(),
        }),
      },
    });
    // The secrets are created empty: the operator puts the key in them; none is in the template.
    for (const id of [/^BillingStripeSecretKey/, /^BillingOpenMeterToken/]) {
      expect(resources[idMatching(id)]?.Properties).not.toHaveProperty("GenerateSecretString");
      expect(resources[idMatching(id)]?.Properties).not.toHaveProperty("SecretString");
    }
  });

  it("lets the warehouse consumer queue meter messages", () => {
    const queue = idMatching(/^BillingMeterQueue[0-9A-F]{8}$/);
    template.hasResourceProperties("AWS::Lambda::Function", {
      Description: "dmt: warehouse consumer (queue -> Parquet in S3)",
      Environment: {
        Variables: Match.objectLike({
          DMT_METER_QUEUE_URL: { Ref: queue },
          DMT_TABLE_BILLINGMETER: Match.anyValue(),
        }),
      },
    });
  });
});
