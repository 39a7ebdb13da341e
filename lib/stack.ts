import { CfnOutput, RemovalPolicy, Stack, type StackProps, Validations } from "aws-cdk-lib";
import { RetentionDays } from "aws-cdk-lib/aws-logs";
import { Secret } from "aws-cdk-lib/aws-secretsmanager";
import type { Construct } from "constructs";
import { TABLES, type TableName } from "../lambda/adapters/dynamodb/tables";
import type { LogLevel } from "../lambda/core/logger";
import { Api, type CustomDomain, DATA_API_TIMEOUT, STRIPE_WEBHOOK_ROUTE } from "./api";
import { Billing } from "./billing";
import { Compaction } from "./compaction";
import { Dashboard, type SesSender } from "./dashboard";
import { DeletionWorkflow } from "./deletion";
import { Events } from "./events";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import { Metering, metricsNamespace } from "./metering";
import { Observability } from "./observability";
import { StripePayments } from "./payments";
import { PRICE_VERSION_OUTPUT, PRICES_METADATA, type StackPrices, stackPrices } from "./prices";
import {
  PROXY_TABLE_ACCESS,
  PROXY_TIMEOUT,
  ProxyFunction,
  type ProxyFunctionProps,
  type ProxyIntegration,
  type ProxyTelemetry,
} from "./proxy";
import { MANAGED_INSTANCES, ProxyCapacity, type ProxyCompute } from "./proxy-compute";
import { RequestSizeRule } from "./request-size";
import { Retention } from "./retention";
import { Secrets, VENDORS, type Vendor } from "./secrets";
import { constructId, Store } from "./store";
import { Warehouse } from "./warehouse";

export interface DmtStackProps extends StackProps {
  domain?: CustomDomain;
  /** Billing exports' OpenMeter-compatible endpoint (context `dmt:openMeterUrl`); unset: Stripe only. */
  openMeterUrl?: string;
  /** The amounts Buy credits offers, whole dollars (context `dmt:stripeAmountsUsd`); unset: 10,25,100. */
  stripeAmountsUsd?: string;
  /** Keep the tables and the BYOK key when the stack is deleted (default true). */
  retainData?: boolean;
  logRetention?: RetentionDays;
  logLevel?: LogLevel;
  /** Stage-wide API Gateway throttling (default 1000 requests/s, burst 2000). */
  throttle?: { rateLimit: number; burstLimit: number };
  /** The authorizer's key cache: the revocation delay in AWS (default 5000 ms). */
  keyCacheMs?: number;
  /**
   * The most calls each vendor's proxy serves at once: one number for each, or per vendor (0 turns a
   * vendor off). Standard compute reserves it for the vendor's function (default 150 each); on managed
   * instances the vendors' caps add up to the shared function's environments at most (default 1,280
   * calls a vendor: 20 environments of 256 for the four), and a vendor at 0 is not served.
   */
  proxyReservedConcurrency?: number | Partial<Record<Vendor, number>>;
  /** Where the proxy functions run (default `standard`; lib/proxy-compute.ts). */
  proxyCompute?: ProxyCompute;
  /**
   * Managed instances: the proxy function's environments at least (default 3, one per Availability
   * Zone). One function serves every vendor there, so this is kept once for all of them (docs/aws.md).
   */
  proxyMinEnvironments?: number;
  /**
   * Concurrency set aside for the functions every request needs, so that busy proxies cannot throttle
   * them (defaults in `RESERVED_CONCURRENCY`).
   */
  reservedConcurrency?: Partial<Record<"authorizer" | "dataApi" | "dashboardApi", number>>;
  /**
   * How API Gateway reaches the proxy functions: their function URLs (default), or `lambda-stream`,
   * its Lambda proxy integration with response streaming (no public URL, no origin secret).
   */
  proxyIntegration?: ProxyIntegration;
  /** The origin secret version API Gateway sends (after a rotation); default the current one. */
  originSecretVersion?: string;
  /**
   * Buckets (names, or patterns with `*`) the data API may write bucket exports to, besides the
   * stack's own export bucket (docs/aws.md, "Bucket exports").
   */
  exportBuckets?: string[];
  /** Athena's scan limit per query in bytes (default 10 GiB). */
  athenaBytesScannedCutoff?: number;
  /** The deletion workflow's Athena scan limit per query in bytes (default 1 TiB). */
  deletionBytesScannedCutoff?: number;
  /**
   * A price override file (prices/README.md) the proxy functions charge with, read at synth (relative
   * to the current directory) and shipped in their bundles. Checked at synth: a bad file fails it.
   */
  priceOverrideFile?: string;
  /** The factor on every charged cost (default the override file's `markup`, else 1). */
  priceMarkup?: number;
  /** Cognito's mail through SES from this verified identity (default: Cognito's own sender, for trials). */
  ses?: SesSender;
  /** Subscribed by email to the topic every alarm notifies. */
  alarmEmail?: string;
  /** Create API Gateway's account-level CloudWatch role (default false: see lib/api.ts). */
  /**
   * An AWS WAF web ACL on the stage refusing bodies over their route's limit with the service's 413
   * (`lib/request-size.ts`); on unless `false` (WAF is billed per ACL, rule and request: the cost table).
   */
  requestSizeRule?: boolean;
  apiGatewayAccountRole?: boolean;
  /**
   * An OTLP/HTTP receiver for each proxied call's span and GenAI metrics (docs/telemetry.md): its base
   * URL, the encoding, and the name or ARN of a secret holding the headers (an API key).
   */
  telemetry?: { endpoint: string; protocol?: "http/protobuf" | "http/json"; headersSecret?: string };
}

/**
 * Reserved concurrency by default: the authorizer runs before every request (proxied calls included),
 * the data and dashboard APIs serve people and scripts. With the proxies' 4 × 150 that is 740 of the
 * default regional quota of 1,000, leaving Lambda's required 100 unreserved (README, "Deploy").
 */
export const RESERVED_CONCURRENCY = { authorizer: 100, dataApi: 20, dashboardApi: 20, proxy: 150 } as const;

/** The output key under which a table's physical name is published (the CLI reads these). */
export function tableOutputKey(name: TableName): string {
  return `Table${constructId(name)}`;
}

/** The whole service as one stack: one construct per concern, wired here. */
export class DmtStack extends Stack {
  readonly store: Store;
  readonly secrets: Secrets;
  readonly api: Api;
  readonly observability: Observability;
  readonly authorizer: DmtFunction;
  readonly dataApi: DmtFunction;
  /** The function serving each vendor: its own on standard compute, one shared on managed instances. */
  readonly proxies: Record<Vendor, ProxyFunction>;
  readonly warehouse: Warehouse;
  readonly deletion: DeletionWorkflow;
  readonly metering: Metering;
  readonly retention: Retention;
  readonly compaction: Compaction;
  readonly dashboard: Dashboard;
  readonly prices: StackPrices;
  readonly events: Events;
  /** The VPC and capacity provider of `managed-instances` compute; none with `standard`. */
  readonly proxyCapacity: ProxyCapacity | undefined;
  readonly billing: Billing;
  readonly payments: StripePayments;

  /** The proxy functions, each once. */
  get proxyFunctions(): ProxyFunction[] {
    return [...new Set(Object.values(this.proxies))];
  }

  constructor(scope: Construct, id: string, props: DmtStackProps = {}) {
    super(scope, id, props);
    // First: a bad price file fails the synth before anything is bundled.
    this.prices = stackPrices({ overrideFile: props.priceOverrideFile, markup: props.priceMarkup });
    this.templateOptions.metadata = {
      ...this.templateOptions.metadata,
      [PRICES_METADATA]: this.prices.metadata,
    };
    const removalPolicy = props.retainData === false ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN;
    const logRetention = props.logRetention ?? RetentionDays.ONE_MONTH;
    const defaults: LambdaDefaults = { logRetention, logLevel: props.logLevel ?? "info" };

    this.store = new Store(this, "Store", { removalPolicy });
    const functionUrls = (props.proxyIntegration ?? "function-url") === "function-url";
    this.secrets = new Secrets(this, "Secrets", { removalPolicy, originSecret: functionUrls });
    this.warehouse = new Warehouse(this, "Warehouse", {
      defaults,
      store: this.store,
      removalPolicy,
      ...(props.exportBuckets && { exportBuckets: props.exportBuckets }),
      ...(props.athenaBytesScannedCutoff !== undefined && {
        bytesScannedCutoffPerQuery: props.athenaBytesScannedCutoff,
      }),
      ...(props.deletionBytesScannedCutoff !== undefined && {
        deletionBytesScannedCutoffPerQuery: props.deletionBytesScannedCutoff,
      }),
    });

    this.authorizer = new DmtFunction(this, "Authorizer", {
      handler: "authorizer",
      description: "dmt: API Gateway REQUEST authorizer (service keys)",
      defaults,
      environment: { DMT_KEY_CACHE_MS: String(props.keyCacheMs ?? 5000) },
      reservedConcurrency: props.reservedConcurrency?.authorizer ?? RESERVED_CONCURRENCY.authorizer,
    });
    this.store.grant(this.authorizer.function, "keys", ["GetItem"]);
    this.store.grant(this.authorizer.function, "projects", ["GetItem"]);
    // Last-used tracking: the authorizer faces the internet, so it may update that one attribute only.
    this.store.grant(this.authorizer.function, "keys", ["UpdateItem"], {
      "ForAllValues:StringEquals": { "dynamodb:Attributes": [TABLES.keys.partitionKey, "lastUsedAt"] },
      StringEqualsIfExists: { "dynamodb:ReturnValues": ["NONE"] },
    });

    this.dataApi = new DmtFunction(this, "DataApi", {
      handler: "api",
      description: "dmt: data API (/api/v1)",
      defaults,
      // As long as its streaming integration (an export streams for up to 15 minutes).
      timeout: DATA_API_TIMEOUT,
      reservedConcurrency: props.reservedConcurrency?.dataApi ?? RESERVED_CONCURRENCY.dataApi,
      environment: {
        DMT_TABLE_RATELIMITS: this.store.tables.rateLimits.tableName,
        // GET /api/v1/transactions/{id} reads the dashboard's interaction index.
        DMT_TABLE_INTERACTIONS: this.store.tables.interactions.tableName,
        DMT_TABLE_BUDGETS: this.store.tables.budgets.tableName,
        DMT_TABLE_BUDGETCOUNTERS: this.store.tables.budgetCounters.tableName,
        DMT_METRICS_NAMESPACE: metricsNamespace(this),
      },
    });
    // The per-key rate limit: the same buckets the proxy functions take from.
    this.store.grant(this.dataApi.function, "rateLimits", ["GetItem", "UpdateItem"]);
    this.store.grant(this.dataApi.function, "interactions", ["GetItem"]);
    // GET /api/v1/budgets: the definitions and the current windows' counters, read only.
    this.store.grant(this.dataApi.function, "budgets", ["Query"]);
    this.store.grant(this.dataApi.function, "budgetCounters", ["GetItem"]);
    this.store.grantIndexQuery(this.dataApi.function, "budgetCounters");
    // An export's size before its query: the rollups' call counts of its days (core/export-estimate.ts).
    this.store.grant(this.dataApi.function, "usageRollups", ["Query"]);
    this.warehouse.connectExports(this.dataApi.function);
    this.deletion = new DeletionWorkflow(this, "Deletion", {
      defaults,
      userIdKey: this.secrets.userIdKey,
      store: this.store,
      warehouse: this.warehouse,
    });
    this.deletion.connectDataApi(this.dataApi.function);

    this.api = new Api(this, "Api", {
      authorizer: this.authorizer.function,
      dataApi: this.dataApi.function,
      logRetention,
      throttle: props.throttle ?? { rateLimit: 1000, burstLimit: 2000 },
      ...(props.apiGatewayAccountRole !== undefined && { accountRole: props.apiGatewayAccountRole }),
      ...(props.domain && { domain: props.domain }),
    });

    const reserved = props.proxyReservedConcurrency;
    const capOf = (vendor: Vendor) => (typeof reserved === "number" ? reserved : reserved?.[vendor]);
    const least = props.proxyMinEnvironments;
    if (least !== undefined && props.proxyCompute !== "managed-instances")
      throw new Error("dmt:proxyMinEnvironments applies to dmt:proxyCompute=managed-instances only.");
    this.proxyCapacity =
      props.proxyCompute === "managed-instances"
        ? new ProxyCapacity(this, "ProxyCapacity", { logRetention })
        : undefined;
    const telemetry = proxyTelemetry(this, props.telemetry);
    const proxyFunction = (id: string, vendors: Vendor[], settings: Partial<ProxyFunctionProps>) =>
      new ProxyFunction(this, id, {
        vendors,
        defaults,
        store: this.store,
        vendorKeys: this.secrets.vendorKeys,
        ...(this.secrets.originSecret && { originSecret: this.secrets.originSecret }),
        userIdKey: this.secrets.userIdKey,
        byokKey: this.secrets.byokKey,
        prices: this.prices,
        ...(telemetry && { telemetry }),
        ...settings,
      });
    const proxies = {} as Record<Vendor, ProxyFunction>;
    if (this.proxyCapacity) {
      // One function for every vendor: an environment's vCPU serves whichever vendor's calls come, so the
      // minimum environments are kept once, not per vendor (docs/aws.md, "Lambda Managed Instances").
      // A vendor capped at 0 is not served; the caps of the others add up to the environments at most.
      const served = VENDORS.filter((vendor) => capOf(vendor) !== 0);
      if (served.length === 0) throw new Error("dmt:proxyReservedConcurrency turns every vendor off.");
      const calls = served.reduce(
        (sum, vendor) =>
          sum +
          (capOf(vendor) ??
            MANAGED_INSTANCES.maxEnvironmentsPerVendor * MANAGED_INSTANCES.concurrencyPerEnvironment),
        0,
      );
      const shared = proxyFunction("Proxy", served, {
        managedInstances: {
          capacity: this.proxyCapacity,
          maxEnvironments: Math.ceil(calls / MANAGED_INSTANCES.concurrencyPerEnvironment),
          minEnvironments: least ?? MANAGED_INSTANCES.minEnvironments,
        },
      });
      for (const vendor of VENDORS) proxies[vendor] = shared;
    } else {
      for (const vendor of VENDORS) {
        proxies[vendor] = proxyFunction(`Proxy${constructId(vendor)}`, [vendor], {
          reservedConcurrency: capOf(vendor) ?? RESERVED_CONCURRENCY.proxy,
        });
      }
    }
    for (const vendor of VENDORS) {
      const proxy = proxies[vendor];
      const { originSecret } = this.secrets;
      this.api.addVendorProxy(
        vendor,
        proxy.url && originSecret
          ? {
              functionUrl: proxy.url.url,
              originSecret: this.secrets.originSecretReference(originSecret, props.originSecretVersion),
            }
          : proxy.fn.function,
      );
    }
    this.proxies = proxies;
    for (const proxy of this.proxyFunctions) this.warehouse.connectProducer(proxy.fn.function);
    this.dashboard = new Dashboard(this, "Dashboard", {
      defaults,
      store: this.store,
      warehouse: this.warehouse,
      byokKey: this.secrets.byokKey,
      logsBucket: this.warehouse.logsBucket,
      removalPolicy,
      logRetention,
      reservedConcurrency: props.reservedConcurrency?.dashboardApi ?? RESERVED_CONCURRENCY.dashboardApi,
      ...(props.ses && { ses: props.ses }),
    });
    this.api.addRootRoutes(this.dashboard.url);
    if (props.requestSizeRule !== false) new RequestSizeRule(this, "RequestSize", this.api.restApi);
    else
      Validations.of(this.api.restApi).acknowledge({
        id: "AwsSolutions-APIG3",
        reason:
          "The operator turned the request-size web ACL off (dmt:requestSizeRule=false); every method needs a service key checked by the authorizer, and the stage and each key are throttled.",
      });

    this.observability = new Observability(this, "Observability", {
      restApi: this.api.restApi,
      accessLogs: this.api.accessLogs,
      ...(props.alarmEmail !== undefined && { alarmEmail: props.alarmEmail }),
    });
    this.observability.addFunction("Authorizer", this.authorizer.function);
    this.observability.addFunction("DataApi", this.dataApi.function);
    this.observability.addFunction("DashboardApi", this.dashboard.api.function);
    for (const proxy of this.proxyFunctions) {
      const title = proxy.node.id;
      this.observability.addFunction(title, proxy.fn.function);
      this.observability.addProxy(title, proxy.fn.function, PROXY_TIMEOUT);
    }
    // The tables every proxied call writes: throttling there slows or fails calls.
    for (const [table, actions] of Object.entries(PROXY_TABLE_ACCESS) as [TableName, string[]][]) {
      if (actions.some((action) => /^(Put|Update|Delete)Item$/.test(action))) {
        this.observability.addTableThrottles(constructId(table), this.store.tables[table]);
      }
    }
    this.observability.addWarehouse({
      queue: this.warehouse.queue,
      deadLetterQueue: this.warehouse.deadLetterQueue,
      consumer: this.warehouse.consumer.function,
      producerLogs: this.proxyFunctions.map((proxy) => proxy.fn.logGroup),
    });
    this.observability.addFunction("WarehouseConsumer", this.warehouse.consumer.function);
    this.observability.addFunction("SpoolResender", this.warehouse.spoolResender.function);
    this.metering = new Metering(this, "Metering", {
      defaults,
      store: this.store,
      observability: this.observability,
      vendors: VENDORS,
    });
    this.observability.addFunction("CreditSweeper", this.metering.sweeper.function);
    this.observability.addDeletion(this.deletion.steps.function, this.deletion.stateMachine);
    this.observability.addPipe("DeletionRequests", this.deletion.pipe, this.deletion.pipeDeadLetterQueue);
    this.events = new Events(this, "Events", {
      defaults,
      store: this.store,
      secretsKey: this.secrets.byokKey,
    });
    // Every function that emits events publishes them on the bus; its rule takes them to the webhooks.
    for (const proxy of this.proxyFunctions) this.events.connectPublisher(proxy.fn.function);
    this.events.connectPublisher(this.dashboard.api.function);
    this.events.connectWebhookAdmin(this.dashboard.api.function);
    this.events.connectPublisher(this.deletion.steps.function);
    this.observability.addFunction("EventDelivery", this.events.delivery.function);
    this.observability.alarms.push(this.events.deadLetterAlarm);
    this.observability.addRule(
      "Webhooks",
      this.events.rule,
      this.events.bus,
      this.events.ruleDeadLetterQueue,
    );
    this.billing = new Billing(this, "Billing", {
      defaults,
      store: this.store,
      source: `dmt://${this.stackName}`,
      ...(props.openMeterUrl !== undefined && { openMeterUrl: props.openMeterUrl }),
    });
    this.billing.connectConsumer(this.warehouse.consumer.function, this.store);
    this.observability.addFunction("BillingSender", this.billing.sender.function);
    this.observability.alarms.push(this.billing.deadLetterAlarm);
    // Credits bought through Stripe: the webhook (its own function) and auto-recharge (the sweeper).
    this.payments = new StripePayments(this, "Payments", {
      secretKey: this.billing.stripeSecretKey,
      store: this.store,
      defaults,
      deployment: this.stackName,
      ...(props.stripeAmountsUsd !== undefined && { amountsUsd: props.stripeAmountsUsd }),
    });
    this.payments.connect(this.metering.sweeper.function, { scan: true });
    this.payments.connectDashboard(this.dashboard.api.function, this.dashboard.url);
    // Purchases and recharges raise credits.granted, a declined recharge credits.recharge_failed.
    this.events.connectPublisher(this.payments.webhook.function);
    this.events.connectPublisher(this.metering.sweeper.function);
    // `dmt credits recharge set` checks its amount against these, as the dashboard does.
    new CfnOutput(this, "StripeAmountsUsd", {
      value: props.stripeAmountsUsd ?? "10,25,100",
      description: "The amounts Buy credits offers, whole dollars (context dmt:stripeAmountsUsd)",
    });
    this.api.addStripeWebhook(this.payments.webhook.function);
    this.observability.addFunction("StripeWebhook", this.payments.webhook.function);
    this.retention = new Retention(this, "Retention", {
      defaults,
      store: this.store,
      warehouse: this.warehouse,
      observability: this.observability,
    });
    this.observability.addFunction("Retention", this.retention.fn.function);
    this.compaction = new Compaction(this, "Compaction", {
      defaults,
      store: this.store,
      warehouse: this.warehouse,
      observability: this.observability,
    });
    this.observability.addFunction("Compaction", this.compaction.fn.function);
    this.observability.completeAlarms();

    this.addOutputs();
  }

  private addOutputs(): void {
    new CfnOutput(this, "ApiUrl", { value: this.api.restApi.url, description: "Base URL of the service" });
    for (const [name, table] of Object.entries(this.store.tables) as [TableName, { tableName: string }][]) {
      new CfnOutput(this, tableOutputKey(name), {
        value: table.tableName,
        description: `DMT_TABLE_${name.toUpperCase()}`,
      });
    }
    for (const vendor of VENDORS) {
      new CfnOutput(this, `VendorKeySecret${constructId(vendor)}`, {
        value: this.secrets.vendorKeys[vendor].secretArn,
        description: `Secret holding the managed ${vendor} API key`,
      });
    }
    new CfnOutput(this, "ByokKeyArn", { value: this.secrets.byokKey.keyArn });
    if (this.secrets.originSecret) {
      new CfnOutput(this, "OriginSecretArn", {
        value: this.secrets.originSecret.secretArn,
        description: "Secret API Gateway sends to the proxy functions (rotation: docs/aws.md)",
      });
    }
    new CfnOutput(this, "WarehouseBucket", {
      value: this.warehouse.dataBucket.bucketName,
      description: "Parquet interaction records under interactions/project=<id>/dt=<day>/",
    });
    new CfnOutput(this, "ExportBucket", {
      value: this.warehouse.exportBucket.bucketName,
      description: "Bucket exports: dmt settings set --project <id> --export-bucket s3://<this>/<id>/",
    });
    new CfnOutput(this, "AthenaWorkGroup", { value: this.warehouse.workGroup.ref });
    new CfnOutput(this, "DeletionWorkGroup", { value: this.warehouse.deletionWorkGroup.ref });
    new CfnOutput(this, "WarehouseDatabase", { value: this.warehouse.database.ref });
    new CfnOutput(this, "RecordQueueUrl", { value: this.warehouse.queue.queueUrl });
    new CfnOutput(this, "DeadLetterQueueUrl", { value: this.warehouse.deadLetterQueue.queueUrl });
    new CfnOutput(this, "MeterQueueUrl", {
      value: this.billing.queue.queueUrl,
      description: "Billing exports' meter queue (dmt billing resend sends here)",
    });
    new CfnOutput(this, "StripeSecretKeyArn", {
      value: this.billing.stripeSecretKey.secretArn,
      description: "Secret to put the Stripe key billing exports send with in",
    });
    new CfnOutput(this, "StripeWebhookUrl", {
      value: `${this.api.restApi.url}${STRIPE_WEBHOOK_ROUTE}`,
      description: "Register in Stripe as the webhook endpoint (docs/billing.md)",
    });
    new CfnOutput(this, "StripeWebhookSecretArn", {
      value: this.payments.webhookSecret.secretArn,
      description: "Secret to put the Stripe webhook's signing secret (whsec_...) in",
    });
    new CfnOutput(this, "EventBusName", {
      value: this.events.bus.eventBusName,
      description: "EventBridge bus of the stack's events (source dmt, detail-type the event type)",
    });
    new CfnOutput(this, "WebhookQueueUrl", { value: this.events.queue.queueUrl });
    new CfnOutput(this, "DashboardName", { value: this.observability.dashboard.dashboardName });
    new CfnOutput(this, "AlarmTopicArn", {
      value: this.observability.topic.topicArn,
      description: "SNS topic every alarm notifies (going off and clearing): subscribe pagers or chat here",
      exportName: `${this.stackName}-AlarmTopicArn`,
    });
    new CfnOutput(this, PRICE_VERSION_OUTPUT, {
      value: this.prices.priceVersion,
      description: "Price version the proxy functions charge with (usage records' price_version)",
    });
  }
}

/** The proxy functions' OTLP receiver, its headers secret looked up by name or ARN (never created here). */
function proxyTelemetry(scope: Construct, telemetry: DmtStackProps["telemetry"]): ProxyTelemetry | undefined {
  if (!telemetry) return undefined;
  const { headersSecret, ...rest } = telemetry;
  if (headersSecret === undefined) return rest;
  const headers = headersSecret.startsWith("arn:")
    ? Secret.fromSecretCompleteArn(scope, "OtlpHeaders", headersSecret)
    : Secret.fromSecretNameV2(scope, "OtlpHeaders", headersSecret);
  return { ...rest, headers };
}
