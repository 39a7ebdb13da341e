import { type App, type Environment, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import type { SesSender } from "./dashboard";
import { EMAIL_PATTERN } from "./observability";
import { PROXY_INTEGRATIONS, type ProxyIntegration } from "./proxy";
import { PROXY_COMPUTES, type ProxyCompute } from "./proxy-compute";
import { VENDORS, type Vendor } from "./secrets";
import { DmtStack, type DmtStackProps } from "./stack";

/** Context keys (`cdk deploy -c dmt:domainName=api.example.com ...`, or `context` in cdk.json). */
export const CONTEXT = {
  stackName: "dmt:stackName",
  domainName: "dmt:domainName",
  certificateArn: "dmt:certificateArn",
  retainData: "dmt:retainData",
  /**
   * The most calls at once per vendor: `50` for each, or per vendor:
   * `{"openai":100,"gemini":0}` (0 turns a vendor off). Default 150 (standard), 1,280 (managed instances).
   */
  proxyReservedConcurrency: "dmt:proxyReservedConcurrency",
  /** `standard` (default) or `managed-instances`: where the proxy functions run (docs/aws.md). */
  proxyCompute: "dmt:proxyCompute",
  /** Managed instances: the proxy function's environments at least (default 3), one number for every vendor. */
  proxyMinEnvironments: "dmt:proxyMinEnvironments",
  /** Reserved concurrency of the authorizer (default 100): it runs before every request. */
  authorizerConcurrency: "dmt:authorizerConcurrency",
  /** Reserved concurrency of the data API (default 20). */
  dataApiConcurrency: "dmt:dataApiConcurrency",
  /** Reserved concurrency of the dashboard API (default 20). */
  dashboardApiConcurrency: "dmt:dashboardApiConcurrency",
  /** The version id `put-secret-value` printed when rotating the origin secret (docs/aws.md). */
  originSecretVersion: "dmt:originSecretVersion",
  /** More buckets the data API may export to: `acme-exports,team-*-exports`, or a list in cdk.json. */
  exportBuckets: "dmt:exportBuckets",
  /** Athena's scan limit per query in bytes (at least 10 MB; default 10 GiB). */
  athenaBytesScannedCutoff: "dmt:athenaBytesScannedCutoff",
  /** The deletion workflow's Athena scan limit per query in bytes (at least 10 MB; default 1 TiB). */
  deletionBytesScannedCutoff: "dmt:deletionBytesScannedCutoff",
  /** A price override file for the proxy functions (prices/README.md), relative to where cdk runs. */
  priceOverride: "dmt:priceOverride",
  /** The factor on every charged cost, such as 1.1. */
  priceMarkup: "dmt:priceMarkup",
  /** An email address subscribed to the alarm topic (SNS asks it to confirm first). */
  alarmEmail: "dmt:alarmEmail",
  /** An identity verified in SES (`no-reply@example.com`, or `example.com`) that Cognito mails from. */
  sesIdentity: "dmt:sesIdentity",
  /** `function-url` (default) or `lambda-stream`: how API Gateway reaches the proxy functions. */
  proxyIntegration: "dmt:proxyIntegration",
  /** `true`: create API Gateway's account-level CloudWatch role (once per account and region). */
  apiGatewayAccountRole: "dmt:apiGatewayAccountRole",
  /** `false`: no AWS WAF web ACL answering bodies over a route's limit with our 413 (docs/aws.md). */
  requestSizeRule: "dmt:requestSizeRule",
  /** An OTLP/HTTP receiver's base URL for each proxied call's span and metrics (docs/telemetry.md). */
  otlpEndpoint: "dmt:otlpEndpoint",
  /** `http/protobuf` (default) or `http/json`. */
  otlpProtocol: "dmt:otlpProtocol",
  /** The name or ARN of a secret whose value is the OTLP headers (`x-api-key=...`), if the receiver needs any. */
  otlpHeadersSecret: "dmt:otlpHeadersSecret",
  /** An OpenMeter-compatible endpoint billing exports post CloudEvents to (docs/billing-exports.md). */
  openMeterUrl: "dmt:openMeterUrl",
  /** The amounts Buy credits offers, in whole dollars (`10,25,100`, the default; docs/billing.md). */
  stripeAmountsUsd: "dmt:stripeAmountsUsd",
} as const;

/**
 * The CDK app: the stack from context, checked by cdk-nag's AwsSolutions pack (synthesis fails on any
 * finding that is not acknowledged next to its resource). `bin/app.ts` and the tests both use this;
 * `env` is where `cdk` deploys (the tests name regions of their own).
 */
export function defineApp(
  app: App,
  env: Environment = { account: process.env.CDK_DEFAULT_ACCOUNT, region: process.env.CDK_DEFAULT_REGION },
): DmtStack {
  const context = (key: string): unknown => app.node.tryGetContext(key);
  const domainName = context(CONTEXT.domainName);
  const certificateArn = context(CONTEXT.certificateArn);
  if ((domainName === undefined) !== (certificateArn === undefined)) {
    throw new Error(`Set both ${CONTEXT.domainName} and ${CONTEXT.certificateArn}, or neither.`);
  }
  const retainData = context(CONTEXT.retainData);
  const reserved = context(CONTEXT.proxyReservedConcurrency);
  const minEnvironments = context(CONTEXT.proxyMinEnvironments);
  const originSecretVersion = context(CONTEXT.originSecretVersion);
  const exportBuckets = context(CONTEXT.exportBuckets);
  const athenaCutoff = context(CONTEXT.athenaBytesScannedCutoff);
  const deletionCutoff = context(CONTEXT.deletionBytesScannedCutoff);
  const priceOverride = context(CONTEXT.priceOverride);
  const priceMarkup = context(CONTEXT.priceMarkup);
  const alarmEmail = context(CONTEXT.alarmEmail);
  const sesIdentity = context(CONTEXT.sesIdentity);
  const proxyIntegration = context(CONTEXT.proxyIntegration);
  const accountRole = context(CONTEXT.apiGatewayAccountRole);
  const requestSizeRule = context(CONTEXT.requestSizeRule);
  const openMeterUrl = context(CONTEXT.openMeterUrl);
  const stripeAmounts = context(CONTEXT.stripeAmountsUsd);
  const telemetry = parseTelemetry(
    context(CONTEXT.otlpEndpoint),
    context(CONTEXT.otlpProtocol),
    context(CONTEXT.otlpHeadersSecret),
  );
  const proxyCompute = context(CONTEXT.proxyCompute);
  const reservedConcurrency = Object.fromEntries(
    (
      [
        ["authorizer", CONTEXT.authorizerConcurrency],
        ["dataApi", CONTEXT.dataApiConcurrency],
        ["dashboardApi", CONTEXT.dashboardApiConcurrency],
      ] as const
    )
      .filter(([, key]) => context(key) !== undefined)
      .map(([name, key]) => [name, parseReserved(key, context(key))]),
  );
  const stack = new DmtStack(app, String(context(CONTEXT.stackName) ?? "Dmt"), {
    description: "dmt: metering gateway for language-model vendors",
    env,
    retainData: !(retainData === false || retainData === "false"),
    ...(reserved !== undefined && {
      proxyReservedConcurrency: parseConcurrency(CONTEXT.proxyReservedConcurrency, reserved, 0),
    }),
    ...(minEnvironments !== undefined && {
      proxyMinEnvironments: parseMinEnvironments(minEnvironments),
    }),
    ...(originSecretVersion !== undefined && { originSecretVersion: String(originSecretVersion) }),
    ...(exportBuckets !== undefined && { exportBuckets: parseBucketList(exportBuckets) }),
    ...(athenaCutoff !== undefined && {
      athenaBytesScannedCutoff: parseByteCount(CONTEXT.athenaBytesScannedCutoff, athenaCutoff),
    }),
    ...(deletionCutoff !== undefined && {
      deletionBytesScannedCutoff: parseByteCount(CONTEXT.deletionBytesScannedCutoff, deletionCutoff),
    }),
    ...(priceOverride !== undefined && { priceOverrideFile: String(priceOverride) }),
    ...(priceMarkup !== undefined && { priceMarkup: parseMarkup(priceMarkup) }),
    ...(alarmEmail !== undefined && { alarmEmail: parseEmail(alarmEmail) }),
    ...(sesIdentity !== undefined && { ses: parseSesIdentity(sesIdentity) }),
    ...(proxyIntegration !== undefined && { proxyIntegration: parseProxyIntegration(proxyIntegration) }),
    ...(proxyCompute !== undefined && { proxyCompute: parseProxyCompute(proxyCompute) }),
    reservedConcurrency,
    apiGatewayAccountRole: accountRole === true || accountRole === "true",
    requestSizeRule: parseOnOff(CONTEXT.requestSizeRule, requestSizeRule, true),
    ...(telemetry && { telemetry }),
    ...(openMeterUrl !== undefined && { openMeterUrl: parseOpenMeterUrl(openMeterUrl) }),
    ...(stripeAmounts !== undefined && { stripeAmountsUsd: String(stripeAmounts) }),
    ...(domainName !== undefined && {
      domain: { name: String(domainName), certificateArn: String(certificateArn) },
    }),
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return stack;
}

function parseProxyIntegration(value: unknown): ProxyIntegration {
  const integration = PROXY_INTEGRATIONS.find((name) => name === value);
  if (integration === undefined) {
    throw new Error(
      `${CONTEXT.proxyIntegration}: ${JSON.stringify(value)} is not one of ${PROXY_INTEGRATIONS.join(", ")}.`,
    );
  }
  return integration;
}

/** The OTLP receiver from context: checked here as the functions check their variables. */
function parseTelemetry(
  endpoint: unknown,
  protocol: unknown,
  headersSecret: unknown,
): DmtStackProps["telemetry"] | undefined {
  if (endpoint === undefined) {
    if (protocol !== undefined || headersSecret !== undefined) {
      throw new Error(
        `${CONTEXT.otlpProtocol} and ${CONTEXT.otlpHeadersSecret} need ${CONTEXT.otlpEndpoint}.`,
      );
    }
    return undefined;
  }
  if (typeof endpoint !== "string" || !/^https?:\/\/[^\s/?#]+(\/[^\s?#]*)?$/.test(endpoint)) {
    throw new Error(`${CONTEXT.otlpEndpoint}: ${JSON.stringify(endpoint)} is not an http or https URL.`);
  }
  if (protocol !== undefined && protocol !== "http/protobuf" && protocol !== "http/json") {
    throw new Error(
      `${CONTEXT.otlpProtocol}: ${JSON.stringify(protocol)} is not one of http/protobuf, http/json.`,
    );
  }
  if (headersSecret !== undefined && (typeof headersSecret !== "string" || headersSecret.trim() === "")) {
    throw new Error(`${CONTEXT.otlpHeadersSecret}: give a secret's name or ARN.`);
  }
  return {
    endpoint,
    ...(protocol !== undefined && { protocol }),
    ...(headersSecret !== undefined && { headersSecret }),
  };
}

function parseProxyCompute(value: unknown): ProxyCompute {
  const compute = PROXY_COMPUTES.find((name) => name === value);
  if (compute === undefined) {
    throw new Error(
      `${CONTEXT.proxyCompute}: ${JSON.stringify(value)} is not one of ${PROXY_COMPUTES.join(", ")}.`,
    );
  }
  return compute;
}

/** Executions set aside: a whole number of at least 1 (0 would throttle every request); text from the command line. */
/** `true` or `false` (as the command line gives them, strings); absent: `fallback`; else the synth fails. */
function parseOnOff(key: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (value === true || value === "true") return true;
  if (value === false || value === "false") return false;
  throw new Error(`${key} must be true or false, not ${JSON.stringify(value)}.`);
}

function parseReserved(key: string, value: unknown): number {
  const count = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof count !== "number" || !Number.isInteger(count) || count < 1) {
    throw new Error(`${key}: ${JSON.stringify(value)} is not a whole number >= 1.`);
  }
  return count;
}

/** A hostname of at least two labels, such as example.com. */
const DOMAIN_PATTERN = /^(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/i;

/** An address is the sender itself; a domain sends as no-reply@ that domain. */
function parseSesIdentity(value: unknown): SesSender {
  if (typeof value === "string" && EMAIL_PATTERN.test(value)) return { fromEmail: value };
  if (typeof value === "string" && DOMAIN_PATTERN.test(value)) {
    return { fromEmail: `no-reply@${value}`, verifiedDomain: value };
  }
  throw new Error(
    `${CONTEXT.sesIdentity}: ${JSON.stringify(value)} is neither an email address nor a domain (an identity verified in SES).`,
  );
}

function parseEmail(value: unknown): string {
  if (typeof value !== "string" || !EMAIL_PATTERN.test(value)) {
    throw new Error(`${CONTEXT.alarmEmail}: ${JSON.stringify(value)} is not an email address.`);
  }
  return value;
}

/** Bucket names or patterns: comma-separated text from the command line, or a list in cdk.json. */
function parseBucketList(value: unknown): string[] {
  const items = typeof value === "string" ? value.split(",") : value;
  if (!Array.isArray(items) || !items.every((item) => typeof item === "string")) {
    throw new Error(`${CONTEXT.exportBuckets}: give bucket names separated by commas, or a list of names.`);
  }
  // The warehouse checks each name.
  return items.map((item) => item.trim()).filter((item) => item !== "");
}

/** A number; from the command line it arrives as text (the stack checks the range, as the functions do). */
function parseMarkup(value: unknown): number {
  const markup = typeof value === "string" && /^\d+(\.\d+)?$/.test(value) ? Number(value) : value;
  if (typeof markup !== "number" || !Number.isFinite(markup)) {
    throw new Error(`${CONTEXT.priceMarkup}: ${JSON.stringify(value)} is not a number such as 1.1.`);
  }
  return markup;
}

/** Bytes as a whole number; from the command line it arrives as text (the warehouse checks the range). */
function parseByteCount(key: string, value: unknown): number {
  const bytes = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof bytes !== "number" || !Number.isSafeInteger(bytes)) {
    throw new Error(`${key}: ${JSON.stringify(value)} is not a whole number of bytes.`);
  }
  return bytes;
}

/**
 * The managed-instance proxy's environments at least: one number, since one function serves every
 * vendor there (an object per vendor, which earlier versions took, is refused saying so).
 */
function parseMinEnvironments(value: unknown): number {
  const parsed = parseConcurrency(CONTEXT.proxyMinEnvironments, value, 1);
  if (typeof parsed !== "number") {
    throw new Error(
      `${CONTEXT.proxyMinEnvironments}: one number for the proxy function every vendor shares on managed instances, not one per vendor (${JSON.stringify(value)}).`,
    );
  }
  return parsed;
}

/** A whole number of at least `least` for every proxy, or per vendor (`{"openai":200}`), named `key`. */
function parseConcurrency(
  key: string,
  value: unknown,
  least: number,
): number | Partial<Record<Vendor, number>> {
  const count = (n: unknown): number => {
    if (typeof n !== "number" || !Number.isInteger(n) || n < least) {
      throw new Error(`${key}: ${JSON.stringify(n)} is not a whole number >= ${least}.`);
    }
    return n;
  };
  let parsed = value;
  if (typeof value === "string") {
    try {
      parsed = JSON.parse(value);
    } catch {
      return count(value);
    }
  }
  if (typeof parsed !== "object" || parsed === null) return count(parsed);
  const perVendor: Partial<Record<Vendor, number>> = {};
  for (const [vendor, n] of Object.entries(parsed)) {
    if (!(VENDORS as readonly string[]).includes(vendor)) {
      throw new Error(`${key}: '${vendor}' is not one of ${VENDORS.join(", ")}.`);
    }
    perVendor[vendor as Vendor] = count(n);
  }
  return perVendor;
}

function parseOpenMeterUrl(value: unknown): string {
  const text = String(value);
  if (!/^https:\/\/[^\s/?#]+(\/[^\s?#]*)?$/.test(text)) {
    throw new Error(`${CONTEXT.openMeterUrl}: ${JSON.stringify(value)} is not an https URL.`);
  }
  return text;
}
