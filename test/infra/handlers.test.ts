import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {
  APIGatewayAuthorizerResult,
  APIGatewayProxyEvent,
  APIGatewayRequestAuthorizerEvent,
} from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoStore } from "../../lambda/adapters/dynamodb/store";
import { TABLES, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { createKey, createProject, type NewKeyInput } from "../../lambda/core/accounts";
import { ApiError, errors } from "../../lambda/core/errors";
import { generateKey } from "../../lambda/core/keys";
import {
  authFromContext,
  grantedContext,
  refusalContext,
} from "../../lambda/handlers/runtime/authorizer-context";
import { parseBaseConfig, parseStoreConfig } from "../../lambda/handlers/runtime/config";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { GATEWAY_ERRORS } from "../../lib/gateway-responses";
import {
  installStreamingRuntime,
  invokeRest,
  type StreamedResult,
  type StreamingHandler,
} from "./lambda-runtime";

// The handlers read their configuration at import, as at a Lambda cold start: set it first.
const dataDir = mkdtempSync(join(tmpdir(), "dmt-handlers-"));
let dynamo: EmbeddedDynamo;
let store: DynamoStore;
let authorizer: (event: APIGatewayRequestAuthorizerEvent) => Promise<APIGatewayAuthorizerResult>;
let api: (event: APIGatewayProxyEvent) => Promise<StreamedResult>;

const METHOD_ARN_PREFIX = "arn:aws:execute-api:eu-west-1:123456789012:abc123/prod";

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(dataDir);
  process.env.DMT_DYNAMODB_ENDPOINT = dynamo.endpoint;
  process.env.DMT_LOG_LEVEL = "silent";
  // No key cache: each call reads the store, so a revocation shows on the next call.
  process.env.DMT_KEY_CACHE_MS = "0";
  for (const name of Object.keys(TABLES)) process.env[`DMT_TABLE_${name.toUpperCase()}`] = `handlers-${name}`;
  // The data API's warehouse settings (exports are not called here).
  process.env.DMT_ATHENA_WORKGROUP = "handlers_workgroup";
  process.env.DMT_WAREHOUSE_DATABASE = "handlers_database";
  process.env.DMT_WAREHOUSE_TABLE = "interactions";
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  const names = tableNames(process.env);
  await ensureTables(db, names);
  store = new DynamoStore(db, names);
  authorizer = (await import("../../lambda/handlers/authorizer")).handler;
  installStreamingRuntime();
  const apiHandler = (await import("../../lambda/handlers/api")).handler;
  // hono/aws-lambda declares its own event types; API Gateway's REST events are what it takes.
  // Streaming, as API Gateway's streaming Lambda proxy integration invokes it.
  api = (event) => invokeRest(apiHandler as unknown as StreamingHandler, event);
});

afterAll(async () => {
  await dynamo?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

let projects = 0;
async function newKey(
  input: Partial<NewKeyInput> = {},
): Promise<{ key: string; keyId: string; projectId: string }> {
  const projectId = `handlers-${++projects}`;
  await createProject(store, projectId, "pro", Date.now());
  const { key, record } = await createKey(store, { name: "test", ...input, projectId }, Date.now());
  return { key, keyId: record.keyId, projectId };
}

interface Request {
  path?: string;
  headers?: Record<string, string | string[]>;
  query?: Record<string, string>;
}

/** An API Gateway REQUEST authorizer event as REST APIs send it (header names as the client wrote them). */
function authorizerEvent({
  path = "/api/v1/status",
  headers = {},
  query,
}: Request): APIGatewayRequestAuthorizerEvent {
  const multi = Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name, Array.isArray(value) ? value : [value]]),
  );
  return {
    type: "REQUEST",
    methodArn: `${METHOD_ARN_PREFIX}/GET${path}`,
    resource: path.startsWith("/api/") ? "/api/v1/{proxy+}" : "/{proxy+}",
    path,
    httpMethod: "GET",
    headers: Object.fromEntries(
      Object.entries(multi).map(([name, values]) => [name, values.at(-1) as string]),
    ),
    multiValueHeaders: multi,
    queryStringParameters: query ?? null,
    multiValueQueryStringParameters: query
      ? Object.fromEntries(Object.entries(query).map(([name, value]) => [name, [value]]))
      : null,
    pathParameters: null,
    stageVariables: null,
    requestContext: {
      stage: "prod",
      path: `/prod${path}`,
    } as APIGatewayRequestAuthorizerEvent["requestContext"],
  };
}

/** A Lambda proxy event for the data API, with the context API Gateway passes on (values as strings). */
function apiEvent(path: string, context: APIGatewayAuthorizerResult["context"]): APIGatewayProxyEvent {
  const authorizerContext = context && {
    ...Object.fromEntries(Object.entries(context).map(([k, v]) => [k, String(v)])),
    principalId: "p",
  };
  return {
    resource: "/api/v1/{proxy+}",
    path,
    httpMethod: "GET",
    headers: { Host: "abc123.execute-api.eu-west-1.amazonaws.com" },
    multiValueHeaders: { Host: ["abc123.execute-api.eu-west-1.amazonaws.com"] },
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: { proxy: path.slice("/api/v1/".length) },
    stageVariables: null,
    body: null,
    isBase64Encoded: false,
    requestContext: {
      stage: "prod",
      path: `/prod${path}`,
      domainName: "abc123.execute-api.eu-west-1.amazonaws.com",
      authorizer: authorizerContext,
    } as unknown as APIGatewayProxyEvent["requestContext"],
  };
}

/** What the ACCESS_DENIED gateway response sends for a Deny: its template, with the context filled in. */
function renderAccessDenied(result: APIGatewayAuthorizerResult): { status: number; body: unknown } {
  const response = GATEWAY_ERRORS.find((e) => e.type.responseType === "ACCESS_DENIED");
  if (!response?.status) throw new Error("no ACCESS_DENIED response");
  const body = response.body.replace(/\$context\.authorizer\.(\w+)/g, (_, name: string) =>
    String(result.context?.[name]),
  );
  return { status: response.status, body: JSON.parse(body) };
}

function effect(result: APIGatewayAuthorizerResult): string | undefined {
  return result.policyDocument.Statement[0]?.Effect;
}

describe("authorizer handler", () => {
  it("allows a valid key with its identity, for the whole stage", async () => {
    const { key, keyId, projectId } = await newKey();
    const result = await authorizer(authorizerEvent({ headers: { Authorization: `Bearer ${key}` } }));
    expect(result).toEqual({
      principalId: keyId,
      policyDocument: {
        Version: "2012-10-17",
        Statement: [{ Action: "execute-api:Invoke", Effect: "Allow", Resource: `${METHOD_ARN_PREFIX}/*` }],
      },
      // A key without policies says so, so that a caller cannot supply its own: every model, no TPM limit.
      // Its name travels percent-encoded, for the proxy's messages.
      context: {
        projectId,
        keyId,
        keyName: "test",
        tier: "pro",
        rpm: 600,
        burst: 1000,
        store: "full",
        models: "*",
        tpm: 0,
      },
    });
  });

  it("reads every presentation, header names in any case", async () => {
    const { key, projectId } = await newKey();
    const requests: Request[] = [
      { headers: { "X-Api-Key": key } },
      { query: { api_key: key } },
      { path: "/gemini/v1beta/models", headers: { "X-Goog-Api-Key": key } },
      { path: "/gemini/v1beta/models", query: { key } },
      { path: "/anthropic/v1/messages", headers: { authorization: `bearer ${key}` } },
    ];
    for (const request of requests) {
      const result = await authorizer(authorizerEvent(request));
      expect(effect(result), JSON.stringify(request.query ?? Object.keys(request.headers ?? {}))).toBe(
        "Allow",
      );
      expect(result.context?.projectId).toBe(projectId);
    }
  });

  it("records when a key was last used", async () => {
    const { key, keyId } = await newKey();
    expect((await store.getKey(keyId))?.lastUsedAt).toBeUndefined();
    await authorizer(authorizerEvent({ headers: { Authorization: `Bearer ${key}` } }));
    expect((await store.getKey(keyId))?.lastUsedAt).toBeTypeOf("number");
  });

  it("denies with the local stack's exact 401 bodies", async () => {
    const { key, keyId } = await newKey();
    const cases: [Request, ReturnType<typeof errors.invalidApiKey>][] = [
      [{}, errors.missingApiKey()],
      [{ path: "/openai/v1/models", headers: { "x-goog-api-key": key } }, errors.missingApiKey()],
      [{ headers: { Authorization: "Bearer dmt_nope" } }, errors.invalidApiKey("Invalid API key provided.")],
      [{ headers: { Authorization: `Bearer  ${key}` } }, errors.invalidApiKey("Invalid API key provided.")],
      [{ query: { api_key: ` ${key}` } }, errors.invalidApiKey("Invalid API key provided.")],
      [
        { headers: { Authorization: `Bearer ${key.slice(0, -1)}` } },
        errors.invalidApiKey("Invalid API key provided."),
      ],
      [
        { headers: { Authorization: [`Bearer ${key}`, `Bearer ${key}`] } },
        errors.invalidApiKey("Send exactly one Authorization header."),
      ],
      [
        { headers: { Authorization: `Bearer ${key}`, authorization: `Bearer ${key}` } },
        errors.invalidApiKey("Send exactly one Authorization header."),
      ],
      [
        { headers: { Authorization: `Basic ${key}` } },
        errors.invalidApiKey("The Authorization header must be 'Bearer <API_KEY>'."),
      ],
    ];
    for (const [request, expected] of cases) {
      const result = await authorizer(authorizerEvent(request));
      expect(effect(result)).toBe("Deny");
      expect(result.principalId).toBe("anonymous");
      expect(renderAccessDenied(result)).toEqual({ status: 401, body: expected.toBody() });
    }
    expect((await store.getKey(keyId))?.lastUsedAt).toBeUndefined();
  });

  it("denies a revoked key on the next call and an expired key", async () => {
    const { key, keyId } = await newKey();
    const bearer = { headers: { Authorization: `Bearer ${key}` } };
    expect(effect(await authorizer(authorizerEvent(bearer)))).toBe("Allow");
    await store.revokeKey(keyId, Date.now());
    expect(renderAccessDenied(await authorizer(authorizerEvent(bearer))).body).toEqual(
      errors.invalidApiKey("This API key has been revoked.").toBody(),
    );

    // createKey refuses a past expiry, so write an already expired key straight to the store.
    const expired = generateKey();
    await store.createKey({
      keyId: expired.keyId,
      projectId: (await newKey()).projectId,
      name: "expired",
      secretHash: expired.secretHash,
      createdAt: Date.now() - 2000,
      expiresAt: Date.now() - 1000,
      revoked: false,
    });
    const result = await authorizer(authorizerEvent({ headers: { Authorization: `Bearer ${expired.key}` } }));
    expect(renderAccessDenied(result).body).toEqual(
      errors.invalidApiKey("This API key has expired.").toBody(),
    );
  });

  it("hands a restricted key's refusal to the function, which answers the local 403", async () => {
    const { key, projectId } = await newKey({ allow: ["api:/api/v1/exports"] });
    const bearer = { headers: { Authorization: `Bearer ${key}` } };

    const allowed = await authorizer(authorizerEvent({ ...bearer, path: "/api/v1/exports" }));
    expect(allowed.context).toMatchObject({ projectId });

    const refused = await authorizer(authorizerEvent({ ...bearer, path: "/api/v1/status" }));
    expect(effect(refused)).toBe("Allow");
    expect(refused.context).not.toHaveProperty("projectId");
    const response = await api(apiEvent("/api/v1/status", refused.context));
    expect(response.statusCode).toBe(403);
    expect(JSON.parse(response.body)).toEqual(errors.insufficientPermissions("api:/api/v1/status").toBody());
  });
});

describe("api handler", () => {
  it("answers /api/v1/status from the authorizer's context, with the security headers", async () => {
    const { key, projectId } = await newKey();
    const granted = await authorizer(authorizerEvent({ headers: { Authorization: `Bearer ${key}` } }));
    const response = await api(apiEvent("/api/v1/status", granted.context));
    expect(response.statusCode).toBe(200);
    expect(JSON.parse(response.body)).toEqual({ status: "ok", project: projectId });
    // REST API events carry multiValueHeaders, so the answer does too.
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
      expect(response.multiValueHeaders?.[name.toLowerCase()]).toEqual([value]);
    }
  });

  it("answers GET /api/v1/openapi.json without an authorizer's context (its route has no authorizer)", async () => {
    const response = await api({
      ...apiEvent("/api/v1/openapi.json", undefined),
      resource: "/api/v1/openapi.json",
      pathParameters: null,
    });
    expect(response.statusCode).toBe(200);
    const description = JSON.parse(response.body) as { openapi: string; paths: Record<string, unknown> };
    expect(description.openapi).toBe("3.1.0");
    expect(Object.keys(description.paths)).toContain("/api/v1/exports");
  });

  it("answers an unknown route with the service's 404", async () => {
    const context = { projectId: "acme", keyId: "k1", tier: "free", rpm: 60, burst: 100, store: "full" };
    const response = await api(apiEvent("/api/v1/nothing-here", context));
    expect(response.statusCode).toBe(404);
    expect(JSON.parse(response.body)).toEqual(errors.notFound().toBody());
  });

  it("limits each key's rate with the shared bucket: headers on every answer, then a 429, counted", async () => {
    const context = {
      projectId: "acme",
      keyId: "limited1",
      tier: "enterprise",
      rpm: 60,
      burst: 2,
      store: "full",
    };
    const first = await api(apiEvent("/api/v1/status", context));
    expect(first.statusCode).toBe(200);
    expect(first.multiValueHeaders?.["x-ratelimit-limit"]).toEqual(["60"]);
    expect(first.multiValueHeaders?.["x-ratelimit-remaining"]).toEqual(["1"]);
    // An error answer carries them too.
    const missing = await api(apiEvent("/api/v1/nothing-here", context));
    expect(missing.statusCode).toBe(404);
    expect(missing.multiValueHeaders?.["x-ratelimit-remaining"]).toEqual(["0"]);

    const written: string[] = [];
    const stdout = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    let refused: StreamedResult;
    try {
      refused = await api(apiEvent("/api/v1/status", context));
    } finally {
      stdout.mockRestore();
    }
    expect(refused.statusCode).toBe(429);
    expect(JSON.parse(refused.body).error).toMatchObject({
      type: "rate_limit_error",
      code: "rate_limit_exceeded",
    });
    expect(refused.multiValueHeaders?.["retry-after"]).toEqual(["1"]);
    // The refusal is an Embedded Metric Format line in the stack's namespace.
    const metrics = written
      .flatMap((chunk) => chunk.split("\n"))
      .filter((line) => line.includes('"_aws"'))
      .map((line) => JSON.parse(line));
    expect(metrics).toHaveLength(1);
    expect(metrics[0]).toMatchObject({ RateLimited: 1, function: "data-api", service: "dmt" });
    expect(metrics[0]._aws.CloudWatchMetrics[0].Namespace).toBe("dmt");
  });

  it("fails closed with a bare 500 when no authorizer ran", async () => {
    const response = await api(apiEvent("/api/v1/status", undefined));
    expect(response.statusCode).toBe(500);
    expect(JSON.parse(response.body)).toEqual(errors.internal().toBody());
  });
});

describe("authorizer context", () => {
  it("carries any message through the gateway's JSON template and back to the function unchanged", () => {
    const error = new ApiError(
      403,
      "permission_error",
      "insufficient_permissions",
      'Not "here" \\ nor there.',
    );
    const context = refusalContext(error);
    expect(
      renderAccessDenied({ principalId: "x", policyDocument: { Version: "", Statement: [] }, context }).body,
    ).toEqual(error.toBody());
    const stringified = Object.fromEntries(Object.entries(context).map(([k, v]) => [k, String(v)]));
    expect(() => authFromContext(stringified)).toThrow(error.message);
    try {
      authFromContext(stringified);
    } catch (err) {
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).status).toBe(403);
    }
  });

  it("carries a key's model allowlist and TPM limit, as API Gateway hands them on (strings)", () => {
    const auth = {
      projectId: "acme",
      keyId: "a".repeat(16),
      tier: "pro" as const,
      rateLimit: { rpm: 600, burst: 1000 },
      store: "full" as const,
      models: ["gpt-4o*", "models/gemini-*"],
      tpm: 5000,
    };
    const stringified = Object.fromEntries(
      Object.entries(grantedContext(auth)).map(([k, v]) => [k, String(v)]),
    );
    expect(authFromContext(stringified)).toEqual(auth);
    const plain = { ...auth, models: undefined, tpm: undefined };
    const { models: _m, tpm: _t, ...bare } = plain;
    const again = Object.fromEntries(Object.entries(grantedContext(bare)).map(([k, v]) => [k, String(v)]));
    expect(authFromContext(again)).toEqual(bare);
  });

  it("names the missing variable when the configuration is incomplete", () => {
    // Each function is given the tables it may use only; a table name that is set must not be empty.
    expect(() => parseStoreConfig({ DMT_TABLE_PROJECTS: "" })).toThrow(/DMT_TABLE_PROJECTS/);
    expect(() => parseBaseConfig({ DMT_LOG_LEVEL: "loud" })).toThrow(/DMT_LOG_LEVEL/);
  });
});

describe("authorizer handler when the store is down", () => {
  it("throws (API Gateway answers 500), never a Deny that would read as a bad key", async () => {
    const { key } = await newKey();
    await dynamo.close();
    await expect(
      authorizer(authorizerEvent({ headers: { Authorization: `Bearer ${key}` } })),
    ).rejects.toThrow();
  });
});
