import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App, Validations } from "aws-cdk-lib";
import { Match, Template } from "aws-cdk-lib/assertions";
import { AttributeType, Table } from "aws-cdk-lib/aws-dynamodb";
import type { CloudAssembly } from "aws-cdk-lib/cx-api";
import { AwsSolutionsChecks, type IApplyRule, NagRuleCompliance } from "cdk-nag";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TABLES, type TableName } from "../../lambda/adapters/dynamodb/tables";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { errors } from "../../lambda/core/errors";
import { grantedContext, refusalContext } from "../../lambda/handlers/runtime/authorizer-context";
import { CONTEXT, defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import { PROXY_TABLE_ACCESS } from "../../lib/proxy";
import { VENDORS, type Vendor } from "../../lib/secrets";
import type { DmtStack } from "../../lib/stack";
import { RESERVED_CONCURRENCY, tableOutputKey } from "../../lib/stack";
import { BUNDLING_TIMEOUT_MS } from "../support/timeouts";

type Resources = Record<
  string,
  { Type: string; Properties: Record<string, unknown>; DeletionPolicy?: string }
>;

/** The feature flags `cdk synth` applies from cdk.json, so the tests see the template the CLI makes. */
const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const outdirs: string[] = [];

function synth(context: Record<string, unknown> = {}, bundle = true) {
  const outdir = mkdtempSync(join(tmpdir(), "dmt-cdk-"));
  outdirs.push(outdir);
  const app = new App({
    outdir,
    // Bundling is real in the main synth; variants skip it (`aws:cdk:bundling-stacks` is CDK's own switch).
    context: { ...CDK_JSON_CONTEXT, ...context, ...(bundle ? {} : { "aws:cdk:bundling-stacks": [] }) },
  });
  const stack = defineApp(app);
  return { app, stack, outdir };
}

let stack: DmtStack;
let assembly: CloudAssembly;
let template: Template;
let resources: Resources;

// Bundles every function with esbuild: minutes on a busy machine.
beforeAll(() => {
  const main = synth();
  stack = main.stack;
  // Throws if cdk-nag reports any finding that is not acknowledged.
  assembly = main.app.synth();
  const json = assembly.getStackByName(stack.stackName).template;
  template = Template.fromJSON(json);
  resources = json.Resources;
}, BUNDLING_TIMEOUT_MS);

afterAll(() => {
  for (const dir of outdirs) rmSync(dir, { recursive: true, force: true });
});

function ofType(type: string): [string, Resources[string]][] {
  return Object.entries(resources).filter(([, r]) => r.Type === type);
}

/** A method's integration, as the template holds it. */
const integrationOf = (method: Resources[string]) =>
  (method.Properties?.Integration ?? {}) as { Type?: string; IntegrationResponses?: unknown };

/** The origin secret and the function URLs exist with the default integration only: `undefined` fails here. */
function logicalId(construct: { node: { defaultChild?: unknown } } | undefined): string {
  if (construct === undefined) throw new Error("no such construct in this stack");
  return stack.getLogicalId(construct.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]);
}

function environmentOf(fn: { node: { defaultChild?: unknown } }): Record<string, unknown> {
  const props = resources[logicalId(fn)]?.Properties as {
    Environment?: { Variables?: Record<string, unknown> };
  };
  return props?.Environment?.Variables ?? {};
}

describe("store", () => {
  it("has exactly the tables of TABLES, with their keys, indexes and TTL", () => {
    expect(ofType("AWS::DynamoDB::Table")).toHaveLength(Object.keys(TABLES).length);
    for (const name of Object.keys(TABLES) as TableName[]) {
      const definition = TABLES[name];
      const table = resources[logicalId(stack.store.tables[name])];
      expect(table?.Type).toBe("AWS::DynamoDB::Table");
      const props = table?.Properties ?? {};
      expect(props.KeySchema).toEqual([
        { AttributeName: definition.partitionKey, KeyType: "HASH" },
        ...(definition.sortKey ? [{ AttributeName: definition.sortKey.name, KeyType: "RANGE" }] : []),
      ]);
      const indexes = (definition.indexes ?? []).map((index) => ({
        IndexName: index.name,
        KeySchema: [
          { AttributeName: index.partitionKey, KeyType: "HASH" },
          { AttributeName: index.sortKey.name, KeyType: "RANGE" },
        ],
        Projection: { ProjectionType: index.projection === "keys" ? "KEYS_ONLY" : "ALL" },
      }));
      expect(props.GlobalSecondaryIndexes ?? []).toEqual(indexes);
      if (definition.sortKey) {
        expect(props.AttributeDefinitions).toContainEqual({
          AttributeName: definition.sortKey.name,
          AttributeType: definition.sortKey.type,
        });
      }
      expect(props.TimeToLiveSpecification).toEqual(
        definition.ttlAttribute ? { AttributeName: definition.ttlAttribute, Enabled: true } : undefined,
      );
    }
  });

  it("gives the credits and the budget counters the holds' sparse KEYS_ONLY index and TTL", () => {
    for (const name of ["credits", "budgetCounters"] as const) {
      const props = resources[logicalId(stack.store.tables[name])]?.Properties ?? {};
      expect(props.TimeToLiveSpecification).toEqual({ AttributeName: "gcAt", Enabled: true });
      expect(props.GlobalSecondaryIndexes).toEqual([
        {
          IndexName: "holdsDue",
          KeySchema: [
            { AttributeName: "holdOwner", KeyType: "HASH" },
            { AttributeName: "due", KeyType: "RANGE" },
          ],
          Projection: { ProjectionType: "KEYS_ONLY" },
        },
      ]);
    }
  });

  it("bills on demand, keeps point-in-time recovery, encrypts with KMS and retains data by default", () => {
    for (const [, table] of ofType("AWS::DynamoDB::Table")) {
      expect(table.Properties).toMatchObject({
        BillingMode: "PAY_PER_REQUEST",
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        SSESpecification: { SSEEnabled: true },
        DeletionProtectionEnabled: true,
      });
      expect(table.DeletionPolicy).toBe("Retain");
    }
  });

  it("publishes every table name as a stack output (the CLI finds tables there)", () => {
    for (const name of Object.keys(TABLES) as TableName[]) {
      template.hasOutput(tableOutputKey(name), { Value: { Ref: logicalId(stack.store.tables[name]) } });
    }
  });
});

describe("Lambda functions", () => {
  it("all run Node 24 on ARM64 with source maps, logging to their own group with retention", () => {
    // CDK's own BucketDeployment function (Python, uploading the dashboard) is not one of ours.
    const functions = ofType("AWS::Lambda::Function").filter(
      ([id]) => !id.startsWith("CustomCDKBucketDeployment"),
    );
    expect(functions.length).toBeGreaterThanOrEqual(2);
    for (const [, fn] of functions) {
      const props = fn.Properties as {
        Runtime: string;
        Architectures: string[];
        Handler: string;
        Environment: { Variables: Record<string, unknown> };
        LoggingConfig: { LogGroup: { Ref: string } };
      };
      expect(props.Runtime).toBe("nodejs24.x");
      expect(props.Architectures).toEqual(["arm64"]);
      expect(props.Handler).toBe("index.handler");
      expect(props.Environment.Variables.NODE_OPTIONS).toBe("--enable-source-maps");
      const logGroup = resources[props.LoggingConfig.LogGroup.Ref];
      expect(logGroup?.Type).toBe("AWS::Logs::LogGroup");
      expect(logGroup?.Properties.RetentionInDays).toBe(30);
    }
  });

  it("have roles that may write only to their own log group (no AWS managed policy)", () => {
    for (const [, role] of ofType("AWS::IAM::Role")) {
      const service = JSON.stringify(role.Properties.AssumeRolePolicyDocument);
      if (service.includes("lambda.amazonaws.com")) expect(role.Properties.ManagedPolicyArns).toBeUndefined();
    }
  });

  it("are bundled by local esbuild: one minified ESM file and its source map per function", () => {
    for (const fn of [stack.authorizer, stack.dataApi, ...VENDORS.map((v) => stack.proxies[v].fn)]) {
      const code = resources[logicalId(fn.function)]?.Properties.Code as { S3Key: string };
      const dir = join(assembly.directory, `asset.${code.S3Key.replace(/\.zip$/, "")}`);
      const bundle = readFileSync(join(dir, "index.mjs"), "utf8");
      expect(bundle.startsWith("import{createRequire as __cr}from'node:module'")).toBe(true);
      expect(bundle).toMatch(/export\s*\{[^}]*as handler\s*\}/);
      // Minified: long lines, no indentation (a few template literals keep their line breaks).
      expect(bundle.length / bundle.split("\n").length).toBeGreaterThan(1000);
      expect(existsSync(join(dir, "index.mjs.map"))).toBe(true);
      // docs/aws.md "Bundle": 1.2 MB, of which the OpenTelemetry SDK's ~124 KB is evaluated only when on.
      expect(statSync(join(dir, "index.mjs")).size).toBeLessThan(1.2 * 1024 * 1024);
    }
  });

  it("give the authorizer the names of its two tables and exactly the DynamoDB access it needs", () => {
    const { Environment } = resources[logicalId(stack.authorizer.function)]?.Properties ?? {};
    const env = (Environment as { Variables: Record<string, unknown> }).Variables;
    expect(Object.keys(env).filter((name) => name.startsWith("DMT_TABLE_"))).toEqual([
      "DMT_TABLE_KEYS",
      "DMT_TABLE_PROJECTS",
    ]);
    for (const name of ["keys", "projects"] as const) {
      expect(env[`DMT_TABLE_${name.toUpperCase()}`]).toEqual({ Ref: logicalId(stack.store.tables[name]) });
    }
    expect(env.DMT_KEY_CACHE_MS).toBe("5000");

    const arn = (name: TableName) => ({ "Fn::GetAtt": [logicalId(stack.store.tables[name]), "Arn"] });
    const policies = ofType("AWS::IAM::Policy").filter(([, p]) =>
      JSON.stringify(p.Properties.Roles).includes(logicalId(stack.authorizer.function.role as never)),
    );
    const statements = policies.flatMap(
      ([, p]) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement,
    );
    const dynamo = statements.filter((s) => JSON.stringify(s.Action).includes("dynamodb:"));
    expect(dynamo).toEqual([
      { Action: "dynamodb:GetItem", Effect: "Allow", Resource: [arn("keys"), arn("projects")] },
      {
        Action: "dynamodb:UpdateItem",
        Effect: "Allow",
        Resource: arn("keys"),
        Condition: {
          "ForAllValues:StringEquals": { "dynamodb:Attributes": ["keyId", "lastUsedAt"] },
          StringEqualsIfExists: { "dynamodb:ReturnValues": ["NONE"] },
        },
      },
    ]);
  });
});

describe("API", () => {
  it("is a REGIONAL REST API passing bodies through as binary", () => {
    template.hasResourceProperties("AWS::ApiGateway::RestApi", {
      EndpointConfiguration: { Types: ["REGIONAL"] },
      BinaryMediaTypes: ["*/*"],
    });
  });

  it("runs a REQUEST authorizer on every request: no identity sources, no gateway cache", () => {
    const authorizers = ofType("AWS::ApiGateway::Authorizer");
    expect(authorizers).toHaveLength(1);
    const props = authorizers[0]?.[1].Properties ?? {};
    expect(props.Type).toBe("REQUEST");
    expect(props.AuthorizerResultTtlInSeconds).toBe(0);
    expect(props).not.toHaveProperty("IdentitySource");
    expect(JSON.stringify(props.AuthorizerUri)).toContain(logicalId(stack.authorizer.function));
    // Every method but the two API Gateway answers by itself without a key (GET / and GET /healthz),
    // the data API's public description (GET /api/v1/openapi.json) and Stripe's webhook (POST /stripe/webhook).
    const keyless = ofType("AWS::ApiGateway::Method").filter(
      ([, m]) => integrationOf(m).Type === "MOCK" || m.Properties?.AuthorizationType === "NONE",
    );
    expect(keyless).toHaveLength(4);
    // Stripe's webhook: its own function, its signature the credential (docs/billing.md).
    const stripeWebhook = ofType("AWS::ApiGateway::Resource").find(
      ([, r]) => r.Properties?.PathPart === "webhook",
    );
    const webhookMethods = keyless.filter(
      ([, m]) => JSON.stringify(m.Properties?.ResourceId) === JSON.stringify({ Ref: stripeWebhook?.[0] }),
    );
    expect(webhookMethods.map(([, m]) => [m.Properties?.HttpMethod, integrationOf(m).Type])).toEqual([
      ["POST", "AWS_PROXY"],
    ]);
    const description = ofType("AWS::ApiGateway::Resource").find(
      ([, r]) => r.Properties?.PathPart === "openapi.json",
    );
    const describing = keyless.filter(
      ([, m]) => JSON.stringify(m.Properties?.ResourceId) === JSON.stringify({ Ref: description?.[0] }),
    );
    expect(describing.map(([, m]) => [m.Properties?.HttpMethod, integrationOf(m).Type])).toEqual([
      ["GET", "AWS_PROXY"],
    ]);
    for (const [, method] of ofType("AWS::ApiGateway::Method")) {
      if (keyless.some(([, m]) => m === method)) continue;
      expect(method.Properties).toMatchObject({
        AuthorizationType: "CUSTOM",
        AuthorizerId: { Ref: authorizers[0]?.[0] },
      });
    }
  });

  it("answers GET / with a redirect to the dashboard and GET /healthz with ok, by itself, without a key", () => {
    const methods = ofType("AWS::ApiGateway::Method").filter(([, m]) => integrationOf(m).Type === "MOCK");
    const restApi = ofType("AWS::ApiGateway::RestApi")[0]?.[0];
    const healthz = ofType("AWS::ApiGateway::Resource").find(([, r]) => r.Properties?.PathPart === "healthz");
    expect(healthz?.[1].Properties?.ParentId).toEqual({ "Fn::GetAtt": [restApi, "RootResourceId"] });
    const root = methods.find(([, m]) => JSON.stringify(m.Properties?.ResourceId).includes("RootResourceId"));
    const health = methods.find(
      ([, m]) => JSON.stringify(m.Properties?.ResourceId) === JSON.stringify({ Ref: healthz?.[0] }),
    );
    const security = Object.fromEntries(
      Object.entries(SECURITY_HEADERS).map(([name, value]) => [
        `method.response.header.${name}`,
        `'${value}'`,
      ]),
    );
    expect(root?.[1].Properties).toMatchObject({
      HttpMethod: "GET",
      AuthorizationType: "NONE",
      Integration: {
        IntegrationResponses: [
          {
            StatusCode: "302",
            ResponseParameters: {
              ...security,
              "method.response.header.Cache-Control": "'no-store'",
              // The dashboard's CloudFront address, resolved at deploy time.
              "method.response.header.Location": {
                "Fn::Join": [
                  "",
                  [
                    "'https://",
                    { "Fn::GetAtt": [logicalId(stack.dashboard.distribution), "DomainName"] },
                    "/dashboard/'",
                  ],
                ],
              },
            },
          },
        ],
      },
    });
    expect(health?.[1].Properties).toMatchObject({
      HttpMethod: "GET",
      AuthorizationType: "NONE",
      Integration: {
        IntegrationResponses: [
          {
            StatusCode: "200",
            ResponseParameters: { ...security, "method.response.header.Content-Type": "'application/json'" },
            ResponseTemplates: { "application/json": '{"status":"ok"}' },
          },
        ],
      },
    });
  });

  it("streams /api/v1/{proxy+} from the data API function for up to 15 minutes, as long as the function runs", () => {
    template.hasResourceProperties("AWS::ApiGateway::Resource", { PathPart: "{proxy+}" });
    template.hasResourceProperties("AWS::ApiGateway::Method", {
      HttpMethod: "ANY",
      AuthorizationType: "CUSTOM",
      Integration: {
        Type: "AWS_PROXY",
        ResponseTransferMode: "STREAM",
        TimeoutInMillis: 900_000,
        Uri: {
          "Fn::Join": [
            "",
            Match.arrayWith([
              { "Fn::GetAtt": [logicalId(stack.dataApi.function), "Arn"] },
              "/response-streaming-invocations",
            ]),
          ],
        },
      },
    });
    const fn = resources[logicalId(stack.dataApi.function)]?.Properties as { Timeout: number };
    expect(fn.Timeout).toBe(900);
  });

  it("logs access as JSON without query strings or headers, with metrics and throttling", () => {
    const stages = ofType("AWS::ApiGateway::Stage");
    expect(stages).toHaveLength(1);
    const props = stages[0]?.[1].Properties as {
      AccessLogSetting: { Format: string; DestinationArn: unknown };
      MethodSettings: Record<string, unknown>[];
    };
    const format = JSON.parse(props.AccessLogSetting.Format) as Record<string, string>;
    expect(format).toMatchObject({ path: "$context.path", status: "$context.status" });
    expect(props.AccessLogSetting.Format).not.toMatch(/querystring|\$input|header|requestOverride/i);
    expect(JSON.stringify(props.AccessLogSetting.DestinationArn)).toContain(logicalId(stack.api.accessLogs));
    expect(props.MethodSettings).toEqual([
      {
        HttpMethod: "*",
        ResourcePath: "/*",
        MetricsEnabled: true,
        LoggingLevel: "ERROR",
        DataTraceEnabled: false,
        ThrottlingRateLimit: 1000,
        ThrottlingBurstLimit: 2000,
      },
    ]);
  });

  it("publishes its URL once", () => {
    template.hasOutput("ApiUrl", {});
    expect(Object.keys(assembly.getStackByName(stack.stackName).template.Outputs)).not.toContainEqual(
      expect.stringMatching(/Endpoint/),
    );
  });
});

describe("proxy functions", () => {
  interface MethodProps {
    AuthorizationType: string;
    HttpMethod: string;
    RequestParameters?: Record<string, boolean>;
    Integration: {
      Type: string;
      IntegrationHttpMethod: string;
      ResponseTransferMode: string;
      TimeoutInMillis: number;
      Uri: unknown;
      RequestParameters: Record<string, unknown>;
    };
  }

  function methodOf(vendor: Vendor, below: boolean, on: DmtStack = stack, all = resources): MethodProps {
    const prefix = on.api.restApi.root.getResource(vendor);
    const method = (below ? prefix?.getResource("{proxy+}") : prefix)?.node.tryFindChild("ANY");
    if (!method) throw new Error(`no ANY method on /${vendor}${below ? "/{proxy+}" : ""}`);
    return all[on.getLogicalId(method.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0])]
      ?.Properties as unknown as MethodProps;
  }

  const functionUrl = (vendor: Vendor) => ({
    "Fn::GetAtt": [logicalId(stack.proxies[vendor].url), "FunctionUrl"],
  });
  const originHeader = (versionId = "") => ({
    "Fn::Join": [
      "",
      [
        "'{{resolve:secretsmanager:",
        { Ref: logicalId(stack.secrets.originSecret) },
        `:SecretString:::${versionId}}}'`,
      ],
    ],
  });

  // The authorizer's context fields and their headers, written out here independently of lib/api.ts.
  const CONTEXT_HEADERS: Record<string, string> = {
    projectId: "x-dmt-auth-project-id",
    keyId: "x-dmt-auth-key-id",
    keyName: "x-dmt-auth-key-name",
    tier: "x-dmt-auth-tier",
    rpm: "x-dmt-auth-rpm",
    burst: "x-dmt-auth-burst",
    store: "x-dmt-auth-store",
    models: "x-dmt-auth-models",
    tpm: "x-dmt-auth-tpm",
    errorStatus: "x-dmt-auth-error-status",
    errorType: "x-dmt-auth-error-type",
    errorCode: "x-dmt-auth-error-code",
    errorMessage: "x-dmt-auth-error-message",
  };

  it("run one function per vendor for 15 minutes, behind a streaming function URL without IAM auth", () => {
    for (const vendor of VENDORS) {
      const fnId = logicalId(stack.proxies[vendor].fn.function);
      const fn = resources[fnId]?.Properties as {
        Timeout: number;
        Environment: { Variables: Record<string, unknown> };
        ReservedConcurrentExecutions?: number;
      };
      expect(fn.Timeout).toBe(900);
      expect(fn.Environment.Variables).toMatchObject({
        DMT_VENDORS: vendor,
        [`DMT_VENDOR_KEY_SECRET_ARN_${vendor.toUpperCase()}`]: {
          Ref: logicalId(stack.secrets.vendorKeys[vendor]),
        },
        DMT_ORIGIN_SECRET_ARN: { Ref: logicalId(stack.secrets.originSecret) },
      });
      expect(fn.ReservedConcurrentExecutions).toBe(RESERVED_CONCURRENCY.proxy);
      expect(resources[logicalId(stack.proxies[vendor].url)]).toEqual({
        Type: "AWS::Lambda::Url",
        Properties: {
          AuthType: "NONE",
          InvokeMode: "RESPONSE_STREAM",
          TargetFunctionArn: { "Fn::GetAtt": [fnId, "Arn"] },
        },
      });
    }
  });

  it("stream /{vendor} and /{vendor}/{proxy+} over HTTP_PROXY to the vendor's URL, for up to 15 minutes", () => {
    for (const vendor of VENDORS) {
      for (const [below, path] of [
        [false, vendor],
        [true, `${vendor}/{proxy}`],
      ] as const) {
        const method = methodOf(vendor, below);
        expect(method.HttpMethod).toBe("ANY");
        expect(method.AuthorizationType).toBe("CUSTOM");
        expect(method.Integration).toMatchObject({
          Type: "HTTP_PROXY",
          IntegrationHttpMethod: "ANY",
          ResponseTransferMode: "STREAM",
          TimeoutInMillis: 900_000,
          Uri: { "Fn::Join": ["", [functionUrl(vendor), path]] },
        });
      }
      expect(methodOf(vendor, true).RequestParameters).toEqual({ "method.request.path.proxy": true });
      expect(methodOf(vendor, true).Integration.RequestParameters["integration.request.path.proxy"]).toBe(
        "method.request.path.proxy",
      );
    }
  });

  it("send the origin secret and every field of the authorizer's context in request headers", () => {
    // Every field the authorizer can put in its context, granted or refused, has its header.
    const sample = {
      projectId: "acme",
      keyId: "k1",
      tier: "pro" as const,
      rateLimit: { rpm: 1, burst: 1 },
      store: "full" as const,
    };
    const emitted = [
      ...Object.keys(grantedContext(sample)),
      ...Object.keys(refusalContext(errors.internal())),
    ];
    expect(emitted.sort()).toEqual(Object.keys(CONTEXT_HEADERS).sort());
    const expected = {
      "integration.request.header.x-dmt-origin-secret": originHeader(),
      ...Object.fromEntries(
        Object.entries(CONTEXT_HEADERS).map(([field, header]) => [
          `integration.request.header.${header}`,
          `context.authorizer.${field}`,
        ]),
      ),
    };
    for (const vendor of VENDORS) {
      expect(methodOf(vendor, false).Integration.RequestParameters).toEqual(expected);
      expect(methodOf(vendor, true).Integration.RequestParameters).toEqual({
        ...expected,
        "integration.request.path.proxy": "method.request.path.proxy",
      });
    }
  });

  it("may read their own vendor's key, the origin secret, the tables metering uses, and decrypt BYOK keys", () => {
    const arn = (name: TableName) => ({ "Fn::GetAtt": [logicalId(stack.store.tables[name]), "Arn"] });
    for (const vendor of VENDORS) {
      const role = logicalId(stack.proxies[vendor].fn.function.role as never);
      const statements = ofType("AWS::IAM::Policy")
        .filter(([, p]) => JSON.stringify(p.Properties.Roles).includes(role))
        .flatMap(
          ([, p]) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement,
        );
      const all = statements.filter((s) => !JSON.stringify(s.Action).includes("logs:"));
      // Queries (budget definitions, alert rules, the holds' index, the webhooks) are checked apart: CDK
      // merges them.
      const queries = JSON.stringify(all.filter((s) => JSON.stringify(s.Action).includes("dynamodb:Query")));
      for (const table of ["budgets", "alertRules", "credits", "budgetCounters", "webhooks"] as const) {
        expect(queries).toContain(logicalId(stack.store.tables[table]));
      }
      expect(queries).toContain("/index/holdsDue");
      const others = all.filter((s) => !JSON.stringify(s.Action).includes("dynamodb:Query"));
      expect(others).toEqual([
        {
          Action: ["secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"],
          Effect: "Allow",
          Resource: [
            { Ref: logicalId(stack.secrets.originSecret) },
            { Ref: logicalId(stack.secrets.userIdKey) },
            { Ref: logicalId(stack.secrets.vendorKeys[vendor]) },
          ],
        },
        {
          Action: "dynamodb:GetItem",
          Effect: "Allow",
          // The key, its project, its BYOK vendor keys and its price plan.
          Resource: [arn("keys"), arn("plans"), arn("projects"), arn("vendorKeys")],
        },
        // Balances and budget windows with their hold items (taken, noted, deleted once resolved), and
        // idempotency records.
        {
          Action: ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
          Effect: "Allow",
          Resource: [arn("budgetCounters"), arn("credits"), arn("idempotency")],
        },
        { Action: ["dynamodb:GetItem", "dynamodb:PutItem"], Effect: "Allow", Resource: arn("ledger") },
        // Rate-limit buckets.
        { Action: ["dynamodb:GetItem", "dynamodb:UpdateItem"], Effect: "Allow", Resource: arn("rateLimits") },
        {
          Action: "kms:Decrypt",
          Effect: "Allow",
          Resource: { "Fn::GetAtt": [logicalId(stack.secrets.byokKey), "Arn"] },
        },
        // The warehouse producer: records to the queue, what it refuses to the spool.
        {
          Action: ["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
          Effect: "Allow",
          Resource: { "Fn::GetAtt": [logicalId(stack.warehouse.queue), "Arn"] },
        },
        {
          Action: "s3:PutObject",
          Effect: "Allow",
          Resource: {
            "Fn::Join": [
              "",
              [{ "Fn::GetAtt": [logicalId(stack.warehouse.dataBucket), "Arn"] }, "/queue-spool/*"],
            ],
          },
        },
        // Its events (usage, balance and budget alerts), on the stack's bus only.
        {
          Action: "events:PutEvents",
          Effect: "Allow",
          Resource: { "Fn::GetAtt": [logicalId(stack.events.bus), "Arn"] },
        },
      ]);
    }
  });

  it("are configured for metering: the BYOK key, the tables metering uses, and the stack's metrics namespace", () => {
    const used = Object.keys(PROXY_TABLE_ACCESS) as TableName[];
    for (const vendor of VENDORS) {
      const variables = environmentOf(stack.proxies[vendor].fn.function);
      expect(variables.DMT_BYOK_KEY_ARN).toEqual({ "Fn::GetAtt": [logicalId(stack.secrets.byokKey), "Arn"] });
      expect(variables.DMT_METRICS_NAMESPACE).toBe(`dmt/${stack.stackName}`);
      expect(
        Object.keys(variables)
          .filter((name) => name.startsWith("DMT_TABLE_"))
          .sort(),
      ).toEqual(used.map((name) => `DMT_TABLE_${name.toUpperCase()}`).sort());
      for (const name of used) {
        expect(variables[`DMT_TABLE_${name.toUpperCase()}`]).toEqual({
          Ref: logicalId(stack.store.tables[name]),
        });
      }
    }
  });

  it("publish the origin secret's ARN (for rotations)", () => {
    template.hasOutput("OriginSecretArn", { Value: { Ref: logicalId(stack.secrets.originSecret) } });
  });

  const reservedConcurrency = (context: Record<string, unknown>) => {
    const variant = synth(context, false);
    const json = variant.app.synth().getStackByName(variant.stack.stackName).template;
    return Object.fromEntries(
      VENDORS.map((vendor) => [
        vendor,
        json.Resources[
          variant.stack.getLogicalId(
            variant.stack.proxies[vendor].fn.function.node.defaultChild as Parameters<
              DmtStack["getLogicalId"]
            >[0],
          )
        ].Properties.ReservedConcurrentExecutions,
      ]),
    );
  };

  it("reserve concurrency from context: one number for each, or per vendor", () => {
    expect(reservedConcurrency({ [CONTEXT.proxyReservedConcurrency]: "25" })).toEqual({
      groq: 25,
      openai: 25,
      anthropic: 25,
      gemini: 25,
    });
    expect(reservedConcurrency({ [CONTEXT.proxyReservedConcurrency]: '{"openai":100,"gemini":0}' })).toEqual({
      groq: RESERVED_CONCURRENCY.proxy,
      openai: 100,
      anthropic: RESERVED_CONCURRENCY.proxy,
      gemini: 0,
    });
    expect(() => synth({ [CONTEXT.proxyReservedConcurrency]: "-1" }, false)).toThrow(/whole number/);
    expect(() => synth({ [CONTEXT.proxyReservedConcurrency]: "many" }, false)).toThrow(/"many" is not/);
    expect(() => synth({ [CONTEXT.proxyReservedConcurrency]: '{"mistral":5}' }, false)).toThrow(/mistral/);
  });

  it("send a rotated origin secret version to every integration, and redeploy the API for it", () => {
    const deploymentOf = (json: { Resources: Resources }) =>
      Object.entries(json.Resources).find(([, r]) => r.Type === "AWS::ApiGateway::Deployment")?.[0];
    const rotated = synth({ [CONTEXT.originSecretVersion]: "0b7c9e1a-rotated" }, false);
    const json = rotated.app.synth().getStackByName(rotated.stack.stackName).template;
    for (const vendor of VENDORS) {
      for (const below of [false, true]) {
        expect(
          methodOf(vendor, below, rotated.stack, json.Resources).Integration.RequestParameters[
            "integration.request.header.x-dmt-origin-secret"
          ],
        ).toEqual(originHeader("0b7c9e1a-rotated"));
      }
    }
    expect(deploymentOf(json)).toBeDefined();
    expect(deploymentOf(json)).not.toBe(deploymentOf({ Resources: resources }));
  });
});

describe("metering", () => {
  const policyOf = (role: string) =>
    ofType("AWS::IAM::Policy")
      .filter(([, p]) => JSON.stringify(p.Properties.Roles).includes(role))
      .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement)
      .filter((statement) => !JSON.stringify(statement.Action).includes("logs:"));
  const arn = (name: TableName) => ({ "Fn::GetAtt": [logicalId(stack.store.tables[name]), "Arn"] });

  it("sweeps expired credit holds every minute, with access to the credits and the ledger only", () => {
    const sweeper = stack.metering.sweeper.function;
    const fn = resources[logicalId(sweeper)];
    expect(fn?.Properties.Handler).toBe("index.handler");
    template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "rate(1 minute)",
      State: "ENABLED",
      Targets: [
        Match.objectLike({
          Arn: { "Fn::GetAtt": [logicalId(sweeper), "Arn"] },
          RetryPolicy: { MaximumRetryAttempts: 0 },
        }),
      ],
    });
    const policy = policyOf(logicalId(sweeper.role as never));
    // Expired holds, credit and budget-window alike, found through the holds' index: never a Scan. The
    // one Scan is auto-recharge's read of the recharge rules, on the payments table (docs/billing.md).
    const scans = policy.filter((s) => JSON.stringify(s.Action).includes("dynamodb:Scan"));
    expect(scans.map((s) => s.Resource)).toEqual([arn("payments")]);
    expect(policy).toContainEqual({
      Action: ["dynamodb:DeleteItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
      Effect: "Allow",
      Resource: [arn("budgetCounters"), arn("credits")],
    });
    const queries = JSON.stringify(policy.filter((s) => JSON.stringify(s.Action).includes("dynamodb:Query")));
    expect(queries).toContain("/index/holdsDue");
    expect(queries).toContain(logicalId(stack.store.tables.credits));
    expect(queries).toContain(logicalId(stack.store.tables.budgetCounters));
    expect(policy).toContainEqual({
      Action: ["dynamodb:GetItem", "dynamodb:PutItem"],
      Effect: "Allow",
      Resource: arn("ledger"),
    });
    const alarm = stack.node.findChild("Metering").node.findChild("SweeperFailing");
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "Errors",
      Dimensions: [{ Name: "FunctionName", Value: { Ref: logicalId(sweeper) } }],
      EvaluationPeriods: 3,
    });
    expect(stack.observability.alarms.map((a) => a.node.path)).toContain(alarm.node.path);
  });

  it("lets the Stripe webhook and the sweeper re-check a project's low-balance alert after a grant", () => {
    // Read the rules, fire or re-arm one with a conditional update; never write or delete a rule.
    for (const fn of [stack.payments.webhook.function, stack.metering.sweeper.function]) {
      const onRules = policyOf(logicalId(fn.role as never)).filter((s) =>
        JSON.stringify(s.Resource).includes(logicalId(stack.store.tables.alertRules)),
      );
      const actions = onRules.flatMap((s) => [s.Action].flat());
      expect(actions).toContain("dynamodb:Query");
      expect(actions).toContain("dynamodb:UpdateItem");
      expect(actions).not.toContain("dynamodb:PutItem");
      expect(actions).not.toContain("dynamodb:DeleteItem");
    }
  });

  it("rate-limits the data API with the proxies' buckets", () => {
    const dataApi = stack.dataApi.function;
    const variables = environmentOf(dataApi);
    expect(variables.DMT_TABLE_RATELIMITS).toEqual({ Ref: logicalId(stack.store.tables.rateLimits) });
    expect(policyOf(logicalId(dataApi.role as never))).toContainEqual({
      Action: ["dynamodb:GetItem", "dynamodb:UpdateItem"],
      Effect: "Allow",
      Resource: arn("rateLimits"),
    });
  });
});

describe("privacy", () => {
  const policyOf = (role: string) =>
    ofType("AWS::IAM::Policy")
      .filter(([, p]) => JSON.stringify(p.Properties.Roles).includes(role))
      .flatMap(([, p]) => (p.Properties.PolicyDocument as { Statement: Record<string, unknown>[] }).Statement)
      .filter((statement) => !JSON.stringify(statement.Action).includes("logs:"));

  it("runs retention every day, on the warehouse bucket and the projects and interactions tables only", () => {
    const fn = stack.retention.fn.function;
    template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "cron(15 3 * * ? *)",
      Targets: [Match.objectLike({ Arn: { "Fn::GetAtt": [logicalId(fn), "Arn"] } })],
    });
    expect(environmentOf(fn).DMT_WAREHOUSE_BUCKET).toEqual({ Ref: logicalId(stack.warehouse.dataBucket) });
    const tables = policyOf(logicalId(fn.role as never))
      .map((statement) => JSON.stringify(statement.Resource))
      .filter((resource) => resource.includes("Table"));
    expect(
      tables.every(
        (r) =>
          r.includes(logicalId(stack.store.tables.projects)) ||
          r.includes(logicalId(stack.store.tables.interactions)),
      ),
    ).toBe(true);
  });

  it("compacts the warehouse every day, under leases, committing in the delivery ledger what it merges", () => {
    const fn = stack.compaction.fn.function;
    template.hasResourceProperties("AWS::Events::Rule", {
      ScheduleExpression: "cron(45 0 * * ? *)",
      Targets: [Match.objectLike({ Arn: { "Fn::GetAtt": [logicalId(fn), "Arn"] } })],
    });
    expect(resources[logicalId(fn)]?.Properties).toMatchObject({ Timeout: 900, MemorySize: 4096 });
    expect(environmentOf(fn).DMT_WAREHOUSE_BUCKET).toEqual({ Ref: logicalId(stack.warehouse.dataBucket) });
    const statements = policyOf(logicalId(fn.role as never));
    const onTable = (table: { node: unknown }) =>
      statements
        .filter((s) => JSON.stringify(s.Resource).includes(logicalId(table as never)))
        .flatMap((s) => [s.Action].flat())
        .sort();
    expect(onTable(stack.store.tables.warehouseLeases)).toEqual([
      "dynamodb:DeleteItem",
      "dynamodb:UpdateItem",
    ]);
    expect(onTable(stack.store.tables.warehouseDeliveries)).toEqual(["dynamodb:PutItem"]);
    expect(onTable(stack.store.tables.deletionTombstones)).toEqual(["dynamodb:Query"]);
    expect(onTable(stack.store.tables.interactions)).toEqual([]);
    // Objects under interactions/ only.
    const objects = statements.filter((s) => JSON.stringify(s.Action).includes("s3:DeleteObject"));
    expect(JSON.stringify(objects.map((s) => s.Resource))).toContain("/interactions/*");
    expect(JSON.stringify(objects.map((s) => s.Resource))).not.toContain("retention-");
  });

  it("generates the user-id hashing key, read by the proxy functions and the deletion steps", () => {
    const key = logicalId(stack.secrets.userIdKey);
    expect(resources[key]?.Properties.GenerateSecretString).toMatchObject({ PasswordLength: 64 });
    for (const fn of [stack.proxies.openai.fn.function, stack.deletion.steps.function]) {
      expect(environmentOf(fn).DMT_USER_ID_KEY_SECRET_ARN).toEqual({ Ref: key });
    }
  });
});

describe("gateway responses", () => {
  const responses = () =>
    new Map(
      ofType("AWS::ApiGateway::GatewayResponse").map(([, r]) => [
        r.Properties.ResponseType as string,
        r.Properties as {
          StatusCode?: string;
          ResponseParameters: Record<string, string>;
          ResponseTemplates: Record<string, string>;
        },
      ]),
    );

  // DESIGN §7, written out here independently of lib/gateway-responses.ts.
  const expected: Record<string, [string | undefined, string, string]> = {
    UNAUTHORIZED: ["401", "authentication_error", "invalid_api_key"],
    MISSING_AUTHENTICATION_TOKEN: ["404", "not_found_error", "not_found"],
    RESOURCE_NOT_FOUND: ["404", "not_found_error", "not_found"],
    THROTTLED: ["429", "rate_limit_error", "rate_limit_exceeded"],
    REQUEST_TOO_LARGE: ["413", "invalid_request_error", "payload_too_large"],
    AUTHORIZER_FAILURE: ["500", "api_error", "internal_error"],
    AUTHORIZER_CONFIGURATION_ERROR: ["500", "api_error", "internal_error"],
    INTEGRATION_FAILURE: ["502", "upstream_error", "upstream_unreachable"],
    INTEGRATION_TIMEOUT: ["504", "upstream_error", "upstream_timeout"],
    DEFAULT_5XX: [undefined, "api_error", "internal_error"],
  };

  it("answer in the service's error shape with the right status, type and code", () => {
    const all = responses();
    for (const [type, [status, errorType, code]] of Object.entries(expected)) {
      const response = all.get(type);
      expect(response, type).toBeDefined();
      expect(response?.StatusCode, type).toBe(status);
      const body = JSON.parse(response?.ResponseTemplates["application/json"] ?? "");
      expect(body, type).toEqual({ error: { message: expect.any(String), type: errorType, code } });
      expect(body.error.message.length, type).toBeGreaterThan(10);
    }
    expect(all.get("THROTTLED")?.ResponseParameters["gatewayresponse.header.Retry-After"]).toBe("'1'");
  });

  it("render the authorizer's 401 from its context, and other 4xx from the gateway's message", () => {
    const all = responses();
    const denied = all.get("ACCESS_DENIED");
    expect(denied?.StatusCode).toBe("401");
    const context = {
      errorType: "authentication_error",
      errorCode: "missing_api_key",
      errorMessage: "No key.",
    };
    const rendered = denied?.ResponseTemplates["application/json"]?.replace(
      /\$context\.authorizer\.(\w+)/g,
      (_, name: keyof typeof context) => context[name],
    );
    expect(JSON.parse(rendered ?? "")).toEqual({
      error: { message: "No key.", type: "authentication_error", code: "missing_api_key" },
    });

    const fallback = all.get("DEFAULT_4XX");
    expect(fallback?.StatusCode).toBeUndefined();
    const body = fallback?.ResponseTemplates["application/json"]?.replace(
      "$context.error.messageString",
      JSON.stringify('Invalid "thing"'),
    );
    expect(JSON.parse(body ?? "")).toEqual({
      error: { message: 'Invalid "thing"', type: "invalid_request_error", code: "invalid_request" },
    });
  });

  it("all carry the four security headers and a JSON content type", () => {
    const all = responses();
    expect(all.size).toBe(Object.keys(expected).length + 2);
    for (const [type, response] of all) {
      for (const [name, value] of Object.entries({
        "Content-Type": "application/json",
        ...SECURITY_HEADERS,
      })) {
        expect(response.ResponseParameters[`gatewayresponse.header.${name}`], `${type} ${name}`).toBe(
          `'${value}'`,
        );
      }
    }
  });
});

describe("secrets", () => {
  it("creates one empty secret per vendor, its ARN in the outputs", () => {
    for (const vendor of VENDORS) {
      const id = logicalId(stack.secrets.vendorKeys[vendor]);
      const props = resources[id]?.Properties ?? {};
      expect(resources[id]?.Type).toBe("AWS::SecretsManager::Secret");
      expect(props).not.toHaveProperty("SecretString");
      expect(props).not.toHaveProperty("GenerateSecretString");
      const outputs = assembly.getStackByName(stack.stackName).template.Outputs as Record<
        string,
        { Value: unknown }
      >;
      expect(Object.values(outputs).map((o) => o.Value)).toContainEqual({ Ref: id });
    }
  });

  it("generates the origin secret as a plain header value, and a rotating KMS key for BYOK", () => {
    expect(resources[logicalId(stack.secrets.originSecret)]?.Properties.GenerateSecretString).toEqual({
      ExcludePunctuation: true,
      PasswordLength: 48,
    });
    expect(resources[logicalId(stack.secrets.byokKey)]).toMatchObject({
      Type: "AWS::KMS::Key",
      Properties: { EnableKeyRotation: true },
      DeletionPolicy: "Retain",
    });
  });
});

describe("observability", () => {
  it("alarms on the API's 5xx rate and on throttles, and draws a dashboard", () => {
    template.hasResourceProperties("AWS::CloudWatch::Alarm", {
      MetricName: "5XXError",
      Namespace: "AWS/ApiGateway",
      Statistic: "Average",
      Threshold: 0.05,
      ComparisonOperator: "GreaterThanOrEqualToThreshold",
    });
    template.hasResourceProperties("AWS::Logs::MetricFilter", {
      FilterPattern: '{ $.responseType = "THROTTLED" }',
      LogGroupName: { Ref: logicalId(stack.api.accessLogs) },
      MetricTransformations: [Match.objectLike({ MetricName: "ApiThrottled", MetricValue: "1" })],
    });
    template.hasResourceProperties("AWS::CloudWatch::Alarm", { MetricName: "ApiThrottled", Threshold: 1 });
    for (const fn of [stack.authorizer, stack.dataApi, ...VENDORS.map((v) => stack.proxies[v].fn)]) {
      template.hasResourceProperties("AWS::CloudWatch::Alarm", {
        MetricName: "Throttles",
        Namespace: "AWS/Lambda",
        Dimensions: [{ Name: "FunctionName", Value: { Ref: logicalId(fn.function) } }],
      });
    }
    template.resourceCountIs("AWS::CloudWatch::Dashboard", 1);
  });

  it("has the secrets and alarms the cost table prices (README.md, docs/aws.md)", () => {
    const table = readFileSync(join(REPO_ROOT, "docs/aws.md"), "utf8");
    const count = (type: string) => Object.values(resources).filter((r) => r.Type === type).length;
    const words = ["six", "seven", "eight", "nine", "ten", "eleven", "twelve"];
    const secrets = /\| (\w+) secrets \(/.exec(table)?.[1];
    expect(words.indexOf(secrets ?? "") + 6).toBe(count("AWS::SecretsManager::Secret"));
    const alarms = Object.values(resources).filter((r) => r.Type === "AWS::CloudWatch::Alarm");
    const metrics = alarms.reduce((sum, alarm) => {
      const queries = (alarm.Properties as { Metrics?: { MetricStat?: unknown }[] }).Metrics;
      return sum + (queries ? queries.filter((q) => q.MetricStat).length : 1);
    }, 0);
    const priced = /\| (\d+) CloudWatch alarms on (\d+) metrics\s+\|/.exec(table);
    expect([Number(priced?.[1]), Number(priced?.[2])]).toEqual([alarms.length, metrics]);
  });
});

/** Every finding of the AwsSolutions pack, acknowledged or not. */
class AllFindings extends AwsSolutionsChecks {
  readonly found: { path: string; id: string }[] = [];

  protected override applyRule(params: IApplyRule): void {
    const id = `${this.packName}-${params.ruleSuffixOverride ?? params.rule.name}`;
    const path = params.node.node.path;
    const result = params.rule(params.node);
    if (result === NagRuleCompliance.NON_COMPLIANT) this.found.push({ path, id });
    else if (Array.isArray(result))
      for (const finding of result) this.found.push({ path, id: `${id}[${finding}]` });
  }
}

describe("cdk-nag AwsSolutions", () => {
  it("leaves no finding unacknowledged, and every acknowledgement matches a finding and says why", () => {
    const acknowledged: { path: string; id: string; reason: string }[] = [];
    for (const construct of stack.node.findAll()) {
      for (const entry of construct.node.metadata) {
        if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
        for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
          acknowledged.push({ path: construct.node.path, id: id.replace(/^annotation::/i, ""), reason });
        }
      }
    }
    const checks = new AllFindings();
    checks.validateScope(stack);
    const covers = (ack: { path: string; id: string }, finding: { path: string; id: string }) =>
      ack.id === finding.id && (finding.path === ack.path || finding.path.startsWith(`${ack.path}/`));

    for (const finding of checks.found) {
      expect(
        acknowledged.some((ack) => covers(ack, finding)),
        `${finding.id} at ${finding.path}`,
      ).toBe(true);
    }
    for (const ack of acknowledged) {
      expect(
        checks.found.some((finding) => covers(ack, finding)),
        `stale: ${ack.id} at ${ack.path}`,
      ).toBe(true);
      expect(ack.reason.length, ack.id).toBeGreaterThan(60);
    }
    expect(acknowledged.length).toBeGreaterThan(0);
  });

  it("fails synthesis on a finding nobody acknowledged", () => {
    const variant = synth({}, false);
    new Table(variant.stack, "Unprotected", { partitionKey: { name: "id", type: AttributeType.STRING } });
    expect(() => variant.app.synth()).toThrow(/AwsSolutions-DDB3/);
  });
});

describe("context", () => {
  it("adds a custom domain with its certificate, and can let data go with the stack", () => {
    const variant = synth(
      {
        [CONTEXT.domainName]: "api.example.com",
        [CONTEXT.certificateArn]: "arn:aws:acm:eu-west-1:123456789012:certificate/abc",
        [CONTEXT.retainData]: "false",
      },
      false,
    );
    const variantTemplate = Template.fromStack(variant.stack);
    variantTemplate.hasResourceProperties("AWS::ApiGateway::DomainName", {
      DomainName: "api.example.com",
      RegionalCertificateArn: "arn:aws:acm:eu-west-1:123456789012:certificate/abc",
      EndpointConfiguration: { Types: ["REGIONAL"] },
      SecurityPolicy: "TLS_1_2",
    });
    variantTemplate.resourceCountIs("AWS::ApiGateway::BasePathMapping", 1);
    variantTemplate.hasOutput("*", { Description: Match.stringLikeRegexp("api.example.com") });
    variantTemplate.allResources("AWS::DynamoDB::Table", {
      DeletionPolicy: "Delete",
      Properties: Match.objectLike({ DeletionProtectionEnabled: false }),
    });
  });

  it("takes the export buckets and Athena's scan limit from context, as text or as values", () => {
    const fromText = synth(
      {
        [CONTEXT.exportBuckets]: "acme-exports, team-*-exports",
        [CONTEXT.athenaBytesScannedCutoff]: "50000000",
      },
      false,
    );
    const fromJson = synth(
      {
        [CONTEXT.exportBuckets]: ["acme-exports", "team-*-exports"],
        [CONTEXT.athenaBytesScannedCutoff]: 50_000_000,
      },
      false,
    );
    for (const variant of [fromText, fromJson]) {
      const variantTemplate = Template.fromStack(variant.stack);
      variantTemplate.hasResourceProperties("AWS::Athena::WorkGroup", {
        WorkGroupConfiguration: Match.objectLike({ BytesScannedCutoffPerQuery: 50_000_000 }),
      });
      const policies = JSON.stringify(variantTemplate.findResources("AWS::IAM::Policy"));
      expect(policies).toContain(":s3:::acme-exports/*");
      expect(policies).toContain(":s3:::team-*-exports/*");
    }
    expect(() => synth({ [CONTEXT.athenaBytesScannedCutoff]: "lots" }, false)).toThrow(/"lots" is not/);
    expect(() => synth({ [CONTEXT.exportBuckets]: 5 }, false)).toThrow(CONTEXT.exportBuckets);
  });

  it("refuses a domain without a certificate", () => {
    expect(() => synth({ [CONTEXT.domainName]: "api.example.com" }, false)).toThrow(CONTEXT.certificateArn);
  });
});
