/**
 * What an operator needs from the first day (issue 42): alarms that reach someone, dead-letter queues
 * wherever an AWS service delivers on its own, API Gateway's account role as an opt-in with execution
 * logs that expire, least privilege, Cognito mail through SES, and deletion's own Athena workgroup.
 * Synthesized as `cdk synth` does (cdk-nag included), without bundling: stack.test.ts checks the bundles.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TABLES, type TableName } from "../../lambda/adapters/dynamodb/tables";
import { CONTEXT, defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { PROXY_TABLE_ACCESS, PROXY_TIMEOUT } from "../../lib/proxy";
import { VENDORS } from "../../lib/secrets";
import type { DmtStack } from "../../lib/stack";

type Resource = { Type: string; Properties: Record<string, unknown>; DependsOn?: string[] };
type Resources = Record<string, Resource>;
type Template = { Resources: Resources; Outputs: Record<string, { Value: unknown; Export?: unknown }> };

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

/** The app from context, as `cdk synth -c ...` makes it; throws on an unacknowledged cdk-nag finding. */
function synthesize(context: Record<string, unknown> = {}): { stack: DmtStack; template: Template } {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-operations-"));
  outdirs.push(outdir);
  const app = new App({
    outdir,
    context: { ...CDK_JSON_CONTEXT, ...context, "aws:cdk:bundling-stacks": [] },
  });
  const stack = defineApp(app);
  const template = app.synth().getStackByName(stack.stackName).template as Template;
  return { stack, template };
}

let stack: DmtStack;
let resources: Resources;
let outputs: Template["Outputs"];
beforeAll(() => {
  const main = synthesize();
  stack = main.stack;
  resources = main.template.Resources;
  outputs = main.template.Outputs;
});

const ofType = (all: Resources, type: string) => Object.entries(all).filter(([, r]) => r.Type === type);
const idOf = (construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]);
/** A function's environment variables, as the template holds them. */
function environmentOf(fn: { node: { defaultChild?: unknown } }): Record<string, unknown> {
  const environment = resources[idOf(fn)]?.Properties.Environment as
    | { Variables?: Record<string, unknown> }
    | undefined;
  return environment?.Variables ?? {};
}
const alarms = () => ofType(resources, "AWS::CloudWatch::Alarm").map(([, a]) => a.Properties);

/** Alarms on a metric, by name and namespace (math alarms: on any of their metrics). */
function alarmsOn(metricName: string, namespace: string): Record<string, unknown>[] {
  return alarms().filter((a) => {
    if (a.MetricName === metricName && a.Namespace === namespace) return true;
    const metrics = (a.Metrics ?? []) as {
      MetricStat?: { Metric: { MetricName: string; Namespace: string } };
    }[];
    return metrics.some(
      (m) => m.MetricStat?.Metric.MetricName === metricName && m.MetricStat.Metric.Namespace === namespace,
    );
  });
}

/** The non-log statements of the policies attached to a role. */
function statementsOf(roleId: string): Record<string, unknown>[] {
  return ofType(resources, "AWS::IAM::Policy")
    .filter(([, p]) => JSON.stringify(p.Properties.Roles).includes(roleId))
    .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement);
}

describe("alarms", () => {
  it("all notify the stack's one SNS topic, going off and clearing", () => {
    const topics = ofType(resources, "AWS::SNS::Topic");
    expect(topics).toHaveLength(1);
    const topic = { Ref: topics[0]?.[0] };
    expect(alarms().length).toBeGreaterThan(40);
    for (const alarm of alarms()) {
      expect(alarm.AlarmActions, String(alarm.AlarmDescription)).toEqual([topic]);
      expect(alarm.OKActions, String(alarm.AlarmDescription)).toEqual([topic]);
    }
  });

  it("export the topic for other subscriptions, and subscribe no one unless told", () => {
    expect(outputs.AlarmTopicArn).toEqual({
      Value: { Ref: idOf(stack.observability.topic) },
      Description: expect.any(String),
      Export: { Name: "Dmt-AlarmTopicArn" },
    });
    expect(ofType(resources, "AWS::SNS::Subscription")).toEqual([]);
  });

  it("mail the address given in context, and refuse an address that is not one, naming it", () => {
    const { template } = synthesize({ [CONTEXT.alarmEmail]: "ops@example.com" });
    const subscriptions = ofType(template.Resources, "AWS::SNS::Subscription").map(([, s]) => s.Properties);
    expect(subscriptions).toEqual([
      {
        Protocol: "email",
        Endpoint: "ops@example.com",
        TopicArn: { Ref: expect.stringMatching(/AlarmTopic/) },
      },
    ]);
    expect(() => synthesize({ [CONTEXT.alarmEmail]: "ops at example" })).toThrow(
      'dmt:alarmEmail: "ops at example" is not an email address.',
    );
  });

  it("watch the API by the stack's name, not CDK's default RestApi shared by every stack", () => {
    const [[, api] = []] = ofType(resources, "AWS::ApiGateway::RestApi");
    expect(api?.Properties.Name).toBe("Dmt");
    const serverErrors = alarmsOn("5XXError", "AWS/ApiGateway");
    expect(serverErrors).toHaveLength(1);
    expect(serverErrors[0]?.Dimensions).toEqual([{ Name: "ApiName", Value: "Dmt" }]);
    const other = synthesize({ [CONTEXT.stackName]: "DmtStaging" }).template.Resources;
    const [[, otherApi] = []] = ofType(other, "AWS::ApiGateway::RestApi");
    expect(otherApi?.Properties.Name).toBe("DmtStaging");
  });

  it("cover each proxy's failed invocations and its p99 duration near the timeout", () => {
    for (const vendor of VENDORS) {
      const fn = { Ref: idOf(stack.proxies[vendor].fn.function) };
      const onFunction = (name: string) =>
        alarmsOn(name, "AWS/Lambda").filter(
          (a) => JSON.stringify(a.Dimensions) === JSON.stringify([{ Name: "FunctionName", Value: fn }]),
        );
      expect(onFunction("Errors"), vendor).toEqual([
        expect.objectContaining({ Statistic: "Sum", Threshold: 1 }),
      ]);
      expect(onFunction("Duration"), vendor).toEqual([
        expect.objectContaining({
          ExtendedStatistic: "p99",
          Threshold: PROXY_TIMEOUT.toMilliseconds() * 0.8,
        }),
      ]);
    }
  });

  it("cover throttling on every table a proxied call writes, and the account's concurrency", () => {
    const written = [
      "credits",
      "ledger",
      "rateLimits",
      "idempotency",
      "budgetCounters",
      "alertRules",
    ] as const;
    const throttled = alarmsOn("WriteThrottleEvents", "AWS/DynamoDB");
    expect(throttled).toHaveLength(written.length);
    for (const table of written) {
      const ref = JSON.stringify({ Ref: idOf(stack.store.tables[table]) });
      const alarm = throttled.find((a) => JSON.stringify(a.Metrics).includes(ref));
      expect(alarm, table).toBeDefined();
      expect(JSON.stringify(alarm?.Metrics)).toContain("ReadThrottleEvents");
    }
    const concurrency = alarmsOn("ConcurrentExecutions", "AWS/Lambda");
    expect(concurrency).toEqual([expect.objectContaining({ Statistic: "Maximum", Threshold: 800 })]);
    expect(concurrency[0]).not.toHaveProperty("Dimensions");
  });

  it("cover the deletion pipe's and the webhook rule's failures and dead letters", () => {
    expect(alarmsOn("ExecutionFailed", "AWS/EventBridge/Pipes")).toEqual([
      expect.objectContaining({
        Dimensions: [{ Name: "PipeName", Value: { Ref: stack.getLogicalId(stack.deletion.pipe) } }],
      }),
    ]);
    expect(alarmsOn("FailedInvocations", "AWS/Events")).toEqual([
      expect.objectContaining({
        Dimensions: [
          { Name: "EventBusName", Value: { Ref: idOf(stack.events.bus) } },
          { Name: "RuleName", Value: { Ref: idOf(stack.events.rule) } },
        ],
      }),
    ]);
    const deadLetterQueues = alarmsOn("ApproximateNumberOfMessagesVisible", "AWS/SQS").map((a) =>
      JSON.stringify(a.Dimensions),
    );
    for (const queue of [stack.deletion.pipeDeadLetterQueue, stack.events.ruleDeadLetterQueue]) {
      expect(deadLetterQueues.some((d) => d.includes(idOf(queue)))).toBe(true);
    }
  });
});

describe("dead letters", () => {
  it("the deletion pipe retries a bounded number of times, then sends the record to its queue, and logs errors", () => {
    const pipe = resources[stack.getLogicalId(stack.deletion.pipe)]?.Properties as {
      SourceParameters: { DynamoDBStreamParameters: Record<string, unknown> };
      LogConfiguration: {
        Level: string;
        CloudwatchLogsLogDestination: { LogGroupArn: { "Fn::GetAtt": string[] } };
      };
      RoleArn: { "Fn::GetAtt": string[] };
    };
    const queueId = idOf(stack.deletion.pipeDeadLetterQueue);
    expect(pipe.SourceParameters.DynamoDBStreamParameters).toMatchObject({
      MaximumRetryAttempts: 5,
      MaximumRecordAgeInSeconds: 3600,
      DeadLetterConfig: { Arn: { "Fn::GetAtt": [queueId, "Arn"] } },
    });
    expect(pipe.LogConfiguration.Level).toBe("ERROR");
    expect(pipe.LogConfiguration).not.toHaveProperty("IncludeExecutionData");
    const [groupId = ""] = pipe.LogConfiguration.CloudwatchLogsLogDestination.LogGroupArn["Fn::GetAtt"];
    expect(resources[groupId]?.Properties).toMatchObject({
      LogGroupName: "/aws/vendedlogs/pipes/Dmt-deletion-requests",
      RetentionInDays: 30,
    });
    const [roleId = ""] = pipe.RoleArn["Fn::GetAtt"];
    const statements = JSON.stringify(statementsOf(roleId));
    expect(statements).toContain("sqs:SendMessage");
    expect(statements).toContain(queueId);
    expect(statements).toContain(groupId);
  });

  it("the webhook rule retries its target, then sends the event to its own dead-letter queue", () => {
    const rule = resources[idOf(stack.events.rule)]?.Properties as { Targets: Record<string, unknown>[] };
    const queueId = idOf(stack.events.ruleDeadLetterQueue);
    expect(rule.Targets).toEqual([
      expect.objectContaining({
        DeadLetterConfig: { Arn: { "Fn::GetAtt": [queueId, "Arn"] } },
        RetryPolicy: { MaximumRetryAttempts: 20, MaximumEventAgeInSeconds: 7200 },
      }),
    ]);
    // EventBridge may send to it, for this rule only.
    const policies = ofType(resources, "AWS::SQS::QueuePolicy").filter(([, p]) =>
      JSON.stringify(p.Properties.Queues).includes(queueId),
    );
    expect(JSON.stringify(policies)).toContain("events.amazonaws.com");
    expect(JSON.stringify(policies)).toContain(idOf(stack.events.rule));
  });
});

describe("API Gateway's account role and execution logs", () => {
  it("leave the account's CloudWatch role alone by default, and create it when asked", () => {
    expect(ofType(resources, "AWS::ApiGateway::Account")).toEqual([]);
    const asked = synthesize({ [CONTEXT.apiGatewayAccountRole]: "true" }).template.Resources;
    expect(ofType(asked, "AWS::ApiGateway::Account")).toHaveLength(1);
  });

  it("write execution logs to a group made with a retention before the stage", () => {
    const restApi = idOf(stack.api.restApi);
    const groupId = idOf(stack.api.executionLogs);
    expect(resources[groupId]?.Properties).toEqual({
      LogGroupName: { "Fn::Join": ["", ["API-Gateway-Execution-Logs_", { Ref: restApi }, "/prod"]] },
      RetentionInDays: 30,
    });
    const [[, stage] = []] = ofType(resources, "AWS::ApiGateway::Stage");
    expect(stage?.DependsOn).toContain(groupId);
  });
});

describe("least privilege", () => {
  it("lets the webhook delivery function decrypt webhook secrets only, by their encryption context", () => {
    const role = idOf(stack.events.delivery.function.role as never);
    const decrypts = statementsOf(role).filter((s) => JSON.stringify(s.Action).includes("kms:Decrypt"));
    expect(decrypts).toEqual([
      {
        Action: "kms:Decrypt",
        Effect: "Allow",
        Resource: { "Fn::GetAtt": [idOf(stack.secrets.byokKey), "Arn"] },
        Condition: { StringLike: { "kms:EncryptionContext:dmt:context": "dmt webhook secret\n*" } },
      },
    ]);
  });
});

describe("least privilege: table names", () => {
  it("tells each function the names of exactly the tables its role may use", () => {
    const tableOf = new Map(
      (Object.keys(TABLES) as TableName[]).map((name) => [idOf(stack.store.tables[name]), name]),
    );
    const functions = ofType(resources, "AWS::Lambda::Function").filter(
      ([id]) => !id.startsWith("CustomCDKBucketDeployment"),
    );
    expect(functions.length).toBeGreaterThan(10);
    for (const [id, fn] of functions) {
      const variables = (fn.Properties.Environment as { Variables?: Record<string, unknown> } | undefined)
        ?.Variables;
      const named = Object.keys(variables ?? {})
        .filter((name) => name.startsWith("DMT_TABLE_"))
        .sort();
      const [roleId = ""] = (fn.Properties.Role as { "Fn::GetAtt": string[] })["Fn::GetAtt"];
      const granted = new Set<string>();
      for (const statement of statementsOf(roleId)) {
        if (!JSON.stringify(statement.Action).includes("dynamodb:")) continue;
        const text = JSON.stringify(statement.Resource);
        for (const [tableId, name] of tableOf) {
          if (text.includes(`"${tableId}"`)) granted.add(`DMT_TABLE_${name.toUpperCase()}`);
        }
      }
      expect(named, id).toEqual([...granted].sort());
    }
    // The proxies, which had all 21: the tables a call uses, the project's plan, and the webhooks
    // (whether a project's webhooks name usage.recorded, read before its event goes on the bus).
    const proxyVariables = Object.keys(environmentOf(stack.proxies.openai.fn.function)).filter((name) =>
      name.startsWith("DMT_TABLE_"),
    );
    expect(proxyVariables).toHaveLength(Object.keys(PROXY_TABLE_ACCESS).length);
    expect(proxyVariables).toContain("DMT_TABLE_WEBHOOKS");
  });
});

describe("Cognito's mail and deletion's Athena workgroup, from context", () => {
  let variant: Resources;
  beforeAll(() => {
    variant = synthesize({
      [CONTEXT.sesIdentity]: "no-reply@example.com",
      [CONTEXT.deletionBytesScannedCutoff]: "50000000",
    }).template.Resources;
  });
  const onlyOf = (all: Resources, type: string) => {
    const found = ofType(all, type);
    expect(found).toHaveLength(1);
    return (found[0] as [string, Resource])[1].Properties;
  };

  it("Cognito mails with its own sender by default (trials), through SES from a verified identity when given", () => {
    const byDefault = onlyOf(resources, "AWS::Cognito::UserPool").EmailConfiguration as
      | { EmailSendingAccount?: string }
      | undefined;
    expect(byDefault?.EmailSendingAccount ?? "COGNITO_DEFAULT").toBe("COGNITO_DEFAULT");
    const withSes = onlyOf(variant, "AWS::Cognito::UserPool").EmailConfiguration as Record<string, unknown>;
    expect(withSes).toMatchObject({ EmailSendingAccount: "DEVELOPER", From: "dmt <no-reply@example.com>" });
    expect(JSON.stringify(withSes.SourceArn)).toContain(":identity/no-reply@example.com");
  });

  it("a domain sends as no-reply@ it, and a malformed identity fails the synth naming it", () => {
    const domain = synthesize({ [CONTEXT.sesIdentity]: "mail.example.com" }).template.Resources;
    const config = onlyOf(domain, "AWS::Cognito::UserPool").EmailConfiguration as Record<string, unknown>;
    expect(config.From).toBe("dmt <no-reply@mail.example.com>");
    expect(JSON.stringify(config.SourceArn)).toContain(":identity/mail.example.com");
    expect(() => synthesize({ [CONTEXT.sesIdentity]: "ops@@example" })).toThrow(
      'dmt:sesIdentity: "ops@@example" is neither an email address nor a domain',
    );
  });

  it("deletion scans in a workgroup of its own, with its own scan limit", () => {
    const groups = (all: Resources) =>
      new Map(
        ofType(all, "AWS::Athena::WorkGroup").map(([id, g]) => [
          id,
          (g.Properties.WorkGroupConfiguration as { BytesScannedCutoffPerQuery: number })
            .BytesScannedCutoffPerQuery,
        ]),
      );
    const exportsId = stack.getLogicalId(stack.warehouse.workGroup);
    const deletionId = stack.getLogicalId(stack.warehouse.deletionWorkGroup);
    expect(groups(resources)).toEqual(
      new Map([
        [exportsId, 10 * 1024 ** 3],
        [deletionId, 1024 ** 4],
      ]),
    );
    expect(groups(variant)).toEqual(
      new Map([
        [exportsId, 10 * 1024 ** 3],
        [deletionId, 50_000_000],
      ]),
    );
    const steps = stack.deletion.steps.function;
    const env = environmentOf(steps);
    expect(env.DMT_ATHENA_WORKGROUP).toEqual({ Ref: deletionId });
    const athena = (fn: typeof steps) =>
      JSON.stringify(
        statementsOf(idOf(fn.role as never)).filter((s) => JSON.stringify(s.Action).includes("athena:")),
      );
    expect(athena(steps)).toContain(deletionId);
    expect(athena(steps)).not.toContain(exportsId);
    expect(athena(stack.dataApi.function)).not.toContain(deletionId);
    expect(() => synthesize({ [CONTEXT.deletionBytesScannedCutoff]: "lots" })).toThrow(
      'dmt:deletionBytesScannedCutoff: "lots" is not a whole number of bytes.',
    );
  });
});
