/**
 * The deletion workflow in the synthesized template: the state machine read back from its
 * DefinitionString has the steps the local runner walks (checked against a real local run), with their
 * handlers, retries, loops and failure state; the pipe that starts it; the grants it needs; cdk-nag.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks, type IApplyRule, NagRuleCompliance } from "cdk-nag";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { newDeletionRequest } from "../../lambda/core/deletion";
import { DELETION_FAILURE_STEP, DELETION_STEPS, NOT_RETRIED } from "../../lambda/core/deletion-steps";
import { silentLogger } from "../../lambda/core/logger";
import { openLocalStore } from "../../lambda/local/store";
import { startLocalWarehouse } from "../../lambda/local/warehouse";
import { defineApp } from "../../lib/app";
import { IN_FLIGHT_WINDOW } from "../../lib/deletion";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import type { DmtStack } from "../../lib/stack";

type Resource = { Type: string; Properties: Record<string, unknown> };
type AslState = Record<string, unknown> & { Type: string; Next?: string };
interface Asl {
  StartAt: string;
  States: Record<string, AslState>;
}

const outdir = mkdtempSync(join(tmpdir(), "dmt-cdk-deletion-"));
let stack: DmtStack;
let resources: Record<string, Resource>;
let asl: Asl;

/** CloudFormation's `Fn::Join` of the definition, with each token written `<logical id>.<attribute>`. */
function definitionOf(definition: unknown): Asl {
  const join = (definition as { "Fn::Join": [string, unknown[]] })["Fn::Join"];
  const token = (part: unknown) => {
    const getAtt = (part as { "Fn::GetAtt"?: [string, string] })["Fn::GetAtt"];
    return getAtt ? getAtt.join(".") : "TOKEN";
  };
  const text = join[1].map((part) => (typeof part === "string" ? part : token(part))).join(join[0]);
  return JSON.parse(text) as Asl;
}

const logicalId = (construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]);
const arnOf = (construct: { node: { defaultChild?: unknown } }) => ({
  "Fn::GetAtt": [logicalId(construct), "Arn"],
});

beforeAll(() => {
  const context = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
    string,
    unknown
  >;
  // Bundling is covered by the CLI synth test; here the template is what matters.
  const app = new App({ outdir, context: { ...context, "aws:cdk:bundling-stacks": [] } });
  stack = defineApp(app);
  const template = app.synth().getStackByName(stack.stackName).template as {
    Resources: Record<string, Resource>;
  };
  resources = template.Resources;
  const machine = resources[logicalId(stack.deletion.stateMachine)];
  expect(machine?.Type).toBe("AWS::StepFunctions::StateMachine");
  asl = definitionOf(machine?.Properties.DefinitionString);
});
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

/**
 * The states from the start until a terminal state, taking each repeat's Choice default (no repeat)
 * and, at the map's Choice, the branch that rewrites (files were found).
 */
function mainPath(): string[] {
  const path: string[] = [];
  const skips = DELETION_STEPS.flatMap((s) => (s.kind === "map" ? [s.skip.choice] : []));
  for (let name: string | undefined = asl.StartAt; name; ) {
    path.push(name);
    const state = asl.States[name] as AslState;
    if (state.Type !== "Choice") name = state.Next;
    else if (skips.includes(name)) name = (state.Choices as { Next: string }[])[0]?.Next;
    else name = state.Default as string;
  }
  return path;
}

/** The states a real local run enters: a request deleted end to end, and one that fails at once. */
async function localRuns(): Promise<{ succeeded: string[]; failed: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "dmt-deletion-run-"));
  const local = await openLocalStore(dir);
  let states: string[] = [];
  const warehouse = await startLocalWarehouse({
    dataDir: dir,
    logger: silentLogger,
    deletion: {
      db: local.db,
      tables: local.tables,
      runner: { sleep: async () => {}, onState: (name) => states.push(name) },
    },
  });
  try {
    const deletion = warehouse.deletion;
    if (!deletion) throw new Error("no deletion");
    for (const i of [1, 2]) {
      await warehouse.queue.send(
        syntheticRecord(i, { projectId: "proj-a", overrides: { userIdHeader: `u${i}` } }),
      );
    }
    await warehouse.queue.deliver();
    const request = newDeletionRequest("proj-a", { userId: "u1", reason: "template test" }, Date.now());
    await deletion.routes.requests.create(request);
    expect(await deletion.runner.run(request)).toBe("succeeded");
    const succeeded = states;
    states = [];
    expect(
      await deletion.runner.run({ projectId: "proj-a", requestId: "del_000000000000000000000000" }),
    ).toBe("failed");
    return { succeeded, failed: states };
  } finally {
    await warehouse.close();
    await local.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the deletion state machine", () => {
  it("walks the same states, in the same order, as the local runner", async () => {
    const runs = await localRuns();
    expect(mainPath()).toEqual([...runs.succeeded, "Deleted"]);
    expect(runs.succeeded).toEqual([
      "RecordRequest",
      "WaitForInFlight",
      "FindFiles",
      "AnyFiles",
      "RewriteFiles",
      "PurgeCopies",
      "Verify",
      "RowsRemain",
    ]);
    // The failure path: the first step's catch leads where the runner went.
    const first = asl.States[runs.failed[0] as string] as unknown as {
      Catch: { ErrorEquals: string[]; Next: string }[];
    };
    expect(first.Catch.find((c) => c.ErrorEquals.includes("States.ALL"))?.Next).toBe(runs.failed[1]);
    expect(runs.failed).toEqual(["RecordRequest", DELETION_FAILURE_STEP.name]);
    expect(asl.States.MarkFailed?.Next).toBe("DeletionFailed");
    expect(asl.States.DeletionFailed?.Type).toBe("Fail");
  });

  it("calls each step's handler with the state, retrying with backoff as the definition says", () => {
    const stepsArn = `${logicalId(stack.deletion.steps.function)}.Arn`;
    for (const step of [...DELETION_STEPS, { ...DELETION_FAILURE_STEP, kind: "task" as const }]) {
      const state = asl.States[step.name] as AslState;
      if (step.kind === "wait") {
        expect(state).toMatchObject({ Type: "Wait", Seconds: IN_FLIGHT_WINDOW.toSeconds() });
        continue;
      }
      let task = state;
      if (step.kind === "map") {
        // A Distributed Map over FindFiles' manifest in the warehouse bucket, one Standard child
        // execution per file.
        expect(state).toMatchObject({
          Type: "Map",
          ItemReader: {
            Resource: "arn:TOKEN:states:::s3:getObject",
            ReaderConfig: { InputType: "JSONL" },
            Parameters: { Bucket: "TOKEN", "Key.$": `$.${step.manifest}` },
          },
          ItemProcessor: { ProcessorConfig: { Mode: "DISTRIBUTED", ExecutionType: "STANDARD" } },
          MaxConcurrency: step.maxConcurrency,
          ToleratedFailurePercentage: step.toleratedFailurePercentage,
          ResultPath: null,
          ItemSelector: {
            "projectId.$": "$.projectId",
            "requestId.$": "$.requestId",
            "key.$": "$$.Map.Item.Value.key",
          },
        });
        expect(step.maxConcurrency).toBeGreaterThan(1);
        expect(step.toleratedFailurePercentage).toBeGreaterThan(0);
        const processor = state.ItemProcessor as Asl;
        expect(Object.keys(processor.States)).toEqual([processor.StartAt]);
        task = processor.States[processor.StartAt] as AslState;
      }
      // The Lambda's response is the next state (payloadResponseOnly).
      expect(task).toMatchObject({ Type: "Task", Resource: stepsArn });
      expect(task.Parameters).toEqual({ step: step.handler, "state.$": "$" });
      expect(task.Retry).toEqual([
        { ErrorEquals: [...NOT_RETRIED], MaxAttempts: 0 },
        {
          ErrorEquals: ["States.ALL"],
          IntervalSeconds: step.retry.intervalSeconds,
          MaxAttempts: step.retry.maxAttempts,
          BackoffRate: step.retry.backoffRate,
          MaxDelaySeconds: step.retry.maxDelaySeconds,
          JitterStrategy: "FULL",
        },
      ]);
    }
  });

  it("ends a duplicate run as succeeded and sends every other failure to MarkFailed", () => {
    for (const step of DELETION_STEPS) {
      if (step.kind === "wait") continue;
      expect((asl.States[step.name] as AslState).Catch, step.name).toEqual([
        { ErrorEquals: ["DeletionAlreadyCompletedError"], Next: "Deleted" },
        { ErrorEquals: ["States.ALL"], ResultPath: "$.error", Next: "MarkFailed" },
      ]);
    }
  });

  it("loops back to FindFiles while files remain, and while verification finds rows", () => {
    for (const step of DELETION_STEPS) {
      if (step.kind === "wait" || !step.repeat) continue;
      const { choice, when, goTo } = step.repeat;
      expect(asl.States[step.name]?.Next).toBe(choice);
      const variable = `$.${when}`;
      expect(asl.States[choice]).toMatchObject({
        Type: "Choice",
        Choices: [
          {
            And: [
              { Variable: variable, IsPresent: true },
              { Variable: variable, BooleanEquals: true },
            ],
            Next: goTo,
          },
        ],
      });
    }
  });

  it("skips the map when FindFiles found nothing, and reads the manifest from the warehouse bucket", () => {
    for (const step of DELETION_STEPS) {
      if (step.kind !== "map") continue;
      const variable = `$.${step.skip.field}`;
      expect(asl.States[step.skip.choice]).toEqual({
        Type: "Choice",
        Choices: [
          {
            And: [
              { Variable: variable, IsPresent: true },
              { Variable: variable, NumericGreaterThan: 0 },
            ],
            Next: step.name,
          },
        ],
        Default: step.skip.goTo,
      });
    }
    // The Bucket token of the ItemReader is the warehouse data bucket.
    const machine = resources[logicalId(stack.deletion.stateMachine)]?.Properties.DefinitionString;
    expect(JSON.stringify(machine)).toContain(
      `"Bucket\\":\\"",{"Ref":"${logicalId(stack.warehouse.dataBucket)}"}`,
    );
    // The state machine may read the manifest and start and watch its own child executions.
    const roleId = stack.getLogicalId(stack.deletion.stateMachine.role.node.defaultChild as never);
    const statements = Object.values(resources)
      .filter((r) => r.Type === "AWS::IAM::Policy" && JSON.stringify(r.Properties.Roles).includes(roleId))
      .flatMap(
        (p) => (p.Properties.PolicyDocument as { Statement: { Action: string | string[] }[] }).Statement,
      );
    const actions = statements.flatMap((st) => [st.Action].flat());
    expect(actions).toEqual(expect.arrayContaining(["s3:GetObject", "states:StartExecution"]));
  });

  it("is a Standard workflow that logs every event, without execution data, and traces", () => {
    const props = resources[logicalId(stack.deletion.stateMachine)]?.Properties ?? {};
    expect(props.StateMachineType).toBe("STANDARD");
    expect(props.TracingConfiguration).toEqual({ Enabled: true });
    expect(props.LoggingConfiguration).toMatchObject({ Level: "ALL", IncludeExecutionData: false });
  });

  it("waits out the warehouse queue's in-flight window, read from the queue and its event source", () => {
    const queue = resources[logicalId(stack.warehouse.queue)]?.Properties as {
      VisibilityTimeout: number;
      RedrivePolicy: { maxReceiveCount: number };
    };
    const mapping = Object.values(resources).find(
      (r) =>
        r.Type === "AWS::Lambda::EventSourceMapping" &&
        JSON.stringify(r.Properties.FunctionName).includes(logicalId(stack.warehouse.consumer.function)),
    )?.Properties as { MaximumBatchingWindowInSeconds: number };
    const window =
      queue.VisibilityTimeout * queue.RedrivePolicy.maxReceiveCount + mapping.MaximumBatchingWindowInSeconds;
    expect(asl.States.WaitForInFlight).toMatchObject({ Type: "Wait", Seconds: window });
    expect(IN_FLIGHT_WINDOW.toSeconds()).toBe(window);
  });
});

describe("starting and wiring", () => {
  it("starts a run for each new request item, from the requests table's stream", () => {
    const table = resources[logicalId(stack.store.tables.deletionRequests)];
    expect(table?.Properties.StreamSpecification).toEqual({ StreamViewType: "NEW_IMAGE" });
    const pipe = resources[stack.getLogicalId(stack.deletion.pipe)]?.Properties ?? {};
    expect(pipe.Source).toEqual({
      "Fn::GetAtt": [logicalId(stack.store.tables.deletionRequests), "StreamArn"],
    });
    expect(pipe.Target).toEqual({ Ref: logicalId(stack.deletion.stateMachine) });
    const source = pipe.SourceParameters as {
      DynamoDBStreamParameters: unknown;
      FilterCriteria: { Filters: { Pattern: string }[] };
    };
    // Bounded: a record that cannot start a run goes to the dead-letter queue (operations.test.ts).
    expect(source.DynamoDBStreamParameters).toEqual({
      StartingPosition: "LATEST",
      BatchSize: 1,
      MaximumRetryAttempts: 5,
      MaximumRecordAgeInSeconds: 3600,
      DeadLetterConfig: { Arn: { "Fn::GetAtt": [logicalId(stack.deletion.pipeDeadLetterQueue), "Arn"] } },
    });
    expect(source.FilterCriteria.Filters.map((f) => JSON.parse(f.Pattern))).toEqual([
      { eventName: ["INSERT"], dynamodb: { NewImage: { kind: { S: ["request"] } } } },
    ]);
    const target = pipe.TargetParameters as {
      InputTemplate: string;
      StepFunctionStateMachineParameters: unknown;
    };
    expect(target.StepFunctionStateMachineParameters).toEqual({ InvocationType: "FIRE_AND_FORGET" });
    // What the template yields for a request item is the runner's input.
    const item = { projectId: { S: "proj-a" }, itemId: { S: "del_0123456789abcdef01234567" } };
    const input = target.InputTemplate.replace(
      /<\$\.dynamodb\.NewImage\.(\w+)\.S>/g,
      (_, f: string) => item[f as keyof typeof item].S,
    );
    expect(JSON.parse(input)).toEqual({ projectId: "proj-a", requestId: "del_0123456789abcdef01234567" });
  });

  it("gives the steps, the data API and the consumer the access they need", () => {
    const policies = Object.values(resources).filter((r) => r.Type === "AWS::IAM::Policy");
    const statementsOf = (roleId: string) =>
      policies
        .filter((p) => JSON.stringify(p.Properties.Roles).includes(roleId))
        .flatMap(
          (p) => (p.Properties.PolicyDocument as { Statement: { Action: string | string[] }[] }).Statement,
        );
    const actionsOf = (roleId: string) => statementsOf(roleId).flatMap((s) => [s.Action].flat());
    const roleOf = (fn: { role?: { node: { defaultChild?: unknown } } }) =>
      stack.getLogicalId((fn.role as { node: { defaultChild: unknown } }).node.defaultChild as never);

    const steps = actionsOf(roleOf(stack.deletion.steps.function));
    for (const action of [
      "s3:DeleteObjectVersion",
      "s3:ListBucketVersions",
      "athena:StartQueryExecution",
      "dynamodb:PutItem",
      "dynamodb:UpdateItem",
    ]) {
      expect(steps).toContain(action);
    }
    // FindFiles writes its manifests under their own prefix of the data bucket, and only there.
    const manifestWrites = statementsOf(roleOf(stack.deletion.steps.function)).filter((st) =>
      JSON.stringify((st as { Resource?: unknown }).Resource).includes("/deletion-manifests/*"),
    );
    expect(manifestWrites).toEqual([
      {
        Action: "s3:PutObject",
        Effect: "Allow",
        Resource: {
          "Fn::Join": ["", [arnOf(stack.warehouse.dataBucket), "/deletion-manifests/*"]],
        },
      },
    ]);
    // The dashboard's index and rollups: exactly what a purge sends, on the tables themselves.
    const onTable = (roleId: string, table: { node: { defaultChild?: unknown } }) =>
      statementsOf(roleId).filter(
        (st) => JSON.stringify((st as { Resource?: unknown }).Resource) === JSON.stringify(arnOf(table)),
      );
    const stepsRole = roleOf(stack.deletion.steps.function);
    expect(onTable(stepsRole, stack.store.tables.interactions)).toEqual([
      {
        Action: [
          "dynamodb:BatchGetItem",
          "dynamodb:BatchWriteItem",
          "dynamodb:DeleteItem",
          "dynamodb:GetItem",
          "dynamodb:PutItem",
          "dynamodb:Query",
        ],
        Effect: "Allow",
        Resource: arnOf(stack.store.tables.interactions),
      },
    ]);
    expect(onTable(stepsRole, stack.store.tables.usageRollups)).toEqual([
      {
        Action: ["dynamodb:DeleteItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"],
        Effect: "Allow",
        Resource: arnOf(stack.store.tables.usageRollups),
      },
    ]);
    // No index of the interactions table: packs are read from the table itself.
    expect(JSON.stringify(statementsOf(stepsRole))).not.toContain("/index/");
    const stepsEnv = resources[logicalId(stack.deletion.steps.function)]?.Properties.Environment as {
      Variables: Record<string, unknown>;
    };
    expect(stepsEnv.Variables).toMatchObject({
      DMT_TABLE_INTERACTIONS: { Ref: logicalId(stack.store.tables.interactions) },
      DMT_TABLE_USAGEROLLUPS: { Ref: logicalId(stack.store.tables.usageRollups) },
    });
    expect(actionsOf(roleOf(stack.dataApi.function))).toEqual(expect.arrayContaining(["dynamodb:PutItem"]));
    const consumer = stack.warehouse.consumer.function;
    expect(actionsOf(roleOf(consumer))).toContain("dynamodb:Query");
    const env = resources[logicalId(consumer)]?.Properties.Environment as {
      Variables: Record<string, unknown>;
    };
    expect(env.Variables.DMT_TABLE_DELETIONTOMBSTONES).toEqual({
      Ref: logicalId(stack.store.tables.deletionTombstones),
    });
  });
});

describe("observability", () => {
  it("alarms on a failed deletion run and watches the steps function", () => {
    const alarms = Object.values(resources).filter((r) => r.Type === "AWS::CloudWatch::Alarm");
    const failed = alarms.filter((a) => a.Properties.MetricName === "ExecutionsFailed");
    expect(failed).toHaveLength(1);
    expect(failed[0]?.Properties).toMatchObject({
      Namespace: "AWS/States",
      Dimensions: [{ Name: "StateMachineArn", Value: { Ref: logicalId(stack.deletion.stateMachine) } }],
      Statistic: "Sum",
      Period: 300,
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
    });
    const throttles = alarms.filter((a) => a.Properties.MetricName === "Throttles");
    expect(throttles.map((a) => a.Properties.Dimensions)).toContainEqual([
      { Name: "FunctionName", Value: { Ref: logicalId(stack.deletion.steps.function) } },
    ]);
  });
});

/** Every AwsSolutions finding, acknowledged or not. */
class AllFindings extends AwsSolutionsChecks {
  readonly found: { path: string; id: string }[] = [];
  protected override applyRule(params: IApplyRule): void {
    const id = `${this.packName}-${params.ruleSuffixOverride ?? params.rule.name}`;
    const result = params.rule(params.node);
    if (result === NagRuleCompliance.NON_COMPLIANT) this.found.push({ path: params.node.node.path, id });
    else if (Array.isArray(result)) {
      for (const finding of result) this.found.push({ path: params.node.node.path, id: `${id}[${finding}]` });
    }
  }
}

describe("cdk-nag", () => {
  it("acknowledges exactly the workflow's findings, each with its reason", () => {
    const scope = stack.deletion;
    const acknowledged: { path: string; id: string }[] = [];
    for (const construct of scope.node.findAll()) {
      for (const entry of construct.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        for (const id of Object.keys(entry.data as Record<string, string>)) {
          acknowledged.push({ path: construct.node.path, id: id.replace(/^annotation::/i, "") });
        }
      }
    }
    const checks = new AllFindings();
    checks.validateScope(scope);
    const covers = (ack: { path: string; id: string }, f: { path: string; id: string }) =>
      ack.id === f.id && (f.path === ack.path || f.path.startsWith(`${ack.path}/`));
    expect(checks.found.filter((f) => !acknowledged.some((a) => covers(a, f)))).toEqual([]);
    expect(acknowledged.filter((a) => !checks.found.some((f) => covers(a, f)))).toEqual([]);
  });
});
