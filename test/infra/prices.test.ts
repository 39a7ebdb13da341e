/**
 * A deployment's price override and markup in AWS: given as CDK context, checked at synth by the loader
 * the functions run, shipped in the proxy functions' bundles, charged by a proxy handler cold-started
 * with the synthesized environment, and read back from the template by `dmt prices list --stack`.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { App } from "aws-cdk-lib";
import type { CloudAssembly } from "aws-cdk-lib/cx-api";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import * as awsTarget from "../../bin/aws-target";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { type TableNames, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { activePriceCatalogue } from "../../lambda/adapters/fs/price-catalogue";
import type { CreditBalance } from "../../lambda/core/credits";
import { contextHeader, grantedContext } from "../../lambda/handlers/runtime/authorizer-context";
import { ORIGIN_SECRET_HEADER } from "../../lambda/handlers/runtime/origin";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { CONTEXT, defineApp } from "../../lib/app";
import { REPO_ROOT } from "../../lib/lambda-defaults";
import {
  PRICE_OVERRIDE_FILE,
  PRICE_OVERRIDE_PATH,
  PRICE_VERSION_OUTPUT,
  PRICES_METADATA,
} from "../../lib/prices";
import { VENDORS } from "../../lib/secrets";
import type { DmtStack } from "../../lib/stack";
import base from "../../prices/catalogue.json" with { type: "json" };
import { type SqsStandIn, startSqsStandIn } from "../support/reliability-sqs";
import { BUNDLING_TIMEOUT_MS } from "../support/timeouts";
import {
  functionUrlEvent,
  installStreamingRuntime,
  invokeStreaming,
  type SecretsEndpoint,
  type StreamingHandler,
  startSecretsEndpoint,
} from "./lambda-runtime";
import {
  type EventBridgeStandIn,
  type KmsStandIn,
  type S3StandIn,
  startEventBridgeStandIn,
  startKmsStandIn,
  startS3StandIn,
  TEST_CREDENTIALS,
} from "./metering-stand-ins";

type Template = {
  Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
  Outputs: Record<string, { Value: unknown }>;
  Metadata?: Record<string, unknown>;
};

const CDK_JSON_CONTEXT = JSON.parse(readFileSync(join(REPO_ROOT, "cdk.json"), "utf8")).context as Record<
  string,
  unknown
>;
const workDir = mkdtempSync(join(tmpdir(), "dmt-prices-"));
// A space and a quote in the path: the bundling copies it through a shell.
const overrideDir = join(workDir, "acme's prices");
mkdirSync(overrideDir);
const TODAY = new Date().toISOString().slice(0, 10);
const override = {
  version: "acme-1",
  models: [
    // From today: 1 micro-USD per input token (cached too), 2 per output token.
    {
      vendor: "openai",
      model: "gpt-4o-mini",
      prices: [{ effective_from: TODAY, input: 1, cached_input: 1, output: 2 }],
    },
    {
      vendor: "groq",
      model: "acme-fine-tune",
      kind: "chat",
      max_output_tokens: 8192,
      prices: [{ effective_from: "2026-01-01", input: 0.2, output: 0.2 }],
    },
  ],
};
const overrideFile = join(overrideDir, "override.json");
writeFileSync(overrideFile, JSON.stringify(override, null, 2));

function synth(context: Record<string, unknown>, bundle: boolean) {
  const outdir = mkdtempSync(join(workDir, "cdk-"));
  const app = new App({
    outdir,
    context: { ...CDK_JSON_CONTEXT, ...context, ...(bundle ? {} : { "aws:cdk:bundling-stacks": [] }) },
  });
  const stack = defineApp(app);
  return { app, stack };
}

function badFile(name: string, content: unknown): string {
  const file = join(workDir, name);
  writeFileSync(file, typeof content === "string" ? content : JSON.stringify(content));
  return file;
}

let stack: DmtStack;
let assembly: CloudAssembly;
let template: Template;

// Bundles every function with esbuild: minutes on a busy machine.
beforeAll(() => {
  const main = synth({ [CONTEXT.priceOverride]: overrideFile, [CONTEXT.priceMarkup]: "1.5" }, true);
  stack = main.stack;
  assembly = main.app.synth();
  template = assembly.getStackByName(stack.stackName).template as Template;
}, BUNDLING_TIMEOUT_MS);

afterAll(() => rmSync(workDir, { recursive: true, force: true }));

/** A function's environment as synthesized, and its bundle in the cloud assembly. */
function functionIn(
  synthesized: { stack: DmtStack; template: Template; directory: string },
  fn: { node: { defaultChild?: unknown } },
) {
  const id = synthesized.stack.getLogicalId(fn.node.defaultChild as Parameters<DmtStack["getLogicalId"]>[0]);
  const props = synthesized.template.Resources[id]?.Properties as {
    Environment: { Variables: Record<string, unknown> };
    Code: { S3Key: string };
  };
  return {
    env: props.Environment.Variables,
    assetDir: join(synthesized.directory, `asset.${props.Code.S3Key.replace(/\.zip$/, "")}`),
  };
}

const functionOf = (fn: { node: { defaultChild?: unknown } }) =>
  functionIn({ stack, template, directory: assembly.directory }, fn);

describe("price override and markup in the stack", () => {
  it("give each proxy function the markup and the override file in its bundle", () => {
    for (const vendor of VENDORS) {
      const { env, assetDir } = functionOf(stack.proxies[vendor].fn.function);
      expect(env.DMT_PRICE_MARKUP).toBe("1.5");
      expect(env.DMT_PRICES_OVERRIDE).toBe(PRICE_OVERRIDE_PATH);
      expect(readdirSync(assetDir).sort()).toEqual(["index.mjs", "index.mjs.map", PRICE_OVERRIDE_FILE]);
      expect(readFileSync(join(assetDir, PRICE_OVERRIDE_FILE), "utf8")).toBe(
        readFileSync(overrideFile, "utf8"),
      );
      // The proxies' budget (docs/aws.md "Bundle").
      expect(statSync(join(assetDir, "index.mjs")).size).toBeLessThan(1.2 * 1024 * 1024);
    }
  });

  it("leave the functions that do not price calls alone", () => {
    for (const fn of [stack.authorizer, stack.dataApi, stack.metering.sweeper]) {
      const { env, assetDir } = functionOf(fn.function);
      expect(env).not.toHaveProperty("DMT_PRICE_MARKUP");
      expect(env).not.toHaveProperty("DMT_PRICES_OVERRIDE");
      expect(readdirSync(assetDir).sort()).toEqual(["index.mjs", "index.mjs.map"]);
    }
  });

  it("publish the price version the functions charge with, and the settings for the CLI", () => {
    const expected = activePriceCatalogue({ DMT_PRICES_OVERRIDE: overrideFile, DMT_PRICE_MARKUP: "1.5" });
    expect(expected.priceVersion).toMatch(new RegExp(`^${base.version}\\+[0-9a-f]{12}$`));
    expect(template.Outputs[PRICE_VERSION_OUTPUT]?.Value).toBe(expected.priceVersion);
    expect(template.Metadata?.[PRICES_METADATA]).toEqual({ override, markup: 1.5 });
  });

  it("let `dmt prices list --stack` read back the catalogue the functions load", () => {
    expect([awsTarget.PRICES_METADATA, awsTarget.PRICE_VERSION_OUTPUT]).toEqual([
      PRICES_METADATA,
      PRICE_VERSION_OUTPUT,
    ]);
    const catalogue = awsTarget.priceCatalogueOfTemplate(stack.stackName, JSON.stringify(template));
    expect(catalogue.priceVersion).toBe(template.Outputs[PRICE_VERSION_OUTPUT]?.Value);
    expect(Number(catalogue.markup.num) / Number(catalogue.markup.den)).toBe(1.5);
    const rows = catalogue.list({ vendor: "groq" }).map((row) => row.model);
    expect(rows).toContain("acme-fine-tune");

    // Deployed from another catalogue: the list would not be what the stack charges.
    const drifted = structuredClone(template);
    drifted.Outputs[PRICE_VERSION_OUTPUT] = { Value: "2020-01-01+000000000000" };
    expect(() => awsTarget.priceCatalogueOfTemplate("Dmt", JSON.stringify(drifted))).toThrow(
      /charges with prices 2020-01-01\+000000000000/,
    );
    const old = { ...template, Metadata: {} };
    expect(() => awsTarget.priceCatalogueOfTemplate("Dmt", JSON.stringify(old))).toThrow(
      /no price settings: deploy the current version/,
    );
  });

  it("without settings, keep the shipped catalogue and bundles as they were", () => {
    const plain = synth({}, false);
    const synthesized = plain.app.synth();
    const json = synthesized.getStackByName(plain.stack.stackName).template as Template;
    expect(json.Outputs[PRICE_VERSION_OUTPUT]?.Value).toBe(base.version);
    expect(json.Metadata?.[PRICES_METADATA]).toEqual({});
    for (const vendor of VENDORS) {
      const { env } = functionIn(
        { stack: plain.stack, template: json, directory: synthesized.directory },
        plain.stack.proxies[vendor].fn.function,
      );
      expect(env).not.toHaveProperty("DMT_PRICE_MARKUP");
      expect(env).not.toHaveProperty("DMT_PRICES_OVERRIDE");
    }
    expect(awsTarget.priceCatalogueOfTemplate("Dmt", JSON.stringify(json)).priceVersion).toBe(base.version);
  });
});

describe("bad price settings fail the synth, naming what is wrong", () => {
  const synthWith = (context: Record<string, unknown>) => () => synth(context, false);

  it("an override entry missing a field names the model and the field, and the file", () => {
    const file = badFile("incomplete.json", {
      models: [
        {
          vendor: "groq",
          model: "acme-broken",
          kind: "chat",
          max_output_tokens: 8192,
          prices: [{ effective_from: "2026-01-01", input: 0.2 }],
        },
      ],
    });
    const attempt = synthWith({ [CONTEXT.priceOverride]: file });
    expect(attempt).toThrow(/Invalid price override: groq\/acme-broken: prices\[0\]\.output: /);
    expect(attempt).toThrow(file);
  });

  it("a negative price, a typo, a file that is not JSON, a path that is not a file", () => {
    const negative = badFile("negative.json", {
      models: [{ vendor: "openai", model: "gpt-4o", prices: [{ effective_from: "2026-12-01", input: -1 }] }],
    });
    expect(synthWith({ [CONTEXT.priceOverride]: negative })).toThrow(
      /Invalid price override: openai\/gpt-4o: prices\[\d\]\.input: must be a non-negative/,
    );
    const typo = badFile("typo.json", {
      models: [{ vendor: "openai", model: "gpt-4o", prices: [{ effective_from: "2026-12-01", outptu: 1 }] }],
    });
    expect(synthWith({ [CONTEXT.priceOverride]: typo })).toThrow(/openai\/gpt-4o: prices\[\d\]: .*outptu/);
    const notJson = badFile("broken.json", '{"models": [');
    expect(synthWith({ [CONTEXT.priceOverride]: notJson })).toThrow(/not valid JSON/);
    expect(synthWith({ [CONTEXT.priceOverride]: join(workDir, "missing.json") })).toThrow(
      /missing\.json\): there is no such file/,
    );
    expect(synthWith({ [CONTEXT.priceOverride]: workDir })).toThrow(/there is no such file/);
  });

  it("a markup out of range, or not a number", () => {
    expect(synthWith({ [CONTEXT.priceMarkup]: "20" })).toThrow(
      /markup 20\): Invalid price markup: 20 is not/,
    );
    expect(synthWith({ [CONTEXT.priceMarkup]: 0 })).toThrow(/Invalid price markup: 0 is not/);
    expect(synthWith({ [CONTEXT.priceMarkup]: "lots" })).toThrow(
      `${CONTEXT.priceMarkup}: "lots" is not a number`,
    );
    // The file's own markup is checked the same way.
    const marked = badFile("marked.json", { markup: 11 });
    expect(synthWith({ [CONTEXT.priceOverride]: marked })).toThrow(/Invalid price markup: 11 is not/);
  });
});

describe("a proxy function cold-started with the synthesized environment", () => {
  const ORIGIN = "Q2x0Zk1hbmFnZWRPcmlnaW5TZWNyZXRWYWx1ZTEyMzQ1Njc4";
  const ORIGIN_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:OriginSecret-abc123";
  const KEY_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:VendorKeyOpenai-abc123";
  const REGION = "eu-west-1";
  const tables: TableNames = tableNames({}, "prices-");
  const dataDir = join(workDir, "dynamo");
  let simulator: Simulator;
  let secrets: SecretsEndpoint;
  let dynamo: EmbeddedDynamo;
  let sqs: SqsStandIn;
  let s3: S3StandIn;
  let kms: KmsStandIn;
  let bus: EventBridgeStandIn;
  let credits: DynamoCredits;
  let handler: StreamingHandler;

  beforeAll(async () => {
    mkdirSync(dataDir);
    simulator = await startSimulator();
    secrets = await startSecretsEndpoint();
    dynamo = await startEmbeddedDynamo(dataDir);
    sqs = await startSqsStandIn();
    s3 = await startS3StandIn(REGION);
    kms = await startKmsStandIn();
    bus = await startEventBridgeStandIn({ region: REGION });
    secrets.secrets.set(ORIGIN_ARN, { AWSCURRENT: ORIGIN });
    secrets.secrets.set(KEY_ARN, { AWSCURRENT: "sk-managed-openai" });

    // The function's own variables; what CloudFormation resolves at deploy comes from the stand-ins.
    const { env, assetDir } = functionOf(stack.proxies.openai.fn.function);
    const resolved: Record<string, string> = {
      ...Object.fromEntries(
        Object.entries(tables).map(([name, table]) => [`DMT_TABLE_${name.toUpperCase()}`, table]),
      ),
      DMT_VENDOR_KEY_SECRET_ARN_OPENAI: KEY_ARN,
      DMT_ORIGIN_SECRET_ARN: ORIGIN_ARN,
      DMT_USER_ID_KEY_SECRET_ARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:dmt-user-id-key",
      DMT_BYOK_KEY_ARN: "arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100",
      DMT_QUEUE_URL: `${sqs.url}/123456789012/records`,
      DMT_WAREHOUSE_BUCKET: "dmt-warehouse-data",
      DMT_EVENT_BUS_NAME: "dmt-events",
    };
    const fromTemplate = Object.entries(env).map(([name, value]) => {
      if (typeof value === "string") return [name, value];
      const given = resolved[name];
      if (given === undefined) throw new Error(`no stand-in for ${name}: ${JSON.stringify(value)}`);
      return [name, given];
    });
    Object.assign(process.env, Object.fromEntries(fromTemplate), {
      // Lambda unpacks the bundle in /var/task; here it stays in the cloud assembly.
      DMT_PRICES_OVERRIDE: String(env.DMT_PRICES_OVERRIDE).replace("/var/task", assetDir),
      DMT_LOG_LEVEL: "silent",
      DMT_UPSTREAM_URL_OPENAI: simulator.origins.openai,
      DMT_SECRETS_ENDPOINT: secrets.url,
      DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
      DMT_KMS_ENDPOINT: kms.url,
      DMT_SQS_ENDPOINT: sqs.url,
      DMT_S3_ENDPOINT: s3.url,
      DMT_EVENTBRIDGE_ENDPOINT: bus.url,
      AWS_REGION: REGION,
      AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
    });
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    await ensureTables(db, tables);
    credits = new DynamoCredits(db, tables);
    await credits.grant("acme", 10_000_000, "test");
    installStreamingRuntime();
    handler = (await import("../../lambda/handlers/proxy")).handler as unknown as StreamingHandler;
  });

  afterAll(async () => {
    await simulator?.close();
    await secrets?.close();
    await sqs?.close();
    await s3?.close();
    await kms?.close();
    await bus?.close();
    await dynamo?.close();
  });

  it("charges a managed call at the override's prices times the markup, rounded up once", async () => {
    const identity = grantedContext({
      projectId: "acme",
      keyId: "a".repeat(16),
      tier: "pro",
      rateLimit: { rpm: 600, burst: 1000 },
      store: "full",
    });
    const headers = {
      authorization: `Bearer dmt_${"a".repeat(16)}_${"B".repeat(43)}`,
      "content-type": "application/json",
      [ORIGIN_SECRET_HEADER]: ORIGIN,
      ...Object.fromEntries(
        Object.entries(identity).map(([field, value]) => [contextHeader(field), String(value)]),
      ),
    };
    const body = JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }] });
    const unspent = (b: CreditBalance) => b.availableMicros + b.heldMicros;
    const before = await credits.balance("acme");

    // Powertools writes the invocation's metrics to stdout.
    const stdout = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    let status: number | undefined;
    try {
      const response = await invokeStreaming(
        handler,
        functionUrlEvent({ method: "POST", path: "/openai/v1/chat/completions", headers, body }),
      );
      status = response.prelude?.statusCode;
    } finally {
      stdout.mockRestore();
    }
    expect(status).toBe(200);

    const [record] = sqs.accepted.map((message) => JSON.parse(message) as Record<string, number | string>);
    expect(sqs.accepted).toHaveLength(1);
    const input = Number(record?.input_tokens);
    const output = Number(record?.output_tokens);
    expect(input).toBeGreaterThan(0);
    expect(output).toBeGreaterThan(0);
    // 1 micro-USD per input token and 2 per output token, times 1.5, rounded up to a whole micro-USD.
    const expected = Math.ceil((3 * (input + 2 * output)) / 2);
    expect(record?.cost_micros).toBe(expected);
    expect(record?.price_version).toBe(template.Outputs[PRICE_VERSION_OUTPUT]?.Value);
    expect(unspent(before) - unspent(await credits.balance("acme"))).toBe(expected);
  });
});
