import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_BUS_OUTPUT, WEBHOOK_QUEUE_OUTPUT } from "../../bin/aws-target";
import { defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";

/** The events construct in the synthesized template (bundling skipped: stack.test.ts bundles). */

type Resources = Record<string, { Type: string; Properties: Record<string, unknown> }>;

let template: Template;
let resources: Resources;
let outdir: string;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), "dmt-cdk-events-"));
  const context = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
    string,
    unknown
  >;
  const app = new App({ outdir, context: { ...context, "aws:cdk:bundling-stacks": [] } });
  const stack = defineApp(app);
  const json = app.synth({ validateOnSynthesis: false }).getStackByName(stack.stackName).template;
  template = Template.fromJSON(json);
  resources = json.Resources;
}, 240_000);

afterAll(() => rmSync(outdir, { recursive: true, force: true }));

const idOf = (type: string, match: (r: Resources[string]) => boolean) => {
  const found = Object.entries(resources).filter(([, r]) => r.Type === type && match(r));
  expect(found).toHaveLength(1);
  return found[0]?.[0] ?? "";
};

describe("events", () => {
  it("has an event bus whose rule sends every dmt event to the webhook delivery queue", () => {
    template.resourceCountIs("AWS::Events::EventBus", 1);
    const busId = idOf("AWS::Events::EventBus", () => true);
    const queueId = Object.keys(resources).find((id) => /^EventsDeliveryQueue[0-9A-F]{8}$/.test(id)) ?? "";
    expect(resources[queueId]?.Type).toBe("AWS::SQS::Queue");
    template.hasResourceProperties("AWS::Events::Rule", {
      EventBusName: { Ref: busId },
      EventPattern: { source: ["dmt"] },
      Targets: [Match.objectLike({ Arn: { "Fn::GetAtt": [queueId, "Arn"] } })],
    });
    // The bus may send to the queue.
    template.hasResourceProperties("AWS::SQS::QueuePolicy", {
      Queues: [{ Ref: queueId }],
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Action: Match.arrayWith(["sqs:SendMessage"]),
            Principal: { Service: "events.amazonaws.com" },
          }),
        ]),
      },
    });
  });

  it("delivers from the queue with a function that reports partial batch failures, dead-letters after 5 receives and alarms", () => {
    const queue = Object.entries(resources).find(([id]) => /^EventsDeliveryQueue[0-9A-F]{8}$/.test(id))?.[1];
    expect(queue?.Properties.RedrivePolicy).toMatchObject({ maxReceiveCount: 5 });
    const deadLetterArn = (
      (queue?.Properties.RedrivePolicy ?? {}) as { deadLetterTargetArn: { "Fn::GetAtt": string[] } }
    ).deadLetterTargetArn["Fn::GetAtt"][0];
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: { "Fn::GetAtt": [Match.stringLikeRegexp("EventsDeliveryQueue"), "Arn"] },
      FunctionResponseTypes: ["ReportBatchItemFailures"],
      BatchSize: 10,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateNumberOfMessagesVisible",
      Dimensions: [{ Name: "QueueName", Value: { "Fn::GetAtt": [deadLetterArn, "QueueName"] } }],
      Threshold: 1,
    });
    template.hasResourceProperties("AWS::Lambda::Function", {
      Description: "dmt: webhook delivery (signed per Standard Webhooks)",
      Timeout: 60,
      Environment: {
        Variables: Match.objectLike({
          DMT_WEBHOOK_QUEUE_URL: Match.anyValue(),
          DMT_EVENT_BUS_NAME: Match.anyValue(),
          DMT_BYOK_KEY_ARN: Match.anyValue(),
          DMT_TABLE_WEBHOOKS: Match.anyValue(),
        }),
      },
    });
  });

  it("lets the delivery function read webhooks, write the delivery log, unwrap secrets and re-queue retries", () => {
    const fnId = idOf(
      "AWS::Lambda::Function",
      (r) => r.Properties.Description === "dmt: webhook delivery (signed per Standard Webhooks)",
    );
    const roleId = (((resources[fnId]?.Properties.Role ?? {}) as { "Fn::GetAtt"?: string[] })["Fn::GetAtt"] ??
      [])[0];
    const policies = Object.values(resources).filter(
      (r) =>
        r.Type === "AWS::IAM::Policy" &&
        JSON.stringify(r.Properties.Roles) === JSON.stringify([{ Ref: roleId }]),
    );
    const actions = policies.flatMap((p) =>
      (p.Properties.PolicyDocument as { Statement: { Action: string | string[] }[] }).Statement.flatMap(
        (s) => (Array.isArray(s.Action) ? s.Action : [s.Action]),
      ),
    );
    expect(actions).toEqual(
      expect.arrayContaining([
        "dynamodb:Query",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "kms:Decrypt",
        "sqs:SendMessage",
        "sqs:ReceiveMessage",
      ]),
    );
    expect(actions).not.toContain("dynamodb:*");
  });

  it("gives every function that emits events the bus's name and leave to put events on it", () => {
    const busId = idOf("AWS::Events::EventBus", () => true);
    const publishers = [
      ...["groq", "openai", "anthropic", "gemini"].map((v) => `dmt: ${v} proxy (streaming, behind the API)`),
      "dmt: dashboard API (/dashboard/api)",
      "dmt: deletion workflow steps (record, find, rewrite, purge, verify, fail)",
    ];
    for (const description of publishers) {
      const fnId = idOf("AWS::Lambda::Function", (r) => r.Properties.Description === description);
      const fn = resources[fnId]?.Properties as {
        Environment: { Variables: Record<string, unknown> };
        Role: { "Fn::GetAtt": string[] };
      };
      expect(fn.Environment.Variables.DMT_EVENT_BUS_NAME, description).toEqual({ Ref: busId });
      const roleId = fn.Role["Fn::GetAtt"][0];
      const statements = Object.values(resources)
        .filter(
          (r) =>
            r.Type === "AWS::IAM::Policy" &&
            JSON.stringify(r.Properties.Roles) === JSON.stringify([{ Ref: roleId }]),
        )
        .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement);
      // Put on the stack's bus, and on nothing else.
      expect(statements, description).toContainEqual(
        expect.objectContaining({
          Action: "events:PutEvents",
          Effect: "Allow",
          Resource: { "Fn::GetAtt": [busId, "Arn"] },
        }),
      );
    }
  });

  it("lets the proxies read and fire alert rules, with conditional updates only", () => {
    const fnId = idOf(
      "AWS::Lambda::Function",
      (r) => r.Properties.Description === "dmt: openai proxy (streaming, behind the API)",
    );
    const role = (resources[fnId] as Resources[string]).Properties.Role as { "Fn::GetAtt": string[] };
    const roleId = role["Fn::GetAtt"][0];
    const alertRules = Object.keys(resources).find((id) => /^StoreAlertRules[0-9A-F]{8}$/.test(id)) ?? "";
    expect(resources[alertRules]?.Type).toBe("AWS::DynamoDB::Table");
    const statements = Object.values(resources)
      .filter(
        (r) =>
          r.Type === "AWS::IAM::Policy" &&
          JSON.stringify(r.Properties.Roles) === JSON.stringify([{ Ref: roleId }]),
      )
      .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement)
      .filter((st) => JSON.stringify(st.Resource).includes(alertRules));
    const actions = statements.flatMap((st) => (Array.isArray(st.Action) ? st.Action : [st.Action]));
    expect(actions.sort()).toEqual(["dynamodb:Query", "dynamodb:UpdateItem"]);
  });

  it("lets the dashboard API manage alert rules and webhooks, send tests and queue their retries", () => {
    const fnId = idOf(
      "AWS::Lambda::Function",
      (r) => r.Properties.Description === "dmt: dashboard API (/dashboard/api)",
    );
    const fn = (resources[fnId] as Resources[string]).Properties as {
      Environment: { Variables: Record<string, unknown> };
      Role: { "Fn::GetAtt": string[] };
    };
    const queueId = Object.keys(resources).find((id) => /^EventsDeliveryQueue[0-9A-F]{8}$/.test(id)) ?? "";
    expect(fn.Environment.Variables.DMT_WEBHOOK_QUEUE_URL).toEqual({ Ref: queueId });
    const roleId = fn.Role["Fn::GetAtt"][0];
    const statements = Object.values(resources)
      .filter(
        (r) =>
          r.Type === "AWS::IAM::Policy" &&
          JSON.stringify(r.Properties.Roles) === JSON.stringify([{ Ref: roleId }]),
      )
      .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement);
    const actionsOn = (pattern: RegExp) =>
      statements
        .filter((st) => pattern.test(JSON.stringify(st.Resource)))
        .flatMap((st) => (Array.isArray(st.Action) ? st.Action : [st.Action]))
        .sort();
    expect(actionsOn(/StoreAlertRules/)).toEqual([
      "dynamodb:DeleteItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
      "dynamodb:UpdateItem",
    ]);
    expect(actionsOn(/StoreWebhooks[0-9A-F]/)).toEqual([
      "dynamodb:DeleteItem",
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
    ]);
    expect(actionsOn(/StoreWebhookDeliveries/)).toEqual([
      "dynamodb:GetItem",
      "dynamodb:PutItem",
      "dynamodb:Query",
    ]);
    expect(actionsOn(new RegExp(queueId))).toEqual(expect.arrayContaining(["sqs:SendMessage"]));
    expect(statements.flatMap((st) => st.Action)).toContain("kms:Decrypt");
  });

  it("publishes the bus name and the queue URL, where the CLI finds them", () => {
    template.hasOutput(EVENT_BUS_OUTPUT, { Value: { Ref: Match.stringLikeRegexp("EventsBus") } });
    template.hasOutput(WEBHOOK_QUEUE_OUTPUT, {
      Value: { Ref: Match.stringLikeRegexp("EventsDeliveryQueue") },
    });
  });
});
