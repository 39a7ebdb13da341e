/**
 * The CLI against a deployed stack (`--stack` or DMT_STACK): it reads the stack's outputs from
 * CloudFormation and works on the tables they name, in the stack's region, wrapping vendor keys with
 * the stack's KMS key. Offline: CloudFormation, DynamoDB and KMS are local stand-ins the AWS SDK is
 * pointed at through its standard AWS_ENDPOINT_URL_<SERVICE> variables.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BYOK_KEY_OUTPUT,
  EVENT_BUS_OUTPUT,
  PRICE_VERSION_OUTPUT,
  PRICES_METADATA,
  STRIPE_AMOUNTS_OUTPUT,
  tableOutputKey,
  WEBHOOK_QUEUE_OUTPUT,
} from "../../bin/aws-target";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoExportSettings } from "../../lambda/adapters/dynamodb/export-settings";
import { DynamoStore } from "../../lambda/adapters/dynamodb/store";
import { TABLES, type TableName, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../../lambda/adapters/dynamodb/vendor-keys";
import { activePriceCatalogue } from "../../lambda/adapters/fs/price-catalogue";
import { createKmsClient, KmsKeyWrapper } from "../../lambda/adapters/kms/key-wrapper";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { tableOutputKey as stackTableOutputKey } from "../../lib/stack";
import { type KmsStandIn, startKmsStandIn, TEST_CREDENTIALS } from "../infra/metering-stand-ins";
import { runDmt } from "../support/cli";

const STACK = "DmtProd";
const REGION = "eu-west-1";
const BYOK_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/11111111-2222-3333-4444-555555555555";
// Physical names as CloudFormation makes them: nothing like the local defaults.
const tables = tableNames({}, "DmtProd-Store-");

const storeDir = mkdtempSync(join(tmpdir(), "dmt-cli-aws-store-"));
/** The CLI's local data dir: commands against the stack must not touch it. */
const dataDir = mkdtempSync(join(tmpdir(), "dmt-cli-aws-local-"));
let dynamo: EmbeddedDynamo;
let kms: KmsStandIn;
let cloudFormation: Server;
let cloudFormationUrl: string;
const describedStacks: string[] = [];

/** CloudFormation's query protocol for DescribeStacks, answering for one stack as a deployment would. */
function describeStacksXml(stackName: string): string | undefined {
  if (stackName !== STACK) return undefined;
  const outputs = [
    ...(Object.keys(TABLES) as TableName[]).map((name) => [tableOutputKey(name), tables[name]]),
    [BYOK_KEY_OUTPUT, BYOK_KEY_ARN],
    [EVENT_BUS_OUTPUT, "Dmt-events"],
    [WEBHOOK_QUEUE_OUTPUT, "https://sqs.eu-west-1.amazonaws.com/123456789012/Dmt-webhooks"],
    ["ApiUrl", "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/"],
    // Deployed with -c dmt:stripeAmountsUsd=10,25,250.
    [STRIPE_AMOUNTS_OUTPUT, "10,25,250"],
  ]
    .map(
      ([key, value]) => `<member><OutputKey>${key}</OutputKey><OutputValue>${value}</OutputValue></member>`,
    )
    .join("");
  return `<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">
  <DescribeStacksResult><Stacks><member>
    <StackId>arn:aws:cloudformation:${REGION}:123456789012:stack/${STACK}/0f1e2d3c</StackId>
    <StackName>${STACK}</StackName>
    <CreationTime>2026-11-01T00:00:00Z</CreationTime>
    <StackStatus>UPDATE_COMPLETE</StackStatus>
    <Outputs>${outputs}</Outputs>
  </member></Stacks></DescribeStacksResult>
  <ResponseMetadata><RequestId>test</RequestId></ResponseMetadata>
</DescribeStacksResponse>`;
}

/** The price settings the stack was deployed with: an added model and a markup. */
const priceSettings = {
  override: {
    version: "acme-1",
    models: [
      {
        vendor: "groq",
        model: "acme-fine-tune",
        kind: "chat",
        max_output_tokens: 8192,
        prices: [{ effective_from: "2026-01-01", input: 0.2, output: 0.4 }],
      },
    ],
  },
  markup: 1.25,
};
const deployedPrices = activePriceCatalogue({
  DMT_PRICES_OVERRIDE: JSON.stringify(priceSettings.override),
  DMT_PRICE_MARKUP: String(priceSettings.markup),
});

/** GetTemplate: the stack's template, with its price settings in metadata and its price version. */
function getTemplateXml(stackName: string): string | undefined {
  if (stackName !== STACK) return undefined;
  const template = {
    Metadata: { [PRICES_METADATA]: priceSettings },
    Outputs: { [PRICE_VERSION_OUTPUT]: { Value: deployedPrices.priceVersion } },
  };
  const body = JSON.stringify(template)
    .replaceAll("&", "&amp;")
    .replaceAll("<", "&lt;")
    .replaceAll(">", "&gt;");
  return `<GetTemplateResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">
  <GetTemplateResult><TemplateBody>${body}</TemplateBody></GetTemplateResult>
  <ResponseMetadata><RequestId>test</RequestId></ResponseMetadata>
</GetTemplateResponse>`;
}

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(storeDir);
  await ensureTables(createDynamoClient({ endpoint: dynamo.endpoint }), tables);
  kms = await startKmsStandIn();
  cloudFormation = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      const stackName = form.get("StackName") ?? "";
      describedStacks.push(`${form.get("Action")} ${stackName}`);
      const xml =
        form.get("Action") === "GetTemplate" ? getTemplateXml(stackName) : describeStacksXml(stackName);
      res.writeHead(xml ? 200 : 400, { "content-type": "text/xml" });
      res.end(
        xml ??
          `<ErrorResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><Error><Type>Sender</Type><Code>ValidationError</Code><Message>Stack with id ${stackName} does not exist</Message></Error><RequestId>test</RequestId></ErrorResponse>`,
      );
    });
  });
  await new Promise<void>((resolve) => cloudFormation.listen(0, "127.0.0.1", resolve));
  cloudFormationUrl = `http://127.0.0.1:${(cloudFormation.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => cloudFormation?.close(resolve));
  await kms?.close();
  await dynamo?.close();
  rmSync(storeDir, { recursive: true, force: true });
  rmSync(dataDir, { recursive: true, force: true });
});

/** The operator's environment: credentials, a region, and the SDK pointed at the stand-ins. */
function awsEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
    AWS_CONFIG_FILE: join(dataDir, "no-aws-config"),
    AWS_SHARED_CREDENTIALS_FILE: join(dataDir, "no-aws-credentials"),
    AWS_ENDPOINT_URL_CLOUDFORMATION: cloudFormationUrl,
    AWS_ENDPOINT_URL_DYNAMODB: dynamo.endpoint,
    AWS_ENDPOINT_URL_KMS: kms.url,
    ...extra,
  };
}

const dmt = (args: string[], options: { input?: string; env?: Record<string, string> } = {}) =>
  runDmt(args, dataDir, { ...options, env: awsEnv(options.env) });

const deployed = () => {
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  return { db, store: new DynamoStore(db, tables) };
};

describe("dmt against a deployed stack", () => {
  it("reads the same output names the stack publishes", () => {
    for (const name of Object.keys(TABLES) as TableName[]) {
      expect(tableOutputKey(name)).toBe(stackTableOutputKey(name));
    }
  });

  it("creates the first project and key in the stack's tables, found from its outputs", async () => {
    const project = await dmt(["projects", "create", "acme", "--tier", "pro", "--stack", STACK]);
    expect(project).toMatchObject({ code: 0, stdout: "Created project acme (tier pro).\n" });
    expect(describedStacks).toContain(`DescribeStacks ${STACK}`);

    const created = await dmt([
      "keys",
      "create",
      "--project",
      "acme",
      "--name",
      "first",
      "--json",
      "--stack",
      STACK,
    ]);
    expect(created.code).toBe(0);
    const { id, key } = JSON.parse(created.stdout) as { id: string; key: string };
    expect(key.startsWith("dmt_")).toBe(true);

    const { store } = deployed();
    expect(await store.getProject("acme")).toMatchObject({ projectId: "acme", tier: "pro" });
    expect(await store.getKey(id)).toMatchObject({ projectId: "acme", name: "first", revoked: false });
    // Nothing was created locally.
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("takes --stack before the command too, as the README writes it", async () => {
    for (const args of [
      ["--stack", STACK, "projects", "list", "--json"],
      [`--stack=${STACK}`, "--json", "projects", "list"],
    ]) {
      const listed = await dmt(args);
      expect(listed, args.join(" ")).toMatchObject({ code: 0, stderr: "" });
      expect(JSON.parse(listed.stdout)).toEqual(
        expect.arrayContaining([expect.objectContaining({ projectId: "acme" })]),
      );
    }
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("takes the stack from DMT_STACK: credits granted there show in its ledger", async () => {
    const env = { DMT_STACK: STACK };
    expect((await dmt(["projects", "create", "beta"], { env })).code).toBe(0);
    const grant = await dmt(["credits", "grant", "--project", "beta", "--usd", "25", "--json"], { env });
    expect(grant.code).toBe(0);
    expect(JSON.parse(grant.stdout).balance.availableMicros).toBe(25_000_000);
    const listed = JSON.parse((await dmt(["projects", "list", "--json"], { env })).stdout) as {
      projectId: string;
    }[];
    expect(listed.map((p) => p.projectId).sort()).toEqual(["acme", "beta"]);
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("stores a vendor key wrapped by the stack's KMS key, readable only through it", async () => {
    const secret = "sk-proj-deployed-0123456789abcdef";
    const set = await dmt(
      ["vendor-keys", "set", "--project", "acme", "--vendor", "openai", "--stack", STACK],
      {
        input: `${secret}\n`,
      },
    );
    expect(set.code).toBe(0);
    expect(set.stdout).not.toContain(secret);
    expect(kms.calls).toContainEqual(
      expect.objectContaining({ operation: "GenerateDataKey", keyId: BYOK_KEY_ARN }),
    );

    const { db } = deployed();
    const withKms = new DynamoVendorKeys(
      db,
      tables,
      new KmsKeyWrapper(createKmsClient({ endpoint: kms.url }), BYOK_KEY_ARN),
    );
    expect(await withKms.reveal("acme", "openai")).toBe(secret);
    const listed = await dmt(["vendor-keys", "list", "--project", "acme", "--json", "--stack", STACK]);
    expect(JSON.parse(listed.stdout)).toMatchObject([{ vendor: "openai", last4: "cdef" }]);
  });

  it("sets a project's export bucket in the stack's settings table, and refuses a folder", async () => {
    const set = await dmt([
      "settings",
      "set",
      "--project",
      "acme",
      "--export-bucket",
      "s3://acme-exports/dmt/",
      "--stack",
      STACK,
    ]);
    expect(set).toMatchObject({ code: 0, stdout: "Exports of acme now go to s3://acme-exports/dmt/.\n" });
    const settings = new DynamoExportSettings(deployed().db, tables.projectSettings);
    expect(await settings.getExportDestination("acme")).toMatchObject({ kind: "s3", bucket: "acme-exports" });

    const folder = await dmt([
      "settings",
      "set",
      "--project",
      "acme",
      "--export-bucket",
      "file:///srv/exports",
      "--stack",
      STACK,
    ]);
    expect(folder.code).toBe(1);
    expect(folder.stderr).toMatch(/^dmt: .*export-bucket.*s3:\/\/bucket\/prefix\n$/);
  });

  it("sets a project's auto-recharge rule in the stack's payments table, to an amount the stack offers", async () => {
    const refused = await dmt([
      "credits",
      "recharge",
      "set",
      "--project",
      "acme",
      "--threshold",
      "5",
      "--amount",
      "100",
      "--stack",
      STACK,
    ]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toBe("dmt: Invalid field 'amount': must be one of 10.00, 25.00, 250.00");
    const set = await dmt([
      "credits",
      "recharge",
      "set",
      "--project",
      "acme",
      "--threshold",
      "5",
      "--amount",
      "250",
      "--json",
      "--stack",
      STACK,
    ]);
    expect(set.code).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({
      recharge: { threshold_usd: "5.00", amount_usd: "250.00" },
    });
    const { db } = deployed();
    const { DynamoPayments } = await import("../../lambda/adapters/dynamodb/payments");
    expect(await new DynamoPayments(db, tables).getProfile("acme")).toMatchObject({
      recharge: { thresholdMicros: 5_000_000, amountMicros: 250_000_000 },
    });
    expect(readdirSync(dataDir)).toEqual([]);
  });

  it("fails with one line when the stack does not exist", async () => {
    const res = await dmt(["projects", "list", "--stack", "Ghost"]);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe("dmt: Stack with id Ghost does not exist\n");
  });

  it("says what to set when there is no AWS region or no credentials", async () => {
    // Unset (undefined leaves it out of the child's environment), and set but empty.
    for (const region of [undefined, ""]) {
      const env = { AWS_REGION: region, AWS_DEFAULT_REGION: region } as unknown as Record<string, string>;
      const noRegion = await dmt(["projects", "list", "--stack", STACK], { env });
      expect(noRegion, String(region)).toMatchObject({ code: 1, stdout: "" });
      expect(noRegion.stderr).toBe(
        `dmt: --stack ${STACK} needs an AWS region: set AWS_REGION, or AWS_PROFILE to a profile that has one.\n`,
      );
    }
    const noCredentials = await dmt(["projects", "list", "--stack", STACK], {
      // No keys, no files, and no instance metadata to ask (this machine is no EC2 instance).
      env: { AWS_ACCESS_KEY_ID: "", AWS_SECRET_ACCESS_KEY: "", AWS_EC2_METADATA_DISABLED: "true" },
    });
    expect(noCredentials).toMatchObject({ code: 1, stdout: "" });
    expect(noCredentials.stderr).toBe(
      `dmt: --stack ${STACK} needs AWS credentials and found none: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.\n`,
    );
  });
  it("lists the prices the stack charges: its override and markup", async () => {
    const listed = await dmt(["prices", "list", "--vendor", "groq", "--json", "--stack", STACK]);
    expect(listed.code).toBe(0);
    const result = JSON.parse(listed.stdout) as {
      priceVersion: string;
      markup: number;
      rows: { model: string }[];
    };
    expect(result.priceVersion).toBe(deployedPrices.priceVersion);
    expect(result.markup).toBe(1.25);
    expect(result.rows.map((r) => r.model)).toContain("acme-fine-tune");
    expect(describedStacks).toContain(`GetTemplate ${STACK}`);
    // Locally, the shipped catalogue: no such model, no markup.
    const local = JSON.parse(
      (await runDmt(["prices", "list", "--vendor", "groq", "--json"], dataDir)).stdout,
    );
    expect(local.markup).toBe(1);
    expect(local.rows.map((r: { model: string }) => r.model)).not.toContain("acme-fine-tune");
  });
});
