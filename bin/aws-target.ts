import {
  CloudFormationClient,
  DescribeStacksCommand,
  type DescribeStacksCommandOutput,
  GetTemplateCommand,
} from "@aws-sdk/client-cloudformation";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoBudgets } from "../lambda/adapters/dynamodb/budgets";
import { createDynamoClient } from "../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { DynamoExportSettings } from "../lambda/adapters/dynamodb/export-settings";
import { DynamoMemberStore } from "../lambda/adapters/dynamodb/members";
import { DynamoPayments } from "../lambda/adapters/dynamodb/payments";
import { DynamoPlans } from "../lambda/adapters/dynamodb/plans";
import { DynamoPrivacySettings } from "../lambda/adapters/dynamodb/privacy-settings";
import { DynamoUsageRollups } from "../lambda/adapters/dynamodb/rollups";
import { DynamoStore } from "../lambda/adapters/dynamodb/store";
import { TABLES, type TableName, type TableNames } from "../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../lambda/adapters/dynamodb/vendor-keys";
import { activePriceCatalogue } from "../lambda/adapters/fs/price-catalogue";
import { createKmsClient, KmsKeyWrapper } from "../lambda/adapters/kms/key-wrapper";
import type { UserDirectory } from "../lambda/core/members";
import type { PriceCatalogue } from "../lambda/core/pricing";

/**
 * The output under which the stack publishes a table's physical name: `Table<Name>`, as
 * `tableOutputKey` in lib/stack.ts (not imported: the CLI must not load the CDK; the CLI test checks
 * the two agree).
 */
export function tableOutputKey(name: TableName): string {
  return `Table${name.charAt(0).toUpperCase()}${name.slice(1)}`;
}

/** The output holding the ARN of the KMS key that wraps customers' vendor keys. */
export const BYOK_KEY_OUTPUT = "ByokKeyArn";

/** The outputs naming the event bus and the webhook delivery queue, as in lib/events.ts. */
export const EVENT_BUS_OUTPUT = "EventBusName";
export const WEBHOOK_QUEUE_OUTPUT = "WebhookQueueUrl";
/** The output naming the meter queue (lib/billing.ts). */
export const METER_QUEUE_OUTPUT = "MeterQueueUrl";
/** `StripeAmountsUsd` in lib/stack.ts: the amounts a recharge rule may buy (not imported, as above). */
export const STRIPE_AMOUNTS_OUTPUT = "StripeAmountsUsd";

/**
 * Where the stack records its price settings: a template metadata key and an output, as
 * `PRICES_METADATA` and `PRICE_VERSION_OUTPUT` in lib/prices.ts (not imported, as above).
 */
export const PRICES_METADATA = "dmt:prices";
export const PRICE_VERSION_OUTPUT = "PriceVersion";

/** A deployed stack as the CLI works with it: its tables in its region, and its BYOK key. */
export interface AwsTarget {
  stackName: string;
  region: string;
  db: DynamoDBClient;
  tables: TableNames;
  byokKeyArn: string;
  /** The dashboard's Cognito user pool (`DashboardUserPoolId`), when the stack has one. */
  userPoolId: string | undefined;
  /** The stack's event bus and webhook delivery queue (lib/events.ts). */
  eventBusName: string;
  webhookQueueUrl: string;
  /** Absent on a stack deployed before billing exports. */
  meterQueueUrl: string | undefined;
  /** The amounts Buy credits offers (`StripeAmountsUsd`); absent on a stack deployed before it. */
  stripeAmountsUsd: string | undefined;
  close(): void;
}

/** The AWS SDK's words for a missing region or missing credentials, turned into what to set. */
export function setupProblem(err: Error, stackName: string): Error {
  // Missing, or set but empty or malformed (`export AWS_REGION=`).
  if (err.message === "Region is missing" || err.message.startsWith("Region not accepted")) {
    return new Error(
      `--stack ${stackName} needs an AWS region: set AWS_REGION, or AWS_PROFILE to a profile that has one.`,
    );
  }
  if (err.name === "CredentialsProviderError") {
    return new Error(
      `--stack ${stackName} needs AWS credentials and found none: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.`,
    );
  }
  return err;
}

/**
 * Finds a deployed stack's tables from its CloudFormation outputs (`Table<Name>`, `ByokKeyArn`), with
 * the caller's AWS credentials and region (the usual AWS_PROFILE, AWS_REGION...). The DynamoDB client
 * works in the stack's own region, read from its id.
 */
export async function openAwsTarget(stackName: string): Promise<AwsTarget> {
  const cloudFormation = new CloudFormationClient({});
  let described: DescribeStacksCommandOutput;
  try {
    described = await cloudFormation.send(new DescribeStacksCommand({ StackName: stackName }));
  } catch (err) {
    throw setupProblem(err as Error, stackName);
  } finally {
    cloudFormation.destroy();
  }
  const stack = described.Stacks?.[0];
  if (!stack) throw new Error(`No stack named '${stackName}'.`);
  const outputs = new Map((stack.Outputs ?? []).map((o) => [o.OutputKey, o.OutputValue]));
  const output = (key: string): string => {
    const value = outputs.get(key);
    if (!value) {
      throw new Error(`Stack '${stackName}' has no output ${key}: deploy the current version of the stack.`);
    }
    return value;
  };
  const tables = {} as TableNames;
  for (const name of Object.keys(TABLES) as TableName[]) tables[name] = output(tableOutputKey(name));
  // arn:aws:cloudformation:<region>:<account>:stack/<name>/<id>
  const region = stack.StackId?.split(":")[3];
  if (!region) throw new Error(`Stack '${stackName}' has no readable id.`);
  const db = createDynamoClient({ region });
  return {
    stackName,
    region,
    db,
    tables,
    byokKeyArn: output(BYOK_KEY_OUTPUT),
    userPoolId: outputs.get(USER_POOL_OUTPUT),
    eventBusName: output(EVENT_BUS_OUTPUT),
    webhookQueueUrl: output(WEBHOOK_QUEUE_OUTPUT),
    meterQueueUrl: outputs.get(METER_QUEUE_OUTPUT),
    stripeAmountsUsd: outputs.get(STRIPE_AMOUNTS_OUTPUT),
    close: () => db.destroy(),
  };
}

export const USER_POOL_OUTPUT = "DashboardUserPoolId";

/** The dashboard's users by email, from the stack's Cognito user pool. */
function stackUserDirectory(target: AwsTarget): UserDirectory {
  return {
    async findUserId(email) {
      if (target.userPoolId === undefined) {
        throw new Error(
          `Stack '${target.stackName}' has no output ${USER_POOL_OUTPUT}: deploy the current version.`,
        );
      }
      const { cognitoUserDirectory } = await import("../lambda/adapters/cognito/user-directory");
      const directory = cognitoUserDirectory({ userPoolId: target.userPoolId, region: target.region });
      try {
        return await directory.findUserId(email);
      } finally {
        directory.close();
      }
    },
  };
}

/** What the store commands of the CLI use, over a deployed stack. */
export function awsServices(target: AwsTarget) {
  return {
    store: new DynamoStore(target.db, target.tables),
    budgets: new DynamoBudgets(target.db, target.tables),
    usage: new DynamoUsageRollups(target.db, target.tables),
    credits: new DynamoCredits(target.db, target.tables),
    vendorKeys: new DynamoVendorKeys(
      target.db,
      target.tables,
      new KmsKeyWrapper(createKmsClient({ region: target.region }), target.byokKeyArn),
    ),
    exportSettings: new DynamoExportSettings(target.db, target.tables.projectSettings),
    members: new DynamoMemberStore(target.db, target.tables),
    users: stackUserDirectory(target),
    privacy: new DynamoPrivacySettings(target.db, target.tables),
    plans: new DynamoPlans(target.db, target.tables),
    payments: new DynamoPayments(target.db, target.tables),
    async retention(): Promise<never> {
      throw new Error(
        "in AWS the stack's retention function runs every day; to run it now: aws lambda invoke --function-name <RetentionFunction output> out.json",
      );
    },
    async compaction(): Promise<never> {
      throw new Error(
        "in AWS the stack's compaction function runs every day; to run it now: aws lambda invoke --function-name <the stack's Compaction function> out.json",
      );
    },
  };
}

/**
 * The CLI's events over a deployed stack: events go onto its bus (whose rule feeds the delivery queue),
 * webhook secrets are wrapped by its KMS key, and webhook URLs must be public.
 */
export async function awsEvents(target: AwsTarget) {
  const [
    { EventBridgeClient },
    { SQSClient },
    { EventBridgePublisher },
    { SqsDeliveryQueue },
    { cliEvents },
  ] = await Promise.all([
    import("@aws-sdk/client-eventbridge"),
    import("@aws-sdk/client-sqs"),
    import("../lambda/adapters/eventbridge/bus"),
    import("../lambda/adapters/sqs/delivery-queue"),
    import("./cli-events-open"),
  ]);
  const bus = new EventBridgeClient({ region: target.region });
  const sqs = new SQSClient({ region: target.region });
  return cliEvents(
    {
      db: target.db,
      tables: target.tables,
      wrapper: new KmsKeyWrapper(createKmsClient({ region: target.region }), target.byokKeyArn),
      queue: new SqsDeliveryQueue(sqs, target.webhookQueueUrl),
      publisher: new EventBridgePublisher(bus, target.eventBusName),
      credits: new DynamoCredits(target.db, target.tables),
      policy: "public",
    },
    async () => {
      bus.destroy();
      sqs.destroy();
    },
  );
}

/**
 * The price catalogue a deployed stack's proxy functions charge with, for `dmt prices list --stack`:
 * its override and markup read back from the stack's template (`cloudformation:GetTemplate`).
 */
export async function stackPriceCatalogue(stackName: string): Promise<PriceCatalogue> {
  const cloudFormation = new CloudFormationClient({});
  try {
    const { TemplateBody } = await cloudFormation.send(
      new GetTemplateCommand({ StackName: stackName, TemplateStage: "Original" }),
    );
    return priceCatalogueOfTemplate(stackName, TemplateBody ?? "{}");
  } finally {
    cloudFormation.destroy();
  }
}

/**
 * The catalogue from a stack's template, loaded as its functions load theirs. The shipped catalogue
 * is this checkout's: unless the resulting price version is the one the stack published, the stack
 * was deployed with another `prices/catalogue.json` and the list would not be what it charges.
 */
export function priceCatalogueOfTemplate(stackName: string, templateBody: string): PriceCatalogue {
  const template = JSON.parse(templateBody) as {
    Metadata?: Record<string, { override?: unknown; markup?: number }>;
    Outputs?: Record<string, { Value?: unknown }>;
  };
  const settings = template.Metadata?.[PRICES_METADATA];
  const deployed = template.Outputs?.[PRICE_VERSION_OUTPUT]?.Value;
  if (!settings || typeof deployed !== "string") {
    throw new Error(`Stack '${stackName}' has no price settings: deploy the current version of the stack.`);
  }
  const catalogue = activePriceCatalogue({
    ...(settings.override !== undefined && { DMT_PRICES_OVERRIDE: JSON.stringify(settings.override) }),
    ...(settings.markup !== undefined && { DMT_PRICE_MARKUP: String(settings.markup) }),
  });
  if (catalogue.priceVersion !== deployed) {
    throw new Error(
      `Stack '${stackName}' charges with prices ${deployed}, but this checkout's catalogue makes ${catalogue.priceVersion}: run dmt from the version the stack was deployed from.`,
    );
  }
  return catalogue;
}

/** The billing exports over a deployed stack: its `billingMeter` table and its meter queue. */
export async function awsBilling(target: AwsTarget) {
  const [{ SQSClient }, { SqsMeterQueue }, { DynamoMeterStore }] = await Promise.all([
    import("@aws-sdk/client-sqs"),
    import("../lambda/adapters/sqs/meter-queue"),
    import("../lambda/adapters/dynamodb/billing-meter"),
  ]);
  const sqs = new SQSClient({ region: target.region });
  const queueUrl = target.meterQueueUrl;
  return {
    store: new DynamoMeterStore(target.db, target.tables),
    queue: {
      async send(bodies: string[]) {
        if (!queueUrl) {
          throw new Error(
            `Stack '${target.stackName}' has no output ${METER_QUEUE_OUTPUT}: deploy the current version.`,
          );
        }
        await new SqsMeterQueue(sqs, queueUrl).send(bodies);
      },
    },
    close: async () => sqs.destroy(),
  };
}
