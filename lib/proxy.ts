import { Duration } from "aws-cdk-lib";
import type { IKey } from "aws-cdk-lib/aws-kms";
import { type FunctionUrl, FunctionUrlAuthType, InvokeMode } from "aws-cdk-lib/aws-lambda";
import type { ISecret } from "aws-cdk-lib/aws-secretsmanager";
import { Construct } from "constructs";
import type { TableName } from "../lambda/adapters/dynamodb/tables";
import { vendorKeySecretVariable } from "../lambda/handlers/runtime/config";
import { DmtFunction, type LambdaDefaults } from "./lambda-defaults";
import { metricsNamespace } from "./metering";
import type { StackPrices } from "./prices";
import { MANAGED_INSTANCES, type ProxyCapacity } from "./proxy-compute";
import type { Vendor } from "./secrets";
import type { Store } from "./store";

/**
 * How API Gateway reaches the proxy functions: `function-url` (the default) over HTTP_PROXY to each
 * function's public URL, with the origin secret; `lambda-stream` through API Gateway's Lambda proxy
 * integration with response streaming (InvokeWithResponseStream): no URL, no origin secret, for
 * accounts whose guardrails refuse public function URLs.
 */
export const PROXY_INTEGRATIONS = ["function-url", "lambda-stream"] as const;
export type ProxyIntegration = (typeof PROXY_INTEGRATIONS)[number];

/** The longest a proxied call may run: the streaming integration's timeout, and the function's. */
export const PROXY_TIMEOUT = Duration.minutes(15);

/**
 * The store access of a proxy call: the caller's key and project, credit holds and their settlement
 * in the ledger, rate-limit buckets, idempotency records, the project's own vendor keys (BYOK), the
 * alert rules (read, fired once per crossing with conditional updates), and the project's price plan
 * (read per key-cache period).
 */
export const PROXY_TABLE_ACCESS: Partial<Record<TableName, string[]>> = {
  keys: ["GetItem"],
  projects: ["GetItem"],
  // A hold is an item of its own, deleted once resolved (adapters/dynamodb/hold-items.ts).
  credits: ["GetItem", "PutItem", "UpdateItem", "DeleteItem"],
  ledger: ["GetItem", "PutItem"],
  rateLimits: ["GetItem", "UpdateItem"],
  idempotency: ["GetItem", "PutItem", "UpdateItem", "DeleteItem"],
  vendorKeys: ["GetItem"],
  budgets: ["Query"],
  budgetCounters: ["GetItem", "PutItem", "UpdateItem", "DeleteItem"],
  alertRules: ["Query", "UpdateItem"],
  plans: ["GetItem"],
  // Whether a project's webhooks name usage.recorded (cached): the event goes on the bus only then.
  webhooks: ["Query"],
};

export interface ProxyFunctionProps {
  /** The vendors it serves: one on standard compute, all on managed instances (lib/stack.ts). */
  vendors: Vendor[];
  defaults: LambdaDefaults;
  store: Store;
  /** The managed keys: the function may read those of its own vendors, and nobody else's. */
  vendorKeys: Record<Vendor, ISecret>;
  /** The function-URL integration's shared secret; without it, no URL (`lambda-stream`). */
  originSecret?: ISecret;
  /** Keys the user-id hash of level `none`. */
  userIdKey: ISecret;
  /** Unwraps the data keys of customers' own vendor keys (BYOK). */
  byokKey: IKey;
  /** The deployment's price override and markup, which the function's metering loads at cold start. */
  prices: StackPrices;
  /** Standard compute: concurrency set aside for (and capping) the function. */
  reservedConcurrency?: number;
  /** Where each call's span and metrics go (docs/telemetry.md); absent: telemetry off. */
  telemetry?: ProxyTelemetry;
  /** Managed instances: the capacity provider, and the function's environments at most and at least. */
  managedInstances?: { capacity: ProxyCapacity; maxEnvironments: number; minEnvironments?: number };
}

/** The OTLP/HTTP receiver of the proxy functions: usually an AWS Distro for OpenTelemetry collector. */
export interface ProxyTelemetry {
  /** Base URL (`/v1/traces` and `/v1/metrics` are added), as `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  endpoint: string;
  protocol?: "http/protobuf" | "http/json";
  /** A secret whose value is an `OTEL_EXPORTER_OTLP_HEADERS` value (an API key, kept out of the template). */
  headers?: ISecret;
}

/**
 * Standard compute's memory: what the proxy's own CPU needs (bench/proxy-cpu.ts measures it; docs/aws.md,
 * "The proxy functions' memory"). Duration is billed per GB-second, nearly all of it waiting on the vendor.
 */
export const PROXY_MEMORY_MB = 512;

/**
 * A proxy function (`lambda/handlers/proxy.ts`) of one vendor or several, given an origin secret behind
 * a function URL that streams. The URL has no IAM auth: API Gateway's HTTP_PROXY integration cannot sign its
 * requests, so the function refuses every request that lacks the origin secret instead (docs/aws.md).
 * Without one, API Gateway invokes the function itself and it has no URL.
 */
export class ProxyFunction extends Construct {
  readonly fn: DmtFunction;
  readonly url: FunctionUrl | undefined;

  constructor(scope: Construct, id: string, props: ProxyFunctionProps) {
    super(scope, id);
    // Lambda cannot take a capacity provider off a function, only change it: a function of each compute
    // has its own id, so that switching `dmt:proxyCompute` replaces the function instead of failing.
    this.fn = new DmtFunction(this, props.managedInstances ? "ManagedInstancesFunction" : "Function", {
      handler: "proxy",
      description: `dmt: ${props.vendors.join(", ")} proxy (streaming, behind the API)`,
      defaults: props.defaults,
      environment: {
        DMT_VENDORS: props.vendors.join(","),
        DMT_PROXY_COMPUTE: props.managedInstances ? "managed-instances" : "standard",
        ...Object.fromEntries(
          props.vendors.map((vendor) => [
            vendorKeySecretVariable(vendor),
            props.vendorKeys[vendor].secretArn,
          ]),
        ),
        DMT_BYOK_KEY_ARN: props.byokKey.keyArn,
        DMT_USER_ID_KEY_SECRET_ARN: props.userIdKey.secretArn,
        DMT_METRICS_NAMESPACE: metricsNamespace(this),
        ...props.prices.environment,
      },
      ...(Object.keys(props.prices.bundledFiles).length > 0 && { bundledFiles: props.prices.bundledFiles }),
      timeout: PROXY_TIMEOUT,
      memorySize: props.managedInstances ? MANAGED_INSTANCES.memoryMiB : PROXY_MEMORY_MB,
      // Managed instances cap a function by its environments, not by reserved concurrency.
      ...(props.reservedConcurrency !== undefined &&
        !props.managedInstances && { reservedConcurrency: props.reservedConcurrency }),
    });
    const fn = this.fn.function;
    if (props.managedInstances) {
      const { capacity, maxEnvironments, minEnvironments } = props.managedInstances;
      capacity.addProxy(fn, maxEnvironments, minEnvironments);
    }
    // The handler takes function-URL events with the secret when it knows one, API Gateway's otherwise.
    if (props.originSecret) {
      fn.addEnvironment("DMT_ORIGIN_SECRET_ARN", props.originSecret.secretArn);
      props.originSecret.grantRead(fn);
    }
    this.url = props.originSecret
      ? fn.addFunctionUrl({ authType: FunctionUrlAuthType.NONE, invokeMode: InvokeMode.RESPONSE_STREAM })
      : undefined;
    for (const vendor of props.vendors) props.vendorKeys[vendor].grantRead(fn);
    props.userIdKey.grantRead(fn);
    for (const [table, actions] of Object.entries(PROXY_TABLE_ACCESS) as [TableName, string[]][]) {
      props.store.grant(fn, table, actions);
    }
    // The charges noted on open holds (a budget alert reads a window's spend): the holds' index.
    props.store.grantIndexQuery(fn, "credits");
    props.store.grantIndexQuery(fn, "budgetCounters");
    // Reads vendor keys only: kms:Decrypt, never GenerateDataKey (the CLI writes them).
    props.byokKey.grantDecrypt(fn);
    if (props.telemetry) {
      fn.addEnvironment("OTEL_EXPORTER_OTLP_ENDPOINT", props.telemetry.endpoint);
      fn.addEnvironment("OTEL_EXPORTER_OTLP_PROTOCOL", props.telemetry.protocol ?? "http/protobuf");
      fn.addEnvironment("OTEL_SERVICE_NAME", "dmt");
      if (props.telemetry.headers) {
        fn.addEnvironment("DMT_OTLP_HEADERS_SECRET_ARN", props.telemetry.headers.secretArn);
        props.telemetry.headers.grantRead(fn);
      }
    }
  }
}
