/**
 * The warehouse in the CDK stack: queue and dead-letter queue, the consumer and its event source, the
 * buckets, the Glue table derived from the record schema, the Athena workgroup, the spool re-sender,
 * the grants of the functions that produce records and serve exports, the alarms, and cdk-nag.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CfnResource } from "aws-cdk-lib";
import { App, Validations } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import type { CloudAssembly } from "aws-cdk-lib/cx-api";
import { AwsSolutionsChecks, type IApplyRule, NagRuleCompliance } from "cdk-nag";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SPOOL_PREFIX } from "../../lambda/adapters/sqs/spool";
import { ERASED_USAGE_PREFIX } from "../../lambda/core/erased-usage";
import {
  glueColumns,
  gluePartitionKeys,
  glueProjectionParameters,
  INTERACTIONS_PREFIX,
  partitionPrefix,
} from "../../lambda/core/record";
import { defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { VENDORS } from "../../lib/secrets";
import { DmtStack } from "../../lib/stack";
import { BUNDLING_TIMEOUT_MS } from "../support/timeouts";

type Resource = { Type: string; Properties: Record<string, unknown>; DeletionPolicy?: string };
type Statement = { Action: string | string[]; Resource: unknown; Effect: string; Condition?: unknown };

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const outdirs: string[] = [];
const NO_BUNDLING = { "aws:cdk:bundling-stacks": [] };

function newApp(context: Record<string, unknown> = {}): App {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-warehouse-cdk-"));
  outdirs.push(outdir);
  return new App({ outdir, context: { ...CDK_JSON_CONTEXT, ...context } });
}

let stack: DmtStack;
let assembly: CloudAssembly;
let template: Template;
let resources: Record<string, Resource>;

beforeAll(() => {
  // Bundled for real, as `cdk synth` does: the bundles are inspected below. Throws on any cdk-nag
  // finding nobody acknowledged.
  const app = newApp();
  stack = defineApp(app);
  assembly = app.synth();
  const json = assembly.getStackByName(stack.stackName).template;
  template = Template.fromJSON(json);
  resources = json.Resources;
}, BUNDLING_TIMEOUT_MS);

afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

const id = (construct: { node: { defaultChild?: unknown } }) =>
  stack.getLogicalId(construct.node.defaultChild as CfnResource);
const warehouse = () => stack.warehouse;
const getAtt = (construct: { node: { defaultChild?: unknown } }, attribute = "Arn") => ({
  "Fn::GetAtt": [id(construct), attribute],
});
const objectsArn = (bucket: { node: { defaultChild?: unknown } }, prefix: string) => ({
  "Fn::Join": ["", [getAtt(bucket), `/${prefix}*`]],
});

function propertiesOf(logicalId: string): Record<string, unknown> {
  const resource = resources[logicalId];
  if (!resource) throw new Error(`no resource ${logicalId}`);
  return resource.Properties;
}

const environmentOf = (fn: { node: { defaultChild?: unknown } }) =>
  (propertiesOf(id(fn)).Environment as { Variables: Record<string, unknown> }).Variables;

/** Every statement of the policies attached to a function's role. */
function statementsOf(fn: { role?: { node: { defaultChild?: unknown } } }): Statement[] {
  const role = id(fn.role as { node: { defaultChild?: unknown } });
  return Object.values(resources)
    .filter((r) => r.Type === "AWS::IAM::Policy")
    .filter((r) => JSON.stringify(r.Properties.Roles) === JSON.stringify([{ Ref: role }]))
    .flatMap((r) => (r.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
}

const actionsOf = (s: Statement) => (Array.isArray(s.Action) ? s.Action : [s.Action]);

/** The statements that name any action of `service`, e.g. "s3". */
const onService = (statements: Statement[], service: string) =>
  statements.filter((s) => actionsOf(s).some((a) => a.startsWith(`${service}:`)));

/** CloudFormation's Fn::Join of literals and Refs, as text: `{LogicalId}` for each Ref. */
function render(value: unknown): unknown {
  if (typeof value !== "object" || value === null) return value;
  const join = (value as { "Fn::Join"?: [string, unknown[]] })["Fn::Join"];
  if (join) return join[1].map(render).join(join[0]);
  const ref = (value as { Ref?: string }).Ref;
  if (ref) return `{${ref}}`;
  return value;
}

describe("queue", () => {
  it("is encrypted, TLS-only, sized for a record, and moves a message failed 5 times to the dead-letter queue", () => {
    expect(resources[id(warehouse().queue)]?.Properties).toEqual({
      SqsManagedSseEnabled: true,
      MaximumMessageSize: 1024 * 1024,
      MessageRetentionPeriod: 14 * 86_400,
      // Six times the consumer's 60 s.
      VisibilityTimeout: 360,
      RedrivePolicy: { deadLetterTargetArn: getAtt(warehouse().deadLetterQueue), maxReceiveCount: 5 },
    });
    expect(resources[id(warehouse().deadLetterQueue)]?.Properties).toEqual({
      SqsManagedSseEnabled: true,
      MaximumMessageSize: 1024 * 1024,
      MessageRetentionPeriod: 14 * 86_400,
    });
    for (const queue of [warehouse().queue, warehouse().deadLetterQueue]) {
      template.hasResourceProperties("AWS::SQS::QueuePolicy", {
        Queues: [{ Ref: id(queue) }],
        PolicyDocument: {
          Statement: [
            Match.objectLike({
              Effect: "Deny",
              Principal: { AWS: "*" },
              Action: "sqs:*",
              Condition: { Bool: { "aws:SecureTransport": "false" } },
            }),
          ],
        },
      });
    }
  });
});

describe("consumer", () => {
  it("takes batches of up to 10,000 records or 60 s, two at a time, reporting failed items", () => {
    // One mapping from the record queue (the webhook delivery queue has its own, lib/events.ts).
    const fromQueue = Object.values(template.findResources("AWS::Lambda::EventSourceMapping")).filter(
      (m) => JSON.stringify(m.Properties.EventSourceArn) === JSON.stringify(getAtt(warehouse().queue)),
    );
    expect(fromQueue).toHaveLength(1);
    template.hasResourceProperties("AWS::Lambda::EventSourceMapping", {
      EventSourceArn: getAtt(warehouse().queue),
      FunctionName: { Ref: id(warehouse().consumer.function) },
      BatchSize: 10_000,
      MaximumBatchingWindowInSeconds: 60,
      FunctionResponseTypes: ["ReportBatchItemFailures"],
      ScalingConfig: { MaximumConcurrency: 2 },
    });
  });

  it("runs 60 s with 1 GB and knows its bucket, dead-letter queue, delivery ledger and index tables", () => {
    const props = resources[id(warehouse().consumer.function)]?.Properties ?? {};
    expect(props.Timeout).toBe(60);
    expect(props.MemorySize).toBe(1024);
    expect((props.Environment as { Variables: Record<string, unknown> }).Variables).toMatchObject({
      DMT_WAREHOUSE_BUCKET: { Ref: id(warehouse().dataBucket) },
      DMT_DEAD_LETTER_QUEUE_URL: { Ref: id(warehouse().deadLetterQueue) },
      DMT_TABLE_WAREHOUSEDELIVERIES: { Ref: id(stack.store.tables.warehouseDeliveries) },
      DMT_TABLE_INTERACTIONS: { Ref: id(stack.store.tables.interactions) },
      DMT_TABLE_USAGEROLLUPS: { Ref: id(stack.store.tables.usageRollups) },
    });
  });

  it("may write and check Parquet files under interactions/ and erased-usage/ only, use its ledger, and dead-letter", () => {
    const statements = statementsOf(warehouse().consumer.function);
    expect(onService(statements, "s3")).toEqual([
      {
        Action: "s3:ListBucket",
        Effect: "Allow",
        Resource: getAtt(warehouse().dataBucket),
        Condition: { StringLike: { "s3:prefix": ["interactions/*"] } },
      },
      { Action: "s3:GetBucketLocation", Effect: "Allow", Resource: getAtt(warehouse().dataBucket) },
      {
        Action: ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
        Effect: "Allow",
        Resource: objectsArn(warehouse().dataBucket, INTERACTIONS_PREFIX),
      },
      // Records a deletion covers that were never written: their money as erased usage.
      {
        Action: "s3:ListBucket",
        Effect: "Allow",
        Resource: getAtt(warehouse().dataBucket),
        Condition: { StringLike: { "s3:prefix": ["erased-usage/*"] } },
      },
      {
        Action: ["s3:GetObject", "s3:PutObject"],
        Effect: "Allow",
        Resource: objectsArn(warehouse().dataBucket, ERASED_USAGE_PREFIX),
      },
    ]);
    // Its ledger, the dashboard's index (batches of entries) and rollups, the deletion tombstones and
    // the billing exports' status.
    expect(onService(statements, "dynamodb")).toEqual([
      {
        Action: ["dynamodb:BatchGetItem", "dynamodb:PutItem"],
        Effect: "Allow",
        Resource: getAtt(stack.store.tables.warehouseDeliveries),
      },
      {
        Action: ["dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"],
        Effect: "Allow",
        Resource: getAtt(stack.store.tables.interactions),
      },
      { Action: "dynamodb:UpdateItem", Effect: "Allow", Resource: getAtt(stack.store.tables.usageRollups) },
      { Action: "dynamodb:Query", Effect: "Allow", Resource: getAtt(stack.store.tables.deletionTombstones) },
      // Billing exports: the project's connection read, each billable call noted before it is queued.
      {
        Action: ["dynamodb:PutItem", "dynamodb:Query"],
        Effect: "Allow",
        Resource: getAtt(stack.store.tables.billingMeter),
      },
    ]);
    const sqs = onService(statements, "sqs");
    // Sends: to its dead-letter queue, and billable calls to the billing exports' meter queue.
    expect(sqs.find((s) => actionsOf(s).includes("sqs:SendMessage"))?.Resource).toEqual([
      getAtt(stack.billing.queue),
      getAtt(warehouse().deadLetterQueue),
    ]);
    expect(sqs.find((s) => actionsOf(s).includes("sqs:ReceiveMessage"))?.Resource).toEqual(
      getAtt(warehouse().queue),
    );
  });

  it("is bundled without DuckDB (lambda/local/warehouse.ts stays out of Lambda)", () => {
    for (const fn of [warehouse().consumer, warehouse().spoolResender, stack.dataApi]) {
      const code = resources[id(fn.function)]?.Properties.Code as { S3Key: string };
      const bundle = join(assembly.directory, `asset.${code.S3Key.replace(/\.zip$/, "")}`, "index.mjs");
      expect(readFileSync(bundle, "utf8")).not.toMatch(/duckdb/i);
      expect(statSync(bundle).size).toBeLessThan(1024 * 1024);
    }
  });
});

describe("buckets", () => {
  const buckets = () => [
    warehouse().dataBucket,
    warehouse().resultsBucket,
    warehouse().exportBucket,
    warehouse().logsBucket,
  ];

  it("are private, encrypted, TLS 1.2 only, and retained by default", () => {
    for (const bucket of buckets()) {
      const resource = resources[id(bucket)];
      expect(resource?.Properties).toMatchObject({
        BucketEncryption: {
          ServerSideEncryptionConfiguration: [{ ServerSideEncryptionByDefault: { SSEAlgorithm: "AES256" } }],
        },
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
      });
      expect(resource?.DeletionPolicy).toBe("Retain");
      const everything = [getAtt(bucket), objectsArn(bucket, "")];
      template.hasResourceProperties("AWS::S3::BucketPolicy", {
        Bucket: { Ref: id(bucket) },
        PolicyDocument: {
          Statement: Match.arrayWith([
            {
              Effect: "Deny",
              Principal: { AWS: "*" },
              Action: "s3:*",
              Condition: { Bool: { "aws:SecureTransport": "false" } },
              Resource: everything,
            },
            {
              Effect: "Deny",
              Principal: { AWS: "*" },
              Action: "s3:*",
              Condition: { NumericLessThan: { "s3:TlsVersion": 1.2 } },
              Resource: everything,
            },
          ]),
        },
      });
    }
  });

  it("log their accesses to the logs bucket, which keeps them 90 days", () => {
    const prefixes = new Map([
      [warehouse().dataBucket, "data/"],
      [warehouse().resultsBucket, "athena-results/"],
      [warehouse().exportBucket, "exports/"],
    ]);
    for (const [bucket, prefix] of prefixes) {
      expect(resources[id(bucket)]?.Properties.LoggingConfiguration).toEqual({
        DestinationBucketName: { Ref: id(warehouse().logsBucket) },
        LogFilePrefix: prefix,
      });
      template.hasResourceProperties("AWS::S3::BucketPolicy", {
        Bucket: { Ref: id(warehouse().logsBucket) },
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({
              Effect: "Allow",
              Principal: { Service: "logging.s3.amazonaws.com" },
              Action: "s3:PutObject",
              Resource: objectsArn(warehouse().logsBucket, prefix),
              Condition: Match.objectLike({ ArnLike: { "aws:SourceArn": getAtt(bucket) } }),
            }),
          ]),
        },
      });
    }
    expect(resources[id(warehouse().logsBucket)]?.Properties.LifecycleConfiguration).toEqual({
      Rules: [{ Id: "expire-access-logs", ExpirationInDays: 90, Status: "Enabled" }],
    });
  });

  it("version the data, let old versions go after a day, and deletion manifests after 14 days", () => {
    const props = resources[id(warehouse().dataBucket)]?.Properties ?? {};
    expect(props.VersioningConfiguration).toEqual({ Status: "Enabled" });
    expect(props.LifecycleConfiguration).toEqual({
      Rules: [
        {
          Id: "expire-noncurrent-versions",
          NoncurrentVersionExpiration: { NoncurrentDays: 1 },
          ExpiredObjectDeleteMarker: true,
          AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 },
          Status: "Enabled",
        },
        {
          Id: "expire-deletion-manifests",
          Prefix: "deletion-manifests/",
          ExpirationInDays: 14,
          Status: "Enabled",
        },
      ],
    });
  });

  it("expire Athena results after a day and bucket exports after 30 days", () => {
    const expiry = (bucket: { node: { defaultChild?: unknown } }) =>
      (propertiesOf(id(bucket)).LifecycleConfiguration as { Rules: object[] }).Rules;
    expect(expiry(warehouse().resultsBucket)).toEqual([
      expect.objectContaining({ ExpirationInDays: 1, Status: "Enabled" }),
    ]);
    expect(expiry(warehouse().exportBucket)).toEqual([
      expect.objectContaining({ ExpirationInDays: 30, Status: "Enabled" }),
    ]);
  });
});

describe("Glue table", () => {
  it("has exactly the record schema's columns and partition keys, as Parquet", () => {
    const table = resources[stack.getLogicalId(warehouse().table)];
    const input = table?.Properties.TableInput as {
      Name: string;
      TableType: string;
      PartitionKeys: unknown;
      StorageDescriptor: { Columns: unknown; Location: unknown; SerdeInfo: unknown; InputFormat: string };
    };
    expect(input.Name).toBe("interactions");
    expect(input.TableType).toBe("EXTERNAL_TABLE");
    const keysOf = (list: unknown) =>
      (list as { Name: string; Type: string; Comment: string }[]).map((c) => ({
        name: c.Name,
        type: c.Type,
        comment: c.Comment,
      }));
    expect(keysOf(input.StorageDescriptor.Columns)).toEqual(glueColumns());
    expect(keysOf(input.PartitionKeys)).toEqual(gluePartitionKeys());
    expect(input.StorageDescriptor.SerdeInfo).toEqual({
      SerializationLibrary: "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
      Parameters: { "serialization.format": "1" },
    });
    expect(input.StorageDescriptor.InputFormat).toBe(
      "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    );
    const bucket = `{${id(warehouse().dataBucket)}}`;
    expect(render(input.StorageDescriptor.Location)).toBe(`s3://${bucket}/interactions/`);
    expect(table?.Properties.DatabaseName).toEqual({ Ref: stack.getLogicalId(warehouse().database) });
  });

  it("projects partitions: project injected, dt a date range, at the consumer's folder layout", () => {
    const table = propertiesOf(stack.getLogicalId(warehouse().table));
    const parameters = (table.TableInput as { Parameters: Record<string, unknown> }).Parameters;
    const rendered = Object.fromEntries(Object.entries(parameters).map(([k, v]) => [k, render(v)]));
    const bucket = `{${id(warehouse().dataBucket)}}`;
    expect(rendered).toEqual({
      classification: "parquet",
      EXTERNAL: "TRUE",
      ...glueProjectionParameters(`s3://${bucket}/${INTERACTIONS_PREFIX}`),
    });
    // Filled in, the template is where the consumer writes.
    const filled = String(rendered["storage.location.template"])
      .replace(/\$\{project\}/, "proj-a")
      .replace(/\$\{dt\}/, "2026-01-02");
    expect(filled).toBe(`s3://${bucket}/${partitionPrefix("proj-a", "2026-01-02")}`);
  });

  it("lives in a database named after the stack", () => {
    template.hasResourceProperties("AWS::Glue::Database", {
      DatabaseInput: Match.objectLike({ Name: "dmt_warehouse" }),
    });
  });
});

describe("Athena workgroup", () => {
  it("runs engine v3 with enforced settings, encrypted results in the results bucket, and a scan cutoff", () => {
    expect(resources[stack.getLogicalId(warehouse().workGroup)]?.Properties).toEqual({
      Name: "Dmt-warehouse",
      Description: expect.any(String),
      State: "ENABLED",
      RecursiveDeleteOption: true,
      WorkGroupConfiguration: {
        EnforceWorkGroupConfiguration: true,
        EngineVersion: { SelectedEngineVersion: "Athena engine version 3" },
        PublishCloudWatchMetricsEnabled: true,
        BytesScannedCutoffPerQuery: 10 * 1024 ** 3,
        ResultConfiguration: {
          OutputLocation: { "Fn::Join": ["", ["s3://", { Ref: id(warehouse().resultsBucket) }, "/"]] },
          EncryptionConfiguration: { EncryptionOption: "SSE_S3" },
          ExpectedBucketOwner: { Ref: "AWS::AccountId" },
        },
      },
    });
  });
});

describe("data API exports", () => {
  it("knows the workgroup, database, table and settings table", () => {
    const env = environmentOf(stack.dataApi.function);
    expect(env).toMatchObject({
      DMT_ATHENA_WORKGROUP: { Ref: stack.getLogicalId(warehouse().workGroup) },
      DMT_WAREHOUSE_DATABASE: { Ref: stack.getLogicalId(warehouse().database) },
      DMT_WAREHOUSE_TABLE: "interactions",
      DMT_TABLE_PROJECTSETTINGS: { Ref: id(stack.store.tables.projectSettings) },
      DMT_TABLE_USAGEROLLUPS: { Ref: id(stack.store.tables.usageRollups) },
    });
  });

  it("reads the rollups (an export's size before its query) with Query only", () => {
    const onRollups = statementsOf(stack.dataApi.function).filter((s) =>
      JSON.stringify(s.Resource).includes(id(stack.store.tables.usageRollups)),
    );
    expect(onRollups.flatMap((s) => actionsOf(s))).toEqual(["dynamodb:Query"]);
  });

  it("may query through its workgroup, read the table and its files, and write results and exports", () => {
    const statements = statementsOf(stack.dataApi.function);
    const athena = onService(statements, "athena");
    expect(athena).toHaveLength(1);
    expect(actionsOf(athena[0] as Statement).sort()).toEqual([
      "athena:GetQueryExecution",
      "athena:GetQueryResults",
      "athena:StartQueryExecution",
      "athena:StopQueryExecution",
    ]);
    expect(render(athena[0]?.Resource)).toBe(
      `arn:{AWS::Partition}:athena:{AWS::Region}:{AWS::AccountId}:workgroup/{${stack.getLogicalId(warehouse().workGroup)}}`,
    );
    const glue = onService(statements, "glue");
    expect(glue).toHaveLength(1);
    const database = `{${stack.getLogicalId(warehouse().database)}}`;
    const GLUE_ARN = "arn:{AWS::Partition}:glue:{AWS::Region}:{AWS::AccountId}";
    expect(((glue[0] as Statement).Resource as unknown[]).map(render)).toEqual([
      `${GLUE_ARN}:catalog`,
      `${GLUE_ARN}:database/${database}`,
      `${GLUE_ARN}:table/${database}/erased_usage`,
      `${GLUE_ARN}:table/${database}/interactions`,
    ]);

    const s3 = onService(statements, "s3");
    expect(s3).toContainEqual({
      Action: "s3:ListBucket",
      Effect: "Allow",
      Resource: getAtt(warehouse().dataBucket),
      Condition: { StringLike: { "s3:prefix": ["interactions/*"] } },
    });
    // The records, and what deletions kept of the calls they removed (FOCUS exports read it).
    expect(s3).toContainEqual({
      Action: "s3:GetObject",
      Effect: "Allow",
      Resource: [
        objectsArn(warehouse().dataBucket, ERASED_USAGE_PREFIX),
        objectsArn(warehouse().dataBucket, INTERACTIONS_PREFIX),
      ],
    });
    expect(s3).toContainEqual({
      Action: "s3:ListBucket",
      Effect: "Allow",
      Resource: getAtt(warehouse().dataBucket),
      Condition: { StringLike: { "s3:prefix": ["erased-usage/*"] } },
    });
    // Nothing else of the data bucket: not the spool, no writes.
    const dataBucketObjects = s3.filter((s) =>
      JSON.stringify(s.Resource).includes(`${id(warehouse().dataBucket)}","Arn"]},"/`),
    );
    expect(dataBucketObjects).toHaveLength(1);
    expect(s3).toContainEqual({
      Action: ["s3:AbortMultipartUpload", "s3:GetObject", "s3:ListMultipartUploadParts", "s3:PutObject"],
      Effect: "Allow",
      Resource: objectsArn(warehouse().resultsBucket, ""),
    });
    expect(s3).toContainEqual({
      Action: ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
      Effect: "Allow",
      Resource: objectsArn(warehouse().exportBucket, ""),
    });
    // The export destination is read from the project's settings (one GetItem grant, beside the
    // tables other data API routes read).
    const reads = onService(statements, "dynamodb").find((s) => s.Action === "dynamodb:GetItem");
    expect([reads?.Resource].flat()).toContainEqual(getAtt(stack.store.tables.projectSettings));
  });
});

describe("producers and the spool", () => {
  it("let each proxy function send records to the queue and spool the refused ones, nothing more", () => {
    for (const vendor of VENDORS) {
      const fn = stack.proxies[vendor].fn.function;
      const env = environmentOf(fn);
      expect(env.DMT_QUEUE_URL).toEqual({ Ref: id(warehouse().queue) });
      expect(env.DMT_WAREHOUSE_BUCKET).toEqual({ Ref: id(warehouse().dataBucket) });
      const statements = statementsOf(fn);
      expect(onService(statements, "s3")).toEqual([
        {
          Action: "s3:PutObject",
          Effect: "Allow",
          Resource: objectsArn(warehouse().dataBucket, SPOOL_PREFIX),
        },
      ]);
      expect(onService(statements, "sqs")).toEqual([
        {
          Action: ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
          Effect: "Allow",
          Resource: getAtt(warehouse().queue),
        },
      ]);
    }
  });

  it("re-sends the spool every 5 minutes, with access to queue-spool/ and the queue only", () => {
    const fn = warehouse().spoolResender.function;
    template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "rate(5 minutes)",
      State: "ENABLED",
      Targets: [
        Match.objectLike({
          Arn: getAtt(warehouse().spoolResender.function),
          RetryPolicy: { MaximumRetryAttempts: 0 },
        }),
      ],
    });
    const env = environmentOf(fn);
    expect(env).toMatchObject({
      DMT_QUEUE_URL: { Ref: id(warehouse().queue) },
      DMT_WAREHOUSE_BUCKET: { Ref: id(warehouse().dataBucket) },
    });
    const statements = statementsOf(fn);
    expect(onService(statements, "s3")).toEqual([
      {
        Action: "s3:ListBucket",
        Effect: "Allow",
        Resource: getAtt(warehouse().dataBucket),
        Condition: { StringLike: { "s3:prefix": ["queue-spool/*"] } },
      },
      { Action: "s3:GetBucketLocation", Effect: "Allow", Resource: getAtt(warehouse().dataBucket) },
      {
        Action: ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:PutObject"],
        Effect: "Allow",
        Resource: objectsArn(warehouse().dataBucket, SPOOL_PREFIX),
      },
    ]);
    expect(onService(statements, "sqs").map((s) => s.Resource)).toEqual([getAtt(warehouse().queue)]);
  });
});

describe("alarms", () => {
  it("alarm on dead letters, consumer errors and a stuck queue", () => {
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      Namespace: "AWS/SQS",
      MetricName: "ApproximateNumberOfMessagesVisible",
      Dimensions: [{ Name: "QueueName", Value: getAtt(warehouse().deadLetterQueue, "QueueName") }],
      Statistic: "Maximum",
      Threshold: 1,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      Namespace: "AWS/Lambda",
      MetricName: "Errors",
      Dimensions: [{ Name: "FunctionName", Value: { Ref: id(warehouse().consumer.function) } }],
      Statistic: "Sum",
      Threshold: 1,
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "ApproximateAgeOfOldestMessage",
      Dimensions: [{ Name: "QueueName", Value: getAtt(warehouse().queue, "QueueName") }],
      Threshold: 900,
      EvaluationPeriods: 3,
    });
  });

  it("count records the proxies spooled or lost, from their logs, and alarm on a lost one", () => {
    for (const vendor of VENDORS) {
      for (const [metric, name] of [
        ["queue.lost", "RecordsLost"],
        ["queue.spooled", "RecordsSpooled"],
      ]) {
        template.hasResourceProperties("AWS::Logs::MetricFilter", {
          LogGroupName: { Ref: id(stack.proxies[vendor].fn.logGroup) },
          FilterPattern: `{ $.metric = "${metric}" }`,
          MetricTransformations: [Match.objectLike({ MetricName: name, MetricValue: "$.count" })],
        });
      }
    }
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "RecordsLost",
      Namespace: "dmt/Dmt",
      Statistic: "Sum",
      Threshold: 1,
    });
  });
});

describe("outputs", () => {
  it("publish the buckets, workgroup, database and queues", () => {
    template.hasOutput("WarehouseBucket", { Value: { Ref: id(warehouse().dataBucket) } });
    template.hasOutput("ExportBucket", { Value: { Ref: id(warehouse().exportBucket) } });
    template.hasOutput("AthenaWorkGroup", { Value: { Ref: stack.getLogicalId(warehouse().workGroup) } });
    template.hasOutput("WarehouseDatabase", { Value: { Ref: stack.getLogicalId(warehouse().database) } });
    template.hasOutput("RecordQueueUrl", { Value: { Ref: id(warehouse().queue) } });
    template.hasOutput("DeadLetterQueueUrl", { Value: { Ref: id(warehouse().deadLetterQueue) } });
  });
});

/** Every finding of the AwsSolutions pack, acknowledged or not. */
class AllFindings extends AwsSolutionsChecks {
  readonly found: { path: string; id: string }[] = [];

  protected override applyRule(params: IApplyRule): void {
    const ruleId = `${this.packName}-${params.ruleSuffixOverride ?? params.rule.name}`;
    const path = params.node.node.path;
    const result = params.rule(params.node);
    if (result === NagRuleCompliance.NON_COMPLIANT) this.found.push({ path, id: ruleId });
    else if (Array.isArray(result))
      for (const finding of result) this.found.push({ path, id: `${ruleId}[${finding}]` });
  }
}

function acknowledgements(scope: DmtStack) {
  const acknowledged: { path: string; id: string; reason: string }[] = [];
  for (const construct of scope.node.findAll()) {
    for (const entry of construct.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [ruleId, reason] of Object.entries(entry.data as Record<string, string>)) {
        acknowledged.push({ path: construct.node.path, id: ruleId.replace(/^annotation::/i, ""), reason });
      }
    }
  }
  return acknowledged;
}

const covers = (ack: { path: string; id: string }, finding: { path: string; id: string }) =>
  ack.id === finding.id && (finding.path === ack.path || finding.path.startsWith(`${ack.path}/`));

/** Findings left unacknowledged, and acknowledgements that match no finding. */
function nagGaps(scope: DmtStack) {
  const checks = new AllFindings();
  checks.validateScope(scope);
  const acknowledged = acknowledgements(scope);
  return {
    unacknowledged: checks.found.filter((f) => !acknowledged.some((ack) => covers(ack, f))),
    stale: acknowledged.filter((ack) => !checks.found.some((f) => covers(ack, f))),
    acknowledged,
  };
}

describe("cdk-nag AwsSolutions", () => {
  it("finds nothing unacknowledged, and each warehouse acknowledgement matches a finding and says why", () => {
    const { unacknowledged, stale, acknowledged } = nagGaps(stack);
    expect(unacknowledged).toEqual([]);
    expect(stale).toEqual([]);
    // One IAM5 per wildcard object grant, on the role of the function it lets in.
    const iam5 = (bucket: { node: { defaultChild?: unknown } }, prefix: string) =>
      `AwsSolutions-IAM5[Resource::<${id(bucket)}.Arn>/${prefix}*]`;
    const roleOf = (fn: { role?: { node: { path: string } } }) => fn.role?.node.path;
    const data = warehouse().dataBucket;
    const expected = [
      { path: roleOf(warehouse().consumer.function), id: iam5(data, INTERACTIONS_PREFIX) },
      { path: roleOf(warehouse().spoolResender.function), id: iam5(data, SPOOL_PREFIX) },
      { path: roleOf(stack.dataApi.function), id: iam5(data, INTERACTIONS_PREFIX) },
      { path: roleOf(stack.dataApi.function), id: iam5(warehouse().resultsBucket, "") },
      { path: roleOf(stack.dataApi.function), id: iam5(warehouse().exportBucket, "") },
      ...VENDORS.map((vendor) => ({
        path: roleOf(stack.proxies[vendor].fn.function),
        id: iam5(data, SPOOL_PREFIX),
      })),
    ];
    const found = acknowledged.map((ack) => ({ path: ack.path, id: ack.id }));
    expect(found).toEqual(expect.arrayContaining(expected));
    for (const ack of acknowledged) expect(ack.reason.length, ack.id).toBeGreaterThan(60);
  });
});

describe("configuration", () => {
  function variant(props: ConstructorParameters<typeof DmtStack>[2]) {
    const app = newApp(NO_BUNDLING);
    const variantStack = new DmtStack(app, "Dmt", props);
    return { app, stack: variantStack, template: Template.fromStack(variantStack) };
  }

  it("lets the data API export to the operator's buckets and deletions purge there, acknowledged one by one", () => {
    const {
      app,
      stack: variantStack,
      template: variantTemplate,
    } = variant({
      exportBuckets: ["acme-dmt-exports", "team-*-exports"],
    });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    const dataApiRole = variantStack.getLogicalId(
      variantStack.dataApi.function.role?.node.defaultChild as CfnResource,
    );
    const statements = Object.values(variantTemplate.findResources("AWS::IAM::Policy"))
      .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: dataApiRole }]))
      .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    for (const name of ["acme-dmt-exports", "team-*-exports"]) {
      const granting = statements.filter((s) =>
        [s.Resource].flat().some((r) => render(r) === `arn:{AWS::Partition}:s3:::${name}/*`),
      );
      expect(granting.map(actionsOf), name).toEqual([
        ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
      ]);
    }
    // A deletion purges the exports made there: the steps list, read and delete in those buckets.
    const stepsRole = variantStack.getLogicalId(
      variantStack.deletion.steps.function.role?.node.defaultChild as CfnResource,
    );
    const stepStatements = Object.values(variantTemplate.findResources("AWS::IAM::Policy"))
      .filter((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: stepsRole }]))
      .flatMap((p) => (p.Properties.PolicyDocument as { Statement: Statement[] }).Statement);
    for (const name of ["acme-dmt-exports", "team-*-exports"]) {
      const on = (resource: string) =>
        stepStatements.filter((s) => [s.Resource].flat().some((r) => render(r) === resource)).map(actionsOf);
      expect(on(`arn:{AWS::Partition}:s3:::${name}`), name).toEqual([["s3:ListBucket"]]);
      expect(on(`arn:{AWS::Partition}:s3:::${name}/*`), name).toEqual([["s3:DeleteObject", "s3:GetObject"]]);
    }
    const { unacknowledged, stale } = nagGaps(variantStack);
    expect(unacknowledged).toEqual([]);
    expect(stale).toEqual([]);
    expect(() => app.synth()).not.toThrow();
  });

  it("refuses export bucket names IAM could not mean, and a scan cutoff below 10 MB", () => {
    for (const name of ["Acme", "acme/prefix", "", "a".repeat(64), "arn:aws:s3:::x"]) {
      expect(() => variant({ exportBuckets: [name] }), name).toThrow(/Export bucket/);
    }
    expect(() => variant({ athenaBytesScannedCutoff: 1_000_000 })).toThrow(/at least 10 MB/);
    const { template: variantTemplate } = variant({ athenaBytesScannedCutoff: 50_000_000 });
    variantTemplate.hasResourceProperties("AWS::Athena::WorkGroup", {
      WorkGroupConfiguration: Match.objectLike({ BytesScannedCutoffPerQuery: 50_000_000 }),
    });
  });

  it("lets the buckets go with the stack when data is not retained", () => {
    const { template: variantTemplate } = variant({ retainData: false });
    const buckets = variantTemplate.findResources("AWS::S3::Bucket");
    // data, Athena results, exports, access logs, and the dashboard's site bucket
    expect(Object.keys(buckets)).toHaveLength(5);
    for (const bucket of Object.values(buckets)) expect(bucket.DeletionPolicy).toBe("Delete");
  });
});
