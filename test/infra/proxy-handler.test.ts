import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finished } from "node:stream/promises";
import type { Context } from "aws-lambda";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { DynamoWebhooks } from "../../lambda/adapters/dynamodb/events";
import { type TableNames, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../../lambda/adapters/dynamodb/vendor-keys";
import { createKmsClient, KmsKeyWrapper } from "../../lambda/adapters/kms/key-wrapper";
import { SPOOL_PREFIX } from "../../lambda/adapters/sqs/spool";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { callMetrics, vendorApps } from "../../lambda/compose/proxy";
import { PendingWork, type ProxyHooks } from "../../lambda/core/call";
import type { EventType } from "../../lambda/core/cloudevent";
import type { CreditBalance } from "../../lambda/core/credits";
import { DecryptionError, openSecret, sealSecret } from "../../lambda/core/crypto";
import { errors } from "../../lambda/core/errors";
import { silentLogger } from "../../lambda/core/logger";
import { vendorKeyContext } from "../../lambda/core/vendor-keys";
import type { createProxyHandler as CreateProxyHandler } from "../../lambda/handlers/proxy";
import {
  contextHeader,
  grantedContext,
  refusalContext,
} from "../../lambda/handlers/runtime/authorizer-context";
import { parseBaseConfig, parseProxyConfig } from "../../lambda/handlers/runtime/config";
import { directCallRefused, ORIGIN_SECRET_HEADER } from "../../lambda/handlers/runtime/origin";
import { lambdaTelemetry } from "../../lambda/handlers/runtime/telemetry";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { type SqsStandIn, startSqsStandIn } from "../support/reliability-sqs";
import {
  CollectedResponse,
  functionUrlEvent,
  gatewayProxyEvent,
  installStreamingRuntime,
  invokeStreaming,
  type SecretsEndpoint,
  type StreamingHandler,
  startSecretsEndpoint,
  type UrlRequest,
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

const ORIGIN_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:OriginSecret-abc123";
const KEY_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:VendorKeyOpenai-abc123";
const ORIGIN = "Q2x0Zk1hbmFnZWRPcmlnaW5TZWNyZXRWYWx1ZTEyMzQ1Njc4";
const MANAGED_KEY = "sk-managed-openai";
const SERVICE_KEY = `dmt_${"a".repeat(16)}_${"B".repeat(43)}`;
const BYOK_KEY_ARN = "arn:aws:kms:eu-west-1:123456789012:key/0f0e0d0c-0b0a-0908-0706-050403020100";
const BUCKET = "dmt-warehouse-data";
const REGION = "eu-west-1";

const dataDir = mkdtempSync(join(tmpdir(), "dmt-proxy-handler-"));
const tables: TableNames = tableNames({}, "proxy-handler-");
let simulator: Simulator;
let secrets: SecretsEndpoint;
let dynamo: EmbeddedDynamo;
let sqs: SqsStandIn;
let s3: S3StandIn;
let kms: KmsStandIn;
let bus: EventBridgeStandIn;
let credits: DynamoCredits;
let vendorKeys: DynamoVendorKeys;
let handler: StreamingHandler;
let createProxyHandler: typeof CreateProxyHandler;

// The handler reads its configuration at import, as at a Lambda cold start: set it first.
beforeAll(async () => {
  simulator = await startSimulator();
  secrets = await startSecretsEndpoint();
  dynamo = await startEmbeddedDynamo(dataDir);
  sqs = await startSqsStandIn();
  s3 = await startS3StandIn(REGION);
  kms = await startKmsStandIn();
  bus = await startEventBridgeStandIn({ region: REGION });
  Object.assign(process.env, {
    DMT_VENDORS: "openai",
    DMT_EVENT_BUS_NAME: "dmt-events",
    DMT_EVENTBRIDGE_ENDPOINT: bus.url,
    DMT_UPSTREAM_URL_OPENAI: simulator.origins.openai,
    DMT_SECRETS_ENDPOINT: secrets.url,
    DMT_ORIGIN_SECRET_ARN: ORIGIN_ARN,
    DMT_USER_ID_KEY_SECRET_ARN: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:dmt-user-id-key",
    DMT_VENDOR_KEY_SECRET_ARN_OPENAI: KEY_ARN,
    // Every call reads the secrets again, so a test sees a change at once.
    DMT_SECRET_CACHE_MS: "0",
    DMT_LOG_LEVEL: "silent",
    DMT_METRICS_NAMESPACE: "dmt/ProxyHandlerTest",
    // Metering, as the stack configures it, over local stand-ins.
    ...Object.fromEntries(
      Object.entries(tables).map(([name, table]) => [`DMT_TABLE_${name.toUpperCase()}`, table]),
    ),
    DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
    DMT_KEY_CACHE_MS: "0",
    DMT_BYOK_KEY_ARN: BYOK_KEY_ARN,
    DMT_KMS_ENDPOINT: kms.url,
    DMT_QUEUE_URL: `${sqs.url}/123456789012/records`,
    DMT_SQS_ENDPOINT: sqs.url,
    DMT_WAREHOUSE_BUCKET: BUCKET,
    DMT_S3_ENDPOINT: s3.url,
    AWS_REGION: REGION,
    AWS_ACCESS_KEY_ID: TEST_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: TEST_CREDENTIALS.secretAccessKey,
  });
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  await ensureTables(db, tables);
  credits = new DynamoCredits(db, tables);
  vendorKeys = new DynamoVendorKeys(
    db,
    tables,
    new KmsKeyWrapper(createKmsClient({ endpoint: kms.url }), BYOK_KEY_ARN),
  );
  await credits.grant("acme", 10_000_000, "test");
  installStreamingRuntime();
  const module = await import("../../lambda/handlers/proxy");
  handler = module.handler as unknown as StreamingHandler;
  createProxyHandler = module.createProxyHandler;
});

afterAll(async () => {
  await simulator?.close();
  await secrets?.close();
  await sqs?.close();
  await s3?.close();
  await kms?.close();
  await bus?.close();
  await dynamo?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

beforeEach(() => {
  simulator.reset();
  simulator.setChunkDelay(0);
  secrets.reads.length = 0;
  secrets.failing = false;
  secrets.secrets.clear();
  secrets.secrets.set(ORIGIN_ARN, { AWSCURRENT: ORIGIN });
  secrets.secrets.set(KEY_ARN, { AWSCURRENT: MANAGED_KEY });
});

const identity = grantedContext({
  projectId: "acme",
  keyId: "a".repeat(16),
  tier: "pro",
  rateLimit: { rpm: 600, burst: 1000 },
  store: "full",
});

/** The headers API Gateway's integration adds: the origin secret and the authorizer's context. */
function fromApi(
  context: Record<string, string | number> = identity,
  origin = ORIGIN,
): Record<string, string> {
  return {
    authorization: `Bearer ${SERVICE_KEY}`,
    [ORIGIN_SECRET_HEADER]: origin,
    ...Object.fromEntries(
      Object.entries(context).map(([field, value]) => [contextHeader(field), String(value)]),
    ),
  };
}

const chatBody = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello" }], ...extra });

function chat(headers: Record<string, string>, extra: Record<string, unknown> = {}): UrlRequest {
  return {
    method: "POST",
    path: "/openai/v1/chat/completions",
    headers: { authorization: `Bearer ${SERVICE_KEY}`, "content-type": "application/json", ...headers },
    body: chatBody(extra),
  };
}

const invoke = (request: UrlRequest) => invokeStreaming(handler, functionUrlEvent(request));

function expectError(response: CollectedResponse, status: number, body: unknown): void {
  expect(response.prelude?.statusCode).toBe(status);
  expect(response.prelude?.headers["content-type"]).toBe("application/json");
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
    expect(response.prelude?.headers[name.toLowerCase()] ?? response.prelude?.headers[name], name).toBe(
      value,
    );
  }
  expect(response.json()).toEqual(body);
}

describe("proxy handler: direct calls to the function URL", () => {
  it("refuses a call without the origin secret before any work", async () => {
    // No authorizer context and a valid chat body: past the origin check this would reach the app.
    const response = await invoke(chat({}));
    expectError(response, 403, directCallRefused().toBody());
    expect(simulator.requests).toEqual([]);
    // Only the origin secret was read: not even the managed key.
    expect(new Set(secrets.reads.map((r) => r.secretId))).toEqual(new Set([ORIGIN_ARN]));
  });

  it("refuses a wrong origin secret of any length, with the authorizer's context forged", async () => {
    const wrong = [
      "",
      "x",
      `${ORIGIN}x`,
      ORIGIN.slice(0, -1),
      `${ORIGIN.slice(0, -1)}Z`,
      ORIGIN.toLowerCase(),
    ];
    for (const origin of wrong) {
      const response = await invoke(chat(fromApi(identity, origin)));
      expectError(response, 403, directCallRefused().toBody());
    }
    expect(simulator.requests).toEqual([]);
    expect(secrets.reads.some((r) => r.secretId === KEY_ARN)).toBe(false);
  });

  it("accepts the previous origin secret during a rotation, and nothing older", async () => {
    secrets.secrets.set(ORIGIN_ARN, { AWSCURRENT: `${ORIGIN}new`, AWSPREVIOUS: ORIGIN });
    const health = { path: "/openai/health" };
    expect((await invoke({ ...health, headers: fromApi() })).prelude?.statusCode).toBe(200);
    expect(
      (await invoke({ ...health, headers: fromApi(identity, `${ORIGIN}new`) })).prelude?.statusCode,
    ).toBe(200);
    expect((await invoke({ ...health, headers: fromApi(identity, "older") })).prelude?.statusCode).toBe(403);
  });

  it("refuses everything when the origin secret has no value", async () => {
    secrets.secrets.delete(ORIGIN_ARN);
    expectError(
      await invoke({ path: "/openai/health", headers: fromApi() }),
      403,
      directCallRefused().toBody(),
    );
  });
});

describe("proxy handler: calls through the API", () => {
  it("streams a chat completion from the upstream, with the managed key", async () => {
    // Paced upstream chunks, so that buffering anywhere would show as fewer writes.
    simulator.setChunkDelay(10);
    const response = await invoke(chat(fromApi(), { stream: true }));
    expect(response.prelude?.statusCode).toBe(200);
    expect(response.prelude?.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(response.prelude?.headers["x-content-type-options"]).toBe("nosniff");
    const text = response.text();
    expect(text).toMatch(/^data: \{/);
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    // Streamed: the body reached the runtime in several writes, not as one buffered piece.
    expect(response.chunks.length).toBeGreaterThan(2);

    expect(simulator.requests).toHaveLength(1);
    const upstream = simulator.requests[0];
    expect(upstream?.path).toBe("/v1/chat/completions");
    expect(upstream?.headers.authorization).toBe(`Bearer ${MANAGED_KEY}`);
    // Neither the origin secret nor the context headers nor the service key go to the vendor.
    expect(Object.keys(upstream?.headers ?? {}).filter((name) => name.startsWith("x-dmt-"))).toEqual([]);
    expect(JSON.stringify(upstream?.headers)).not.toContain(ORIGIN);
    expect(JSON.stringify(upstream?.headers)).not.toContain(SERVICE_KEY);
  });

  it("answers a buffered chat completion as JSON", async () => {
    const response = await invoke(chat(fromApi()));
    expect(response.prelude?.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ object: "chat.completion", model: "gpt-4o-mini" });
  });

  it("uses the vendor half of a dual key, read from the forwarded Authorization header", async () => {
    const response = await invoke({
      ...chat(fromApi()),
      headers: { ...chat(fromApi()).headers, authorization: `Bearer ${SERVICE_KEY};sk-callers-own` },
    });
    expect(response.prelude?.statusCode).toBe(200);
    expect(simulator.requests[0]?.headers.authorization).toBe("Bearer sk-callers-own");
  });

  it("answers the authorizer's 403 itself, whatever identity the caller adds, without the upstream", async () => {
    const refused = refusalContext(errors.insufficientPermissions("openai:/v1/chat/completions"));
    const forged = { ...fromApi(identity), ...fromApi(refused) };
    const response = await invoke(chat(forged));
    expectError(response, 403, errors.insufficientPermissions("openai:/v1/chat/completions").toBody());
    expect(simulator.requests).toEqual([]);
  });

  it("fails closed without the authorizer's context", async () => {
    const response = await invoke(chat({ [ORIGIN_SECRET_HEADER]: ORIGIN }));
    expectError(response, 500, errors.internal().toBody());
    expect(simulator.requests).toEqual([]);
  });

  it("refuses a forged identity joined to the forwarded one", async () => {
    const joined = { ...fromApi(), [contextHeader("projectId")]: "victim,acme" };
    expectError(await invoke(chat(joined)), 500, errors.internal().toBody());
  });

  it("follows the managed key secret: missing until put, then used", async () => {
    secrets.secrets.delete(KEY_ARN);
    const health = () => invoke({ path: "/openai/health", headers: fromApi() });
    expect((await health()).json()).toEqual({ status: "ok", vendor: "openai", upstream: "missing_key" });

    secrets.secrets.set(KEY_ARN, { AWSCURRENT: "sk-put-later" });
    expect((await health()).json()).toEqual({ status: "ok", vendor: "openai", upstream: "configured" });
    await invoke(chat(fromApi()));
    expect(simulator.requests[0]?.headers.authorization).toBe("Bearer sk-put-later");
  });

  it("keeps serving with the last secret values while Secrets Manager refuses", async () => {
    expect((await invoke(chat(fromApi()))).prelude?.statusCode).toBe(200);
    secrets.failing = true;
    const response = await invoke(chat(fromApi()));
    expect(response.prelude?.statusCode).toBe(200);
    expect(secrets.reads.length).toBeGreaterThan(3);
    expect(simulator.requests[1]?.headers.authorization).toBe(`Bearer ${MANAGED_KEY}`);
  });

  it("ends the invocation only once the call's after-work finished, after the client had its response", async () => {
    let release = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let afterStarted = () => {};
    const started = new Promise<void>((resolve) => {
      afterStarted = resolve;
    });
    const recorded: number[] = [];
    const hooks: ProxyHooks = {
      async after(_call, outcome) {
        afterStarted();
        await gate;
        recorded.push(outcome.status);
      },
    };
    const pending = new PendingWork();
    const withHooks = createProxyHandler({
      config: parseProxyConfig(process.env),
      logger: silentLogger,
      proxy: { pending, app: vendorApps({ hooks, pending, logger: silentLogger }) },
    }) as unknown as StreamingHandler;

    const stream = new CollectedResponse();
    let invocationEnded = false;
    const invocation = withHooks(functionUrlEvent(chat(fromApi())), stream, {} as Context).then(() => {
      invocationEnded = true;
    });
    await finished(stream);
    expect(stream.prelude?.statusCode).toBe(200);
    await started;
    await new Promise((resolve) => setImmediate(resolve));
    expect(invocationEnded).toBe(false);

    release();
    await invocation;
    expect(recorded).toEqual([200]);
  });
});

/** The identity API Gateway forwards for another project or key. */
function caller(projectId: string, keyId = "a".repeat(16), rateLimit = { rpm: 600, burst: 1000 }) {
  return grantedContext({ projectId, keyId, tier: "pro", rateLimit, store: "full" });
}

/** Runs `work` and returns the Embedded Metric Format lines written meanwhile (Powertools' output). */
async function emittedMetrics(work: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const written: string[] = [];
  const stdout = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    written.push(String(chunk));
    return true;
  });
  try {
    await work();
  } finally {
    stdout.mockRestore();
  }
  return written
    .flatMap((chunk) => chunk.split("\n"))
    .filter((line) => line.includes('"_aws"'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

interface QueuedRecord {
  transaction_id: string;
  project_id: string;
  billing_mode: string;
  status_code: number;
  cost_micros: number | null;
}

const queued = (): QueuedRecord[] => sqs.accepted.map((body) => JSON.parse(body) as QueuedRecord);

describe("proxy handler: one function for several vendors (managed instances)", () => {
  const ANTHROPIC_KEY_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:VendorKeyAnthropic-abc123";
  /** The handler as deployed on managed instances, with each call's metrics (`callMetrics`). */
  const sharedProxy = () => {
    const pending = new PendingWork();
    const telemetry = lambdaTelemetry(parseBaseConfig(process.env), "proxy");
    return createProxyHandler({
      config: parseProxyConfig({
        ...process.env,
        DMT_VENDORS: "openai,anthropic",
        DMT_VENDOR_KEY_SECRET_ARN_ANTHROPIC: ANTHROPIC_KEY_ARN,
        DMT_UPSTREAM_URL_ANTHROPIC: simulator.origins.anthropic,
      }),
      logger: silentLogger,
      proxy: {
        pending,
        app: vendorApps({ hooks: callMetrics(telemetry.metrics), pending, logger: silentLogger }),
      },
      telemetry,
    }) as unknown as StreamingHandler;
  };

  it("sends each call to its path's vendor with that vendor's managed key, and refuses a vendor it does not serve", async () => {
    secrets.secrets.set(ANTHROPIC_KEY_ARN, { AWSCURRENT: "sk-ant-managed" });
    const handler = sharedProxy();
    let openai: CollectedResponse | undefined;
    let anthropic: CollectedResponse | undefined;
    const metrics = await emittedMetrics(async () => {
      openai = await invokeStreaming(handler, functionUrlEvent(chat(fromApi())));
      anthropic = await invokeStreaming(
        handler,
        functionUrlEvent({
          method: "POST",
          path: "/anthropic/v1/messages",
          headers: { ...fromApi(), "content-type": "application/json", "anthropic-version": "2023-06-01" },
          body: JSON.stringify({
            model: "claude-3-5-haiku-20241022",
            max_tokens: 16,
            messages: [{ role: "user", content: "Say hello" }],
          }),
        }),
      );
    });
    expect(openai?.prelude?.statusCode).toBe(200);
    expect(anthropic?.prelude?.statusCode).toBe(200);
    expect(anthropic?.json()).toMatchObject({ type: "message" });
    // Each call's metrics name its own vendor: the dashboard's rows per vendor hold with one function.
    expect(metrics.map((line) => [line.vendor, line.ProxyCalls])).toEqual([
      ["openai", 1],
      ["anthropic", 1],
    ]);
    expect(simulator.requests.map((r) => [r.vendor, r.path])).toEqual([
      ["openai", "/v1/chat/completions"],
      ["anthropic", "/v1/messages"],
    ]);
    expect(simulator.requests[0]?.headers.authorization).toBe(`Bearer ${MANAGED_KEY}`);
    expect(simulator.requests[1]?.headers["x-api-key"]).toBe("sk-ant-managed");

    const gemini = await invokeStreaming(
      handler,
      functionUrlEvent({
        ...chat(fromApi()),
        path: "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
      }),
    );
    expectError(gemini, 404, errors.notFound().toBody());
    expect(simulator.requests).toHaveLength(2);
  });

  it("fails its start when a vendor it serves has no managed key's secret, or a vendor is unknown, naming the variable", () => {
    expect(() => parseProxyConfig({ ...process.env, DMT_VENDORS: "openai,groq" })).toThrow(
      "Invalid configuration: DMT_VENDOR_KEY_SECRET_ARN_GROQ: must be set",
    );
    for (const vendors of ["openai,mistral", "", " , "]) {
      expect(() => parseProxyConfig({ ...process.env, DMT_VENDORS: vendors }), vendors).toThrow(
        /Invalid configuration: DMT_VENDORS: must list vendors/,
      );
    }
  });
});

describe("proxy handler: behind API Gateway's Lambda proxy integration (dmt:proxyIntegration=lambda-stream)", () => {
  /** The same handler as deployed without a function URL: no origin secret in its configuration. */
  const streamingProxy = () => {
    const { DMT_ORIGIN_SECRET_ARN: _url, ...env } = process.env;
    const pending = new PendingWork();
    return createProxyHandler({
      config: parseProxyConfig(env),
      logger: silentLogger,
      proxy: { pending, app: vendorApps({ hooks: {}, pending, logger: silentLogger }) },
    }) as unknown as StreamingHandler;
  };
  const request = (extra: Record<string, unknown> = {}) => ({
    ...chat({}, extra),
    headers: { authorization: `Bearer ${SERVICE_KEY}`, "content-type": "application/json" },
  });

  it("streams a call whose authorizer context arrives in the event, without headers or origin secret", async () => {
    simulator.setChunkDelay(10);
    const response = await invokeStreaming(
      streamingProxy(),
      gatewayProxyEvent(request({ stream: true }), identity),
    );
    expect(response.prelude?.statusCode).toBe(200);
    expect(response.prelude?.headers["content-type"]).toMatch(/^text\/event-stream/);
    expect(response.text().trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(response.chunks.length).toBeGreaterThan(2);
    expect(simulator.requests[0]?.headers.authorization).toBe(`Bearer ${MANAGED_KEY}`);
    // It never asked for an origin secret.
    expect(secrets.reads).not.toContain(ORIGIN_ARN);
  });

  it("answers the authorizer's refusal from the event's context, without the upstream", async () => {
    const denied = errors.insufficientPermissions("openai:/v1/chat/completions");
    const response = await invokeStreaming(
      streamingProxy(),
      gatewayProxyEvent(request(), refusalContext(denied)),
    );
    expectError(response, 403, denied.toBody());
    expect(simulator.requests).toHaveLength(0);
  });

  it("hands the app the key's name from either integration, an awkward name intact, a forged one not", async () => {
    const keyName = `batch "job" – ünïcode, 🔑 %41`;
    const named = grantedContext({
      projectId: "acme",
      keyId: "a".repeat(16),
      keyName,
      tier: "pro",
      rateLimit: { rpm: 600, burst: 1000 },
      store: "full",
    });
    const seen: (string | undefined)[] = [];
    const observing = (env: NodeJS.ProcessEnv) => {
      const pending = new PendingWork();
      const hooks: ProxyHooks = {
        admit: async (call) => {
          seen.push(call.auth.keyName);
        },
      };
      return createProxyHandler({
        config: parseProxyConfig(env),
        logger: silentLogger,
        proxy: { pending, app: vendorApps({ hooks, pending, logger: silentLogger }) },
      }) as unknown as StreamingHandler;
    };
    const { DMT_ORIGIN_SECRET_ARN: _url, ...streamingEnv } = process.env;
    // lambda-stream: the authorizer's context in the event.
    const streamed = await invokeStreaming(observing(streamingEnv), gatewayProxyEvent(request(), named));
    expect(streamed.prelude?.statusCode).toBe(200);
    // HTTP_PROXY: the context in headers, as API Gateway maps it.
    const viaUrl = await invokeStreaming(observing(process.env), functionUrlEvent(chat(fromApi(named))));
    expect(viaUrl.prelude?.statusCode).toBe(200);
    expect(seen).toEqual([keyName, keyName]);
    // A caller's own name joined to the forwarded one fails closed, like any joined field.
    const joined = { ...fromApi(named), [contextHeader("keyName")]: `evil,${named.keyName}` };
    expectError(await invoke(chat(joined)), 500, errors.internal().toBody());
  });

  it("takes only its own integration's events: no function-URL event there, no API Gateway event behind a URL", async () => {
    const url = await invokeStreaming(streamingProxy(), functionUrlEvent(chat(fromApi())));
    expectError(url, 403, directCallRefused().toBody());
    const gateway = await invokeStreaming(handler, gatewayProxyEvent(request(), identity));
    expectError(gateway, 403, directCallRefused().toBody());
    expect(simulator.requests).toHaveLength(0);
  });
});

describe("proxy handler: metering, records and metrics, as deployed", () => {
  beforeEach(() => {
    sqs.accepted.length = 0;
    kms.calls.length = 0;
    bus.entries.length = 0;
  });

  it("charges a managed call to the project's credits, queues its record and counts it", async () => {
    const before = await credits.balance("acme");
    let response: CollectedResponse | undefined;
    const metrics = await emittedMetrics(async () => {
      response = await invoke(chat(fromApi()));
    });
    expect(response?.prelude?.statusCode).toBe(200);
    expect(response?.prelude?.headers["x-ratelimit-limit"]).toBe("600");

    // The invocation ended only after the call's charge was noted on the store and its record queued.
    // The credits stay leased for the container's next calls: spent is what is neither available nor held.
    const after = await credits.balance("acme");
    const [record] = queued();
    expect(queued()).toHaveLength(1);
    expect(record).toMatchObject({ project_id: "acme", billing_mode: "managed", status_code: 200 });
    expect(record?.cost_micros).toBeGreaterThan(0);
    const unspent = (b: CreditBalance) => b.availableMicros + b.heldMicros;
    expect(unspent(before) - unspent(after)).toBe(record?.cost_micros);
    expect(after.openHolds).toBe(1);
    // No webhook of the project names usage.recorded: the event never went on the bus.
    expect(bus.entries).toEqual([]);

    expect(metrics).toHaveLength(1);
    const [line] = metrics;
    expect(line).toMatchObject({
      service: "dmt",
      function: "proxy",
      vendor: "openai",
      ProxyCalls: 1,
      CallsCharged: 1,
      ChargedMicros: record?.cost_micros,
    });
    const aws = line?._aws as { CloudWatchMetrics: { Namespace: string; Dimensions: string[][] }[] };
    expect(aws.CloudWatchMetrics[0]?.Namespace).toBe("dmt/ProxyHandlerTest");
    expect(aws.CloudWatchMetrics[0]?.Dimensions).toEqual([["service", "function", "vendor"]]);
  });

  it("puts a call's usage.recorded on the bus only for a project with a webhook that names it", async () => {
    await credits.grant("subscribed", 10_000_000, "test");
    const webhooks = new DynamoWebhooks(
      createDynamoClient({ endpoint: dynamo.endpoint }),
      tables,
      new KmsKeyWrapper(createKmsClient({ endpoint: kms.url }), BYOK_KEY_ARN),
    );
    const webhook = (projectId: string, events: EventType[]) =>
      webhooks.add(
        {
          projectId,
          webhookId: `wh_${projectId}`,
          url: "https://hooks.example.com/dmt",
          events,
          createdAt: 0,
        },
        "whsec_test",
      );
    await webhook("subscribed", ["usage.recorded"]);
    // A webhook for other events only: its project's calls stay off the bus.
    await webhook("acme", ["balance.low"]);

    const wanted = await invoke(chat(fromApi(caller("subscribed"))));
    const unwanted = await invoke(chat(fromApi()));
    expect(wanted.prelude?.statusCode).toBe(200);
    expect(unwanted.prelude?.statusCode).toBe(200);
    const subscribedRecord = queued().find((record) => record.project_id === "subscribed");
    expect(bus.entries).toEqual([
      expect.objectContaining({ EventBusName: "dmt-events", Source: "dmt", DetailType: "usage.recorded" }),
    ]);
    expect(JSON.parse(bus.entries[0]?.Detail ?? "{}")).toMatchObject({
      type: "usage.recorded",
      projectid: "subscribed",
      data: { transaction_id: subscribedRecord?.transaction_id, billing_mode: "managed" },
    });
    await webhooks.delete("acme", "wh_acme");
  });

  it("refuses a project without credits with 402, forwarding nothing, and records the refusal", async () => {
    const response = await invoke(chat(fromApi(caller("no-credits"))));
    expect(response.prelude?.statusCode).toBe(402);
    expect((response.json() as { error: { code: string } }).error.code).toBe("insufficient_credits");
    expect(simulator.requests).toEqual([]);
    expect(queued()).toMatchObject([{ project_id: "no-credits", status_code: 402, cost_micros: 0 }]);
  });

  it("answers over the key's rate limit with 429 and Retry-After, forwarding nothing", async () => {
    const limited = caller("acme", "r".repeat(16), { rpm: 60, burst: 1 });
    expect((await invoke(chat(fromApi(limited)))).prelude?.statusCode).toBe(200);
    let refused: CollectedResponse | undefined;
    const metrics = await emittedMetrics(async () => {
      refused = await invoke(chat(fromApi(limited)));
    });
    expect(refused?.prelude?.statusCode).toBe(429);
    expect(refused?.prelude?.headers["retry-after"]).toBe("1");
    expect(simulator.requests).toHaveLength(1);
    expect(metrics[0]).toMatchObject({ ProxyCalls: 1, RateLimited: 1 });
  });

  it("forwards a project's own vendor key, unwrapped by KMS under its context, and charges nothing", async () => {
    await vendorKeys.set("byok-project", "openai", "sk-byok-project-0123456789");
    const context = { "dmt:context": vendorKeyContext("byok-project", "openai") };
    expect(kms.calls).toEqual([{ operation: "GenerateDataKey", keyId: BYOK_KEY_ARN, context }]);

    // The project has no credits: only its own key lets the call through.
    const response = await invoke(chat(fromApi(caller("byok-project"))));
    expect(response.prelude?.statusCode).toBe(200);
    expect(simulator.requests[0]?.headers.authorization).toBe("Bearer sk-byok-project-0123456789");
    expect(kms.calls[1]).toEqual({ operation: "Decrypt", keyId: BYOK_KEY_ARN, context });
    expect(queued()).toMatchObject([{ project_id: "byok-project", billing_mode: "byok" }]);
    expect((await credits.balance("byok-project")).availableMicros).toBe(0);
  });

  it("spools the records the queue refuses to the bucket, with a signed PUT", async () => {
    sqs.down();
    let response: CollectedResponse | undefined;
    try {
      response = await invoke(chat(fromApi()));
    } finally {
      sqs.up();
    }
    expect(response?.prelude?.statusCode).toBe(200);
    expect(queued()).toEqual([]);
    expect(s3.refused).toBe(0);
    const spooled = [...s3.objects].filter(([key]) => key.startsWith(`${BUCKET}/${SPOOL_PREFIX}`));
    expect(spooled).toHaveLength(1);
    const [, body] = spooled[0] ?? [];
    expect(JSON.parse(String(body))).toMatchObject({ project_id: "acme", status_code: 200 });
  });
});

describe("KMS key wrapper", () => {
  const wrapper = () => new KmsKeyWrapper(createKmsClient({ endpoint: kms.url }), BYOK_KEY_ARN);

  it("opens what it sealed under the same context only", async () => {
    const sealed = await sealSecret(wrapper(), "sk-secret-value", "dmt vendor key\nacme\nopenai");
    expect(await openSecret(wrapper(), sealed, "dmt vendor key\nacme\nopenai")).toBe("sk-secret-value");
    await expect(openSecret(wrapper(), sealed, "dmt vendor key\nother\nopenai")).rejects.toThrow(
      DecryptionError,
    );
  });

  it("refuses a data key wrapped by another KMS key", async () => {
    const other = new KmsKeyWrapper(createKmsClient({ endpoint: kms.url }), `${BYOK_KEY_ARN}-other`);
    const sealed = await sealSecret(other, "sk-secret-value", "ctx");
    await expect(openSecret(wrapper(), sealed, "ctx")).rejects.toThrow(DecryptionError);
  });
});
