/**
 * The dashboard API's Lambda handler as API Gateway's HTTP API invokes it (payload format 2.0): it
 * checks Cognito-style access tokens against the issuer's JWKS (served here by a small HTTP server),
 * over the real DynamoDB adapters (dynalite), with BYOK keys wrapped through a KMS stand-in, and
 * export downloads queried through an Athena stand-in and written to an S3 stand-in.
 */
import { generateKeyPairSync, type KeyObject, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PutItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from "aws-lambda";
import { exportJWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { TABLES, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { DASHBOARD_DOWNLOAD_MAX_ROWS, STREAMED_EXPORT_MAX_ROWS } from "../../lambda/core/export-estimate";
import { CSV_HEADER } from "../../lambda/core/export-format";
import { personalProjectId } from "../../lambda/core/members";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { DASHBOARD_API_SCOPE } from "../../lib/dashboard";
import { FakeAthena, FakeS3, listen } from "../support/aws-stand-ins";
import { type EventBridgeStandIn, startEventBridgeStandIn } from "./metering-stand-ins";

const CLIENT_ID = "dashboard-spa-client";
const BYOK_KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/byok-test";
const KID = "pool-key-1";
const dataDir = mkdtempSync(join(tmpdir(), "dmt-dashboard-handler-"));
const poolKey = generateKeyPairSync("rsa", { modulusLength: 2048 });
// Same key id, another key: what a forger who read the JWKS could sign with.
const forgerKey = generateKeyPairSync("rsa", { modulusLength: 2048 });

let dynamo: EmbeddedDynamo;
let jwks: Server;
let kms: Server;
let bus: EventBridgeStandIn;
let cognito: Server;
const s3 = new FakeS3();
const athena = new FakeAthena();
const RESULTS_BUCKET = "dmt-athena-results";
const standIns: Server[] = [];
/** The ListUsers requests the Cognito stand-in received. */
const listUsersRequests: { UserPoolId: string; Filter: string }[] = [];
/** The pool's users, as Cognito's ListUsers reports them. */
const POOL_USERS = [{ email: "ada@example.com", sub: "ada-sub-1" }];
/** The GenerateDataKey requests the KMS stand-in received. */
const dataKeyRequests: { KeyId: string; KeySpec: string; EncryptionContext: Record<string, string> }[] = [];
let issuer: string;
let handler: (event: APIGatewayProxyEventV2) => Promise<APIGatewayProxyStructuredResultV2>;

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(dataDir);
  const publicJwk = { ...(await exportJWK(poolKey.publicKey)), kid: KID, alg: "RS256", use: "sig" };
  jwks = createServer((req, res) => {
    if (req.url !== "/us-east-1_pool/.well-known/jwks.json") {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [publicJwk] }));
  });
  await new Promise<void>((resolve) => jwks.listen(0, "127.0.0.1", resolve));
  issuer = `http://127.0.0.1:${(jwks.address() as AddressInfo).port}/us-east-1_pool`;

  // KMS's JSON protocol, GenerateDataKey only: what storing a BYOK key asks of it.
  kms = createServer(async (req, res) => {
    const request = JSON.parse(await readBody(req));
    if (req.headers["x-amz-target"] !== "TrentService.GenerateDataKey") {
      res.writeHead(400, { "content-type": "application/x-amz-json-1.1" }).end("{}");
      return;
    }
    dataKeyRequests.push(request);
    const plaintext = randomBytes(32);
    res.writeHead(200, { "content-type": "application/x-amz-json-1.1" }).end(
      JSON.stringify({
        KeyId: request.KeyId,
        Plaintext: plaintext.toString("base64"),
        CiphertextBlob: Buffer.concat([Buffer.from("wrapped:"), randomBytes(32)]).toString("base64"),
      }),
    );
  });
  await new Promise<void>((resolve) => kms.listen(0, "127.0.0.1", resolve));

  // Cognito's JSON protocol, ListUsers with an `email = "..."` filter only: what an invitation asks.
  cognito = createServer(async (req, res) => {
    const request = JSON.parse(await readBody(req));
    const type = { "content-type": "application/x-amz-json-1.1" };
    if (req.headers["x-amz-target"] !== "AWSCognitoIdentityProviderService.ListUsers") {
      res.writeHead(400, type).end(JSON.stringify({ __type: "UnknownOperationException" }));
      return;
    }
    listUsersRequests.push(request);
    const email = /^email = "(.*)"$/.exec(request.Filter)?.[1];
    const users = POOL_USERS.filter((u) => u.email === email).map((u) => ({
      Username: u.sub,
      Attributes: [
        { Name: "sub", Value: u.sub },
        { Name: "email", Value: u.email },
      ],
      Enabled: true,
      UserStatus: "CONFIRMED",
    }));
    res.writeHead(200, type).end(JSON.stringify({ Users: users }));
  });
  await new Promise<void>((resolve) => cognito.listen(0, "127.0.0.1", resolve));

  const [s3Server, athenaServer] = await Promise.all([listen(s3.handle), listen(athena.handle)]);
  standIns.push(s3Server.server, athenaServer.server);
  bus = await startEventBridgeStandIn();
  // The handler reads its configuration at import, as at a Lambda cold start.
  Object.assign(process.env, {
    DMT_EVENT_BUS_NAME: "dmt-events",
    DMT_EVENTBRIDGE_ENDPOINT: bus.url,
    // Only a failed webhook test would send a retry there; none here.
    DMT_WEBHOOK_QUEUE_URL: "http://127.0.0.1:9/123456789012/deliveries",
    DMT_LOG_LEVEL: "silent",
    DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
    DMT_DASHBOARD_ISSUER: issuer,
    DMT_DASHBOARD_CLIENT_ID: CLIENT_ID,
    DMT_DASHBOARD_USER_POOL_ID: "us-east-1_pool",
    DMT_COGNITO_ENDPOINT: `http://127.0.0.1:${(cognito.address() as AddressInfo).port}`,
    DMT_BYOK_KEY_ARN: BYOK_KEY_ARN,
    DMT_KMS_ENDPOINT: `http://127.0.0.1:${(kms.address() as AddressInfo).port}`,
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    DMT_ATHENA_WORKGROUP: "dmt-warehouse",
    DMT_WAREHOUSE_DATABASE: "dmt_warehouse",
    DMT_WAREHOUSE_TABLE: "interactions",
    DMT_ATHENA_ENDPOINT: athenaServer.url,
    DMT_S3_ENDPOINT: s3Server.url,
    DMT_ATHENA_RESULTS_BUCKET: RESULTS_BUCKET,
    AWS_REGION: "us-east-1",
  });
  for (const name of Object.keys(TABLES)) process.env[`DMT_TABLE_${name.toUpperCase()}`] = `dash-${name}`;
  await ensureTables(createDynamoClient({ endpoint: dynamo.endpoint }), tableNames(process.env));
  const imported = (await import("../../lambda/handlers/dashboard")).handler;
  // hono/aws-lambda declares its own event types; HTTP API v2 events are what it takes.
  handler = (event) => imported(event as never, {} as Context) as Promise<APIGatewayProxyStructuredResultV2>;
});

afterAll(async () => {
  await new Promise((resolve) => jwks?.close(resolve));
  await new Promise((resolve) => kms?.close(resolve));
  await new Promise((resolve) => cognito?.close(resolve));
  await Promise.all(standIns.map((server) => new Promise((resolve) => server.close(resolve))));
  await dynamo?.close();
  await bus?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

interface TokenOptions {
  sub?: string;
  key?: KeyObject;
  clientId?: string;
  issuer?: string;
  groups?: string[];
  expiresAt?: number;
}

/** An access token as Cognito issues them: `client_id` and `scope`, no `aud`. */
function accessToken(options: TokenOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    client_id: options.clientId ?? CLIENT_ID,
    token_use: "access",
    scope: `openid email profile ${DASHBOARD_API_SCOPE}`,
    username: options.sub ?? "user-1",
    ...(options.groups && { "cognito:groups": options.groups }),
  })
    .setProtectedHeader({ alg: "RS256", kid: KID })
    .setSubject(options.sub ?? "user-1")
    .setIssuer(options.issuer ?? issuer)
    .setIssuedAt(now - 60)
    .setExpirationTime(options.expiresAt ?? now + 600)
    .sign(options.key ?? poolKey.privateKey);
}

/** What the HTTP API hands the function for `ANY /dashboard/api/{proxy+}` (payload format 2.0). */
function event(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): APIGatewayProxyEventV2 {
  const domainName = "abc123.execute-api.us-east-1.amazonaws.com";
  return {
    version: "2.0",
    routeKey: "ANY /dashboard/api/{proxy+}",
    rawPath: path,
    rawQueryString: "",
    headers: {
      host: domainName,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    pathParameters: { proxy: path.slice("/dashboard/api/".length) },
    isBase64Encoded: false,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    requestContext: {
      accountId: "123456789012",
      apiId: "abc123",
      domainName,
      domainPrefix: "abc123",
      http: { method, path, protocol: "HTTP/1.1", sourceIp: "203.0.113.7", userAgent: "test" },
      requestId: "req-1",
      routeKey: "ANY /dashboard/api/{proxy+}",
      stage: "$default",
      time: "01/Jan/2026:00:00:00 +0000",
      timeEpoch: Date.now(),
    },
  };
}

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const json = (response: APIGatewayProxyStructuredResultV2) => JSON.parse(response.body ?? "");
const header = (response: APIGatewayProxyStructuredResultV2, name: string) =>
  Object.entries(response.headers ?? {}).find(([key]) => key.toLowerCase() === name.toLowerCase())?.[1];

describe("dashboard handler", () => {
  it("answers /dashboard/api/me for a valid access token, creating the personal project", async () => {
    const token = await accessToken({ sub: "operator-1", groups: ["operators"] });
    const response = await handler(event("GET", "/dashboard/api/me", bearer(token)));
    expect(response.statusCode).toBe(200);
    expect(json(response)).toEqual({
      user: { id: "operator-1", operator: true },
      projects: [{ projectId: personalProjectId("operator-1"), tier: "free", role: "owner", personal: true }],
    });
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(header(response, name)).toBe(value);
    expect(header(response, "cache-control")).toBe("no-store");
  });

  it("reads operators from cognito:groups only", async () => {
    const response = await handler(
      event("GET", "/dashboard/api/me", bearer(await accessToken({ sub: "member-1" }))),
    );
    expect(json(response).user).toEqual({ id: "member-1", operator: false });
  });

  it.each([
    ["signed with another key under the pool's key id", { key: forgerKey.privateKey }],
    ["issued to another client", { clientId: "another-client" }],
    ["from another issuer", { issuer: "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_other" }],
    ["expired", { expiresAt: Math.floor(Date.now() / 1000) - 120 }],
  ])("refuses a token %s with 401 invalid_token", async (_, options: TokenOptions) => {
    const response = await handler(event("GET", "/dashboard/api/me", bearer(await accessToken(options))));
    expect(response.statusCode).toBe(401);
    expect(json(response).error).toMatchObject({ type: "authentication_error", code: "invalid_token" });
    expect(header(response, "www-authenticate")).toContain('error="invalid_token"');
  });

  it("invites a user of the pool by email from the Members page, and says who the pool lacks", async () => {
    const token = await accessToken({ sub: "owner-1" });
    expect((await handler(event("GET", "/dashboard/api/me", bearer(token)))).statusCode).toBe(200);
    const members = `/dashboard/api/projects/${personalProjectId("owner-1")}/members`;
    const listed = json(await handler(event("GET", members, bearer(token))));
    expect(listed.canInvite).toBe(true);

    const invited = await handler(
      event("POST", members, bearer(token), { email: "Ada@Example.com", role: "viewer" }),
    );
    expect(invited.statusCode).toBe(201);
    expect(json(invited).member).toMatchObject({
      userId: "ada-sub-1",
      email: "ada@example.com",
      role: "viewer",
    });
    expect(listUsersRequests.at(-1)).toEqual({
      UserPoolId: "us-east-1_pool",
      Filter: 'email = "ada@example.com"',
      Limit: 2,
    });

    const unknown = await handler(
      event("POST", members, bearer(token), { email: "nobody@example.com", role: "admin" }),
    );
    expect(unknown.statusCode).toBe(404);
    expect(json(unknown).error.message).toContain("No dashboard user has the email nobody@example.com");
    // A quote cannot be in a filter value: nobody has that email, and Cognito is not asked.
    const asked = listUsersRequests.length;
    const quoted = await handler(
      event("POST", members, bearer(token), { email: 'a"b@example.com', role: "admin" }),
    );
    expect(quoted.statusCode).toBe(404);
    expect(listUsersRequests).toHaveLength(asked);
  });

  it("refuses service keys and requests without a token", async () => {
    const withKey = await handler(event("GET", "/dashboard/api/me", bearer(`dmt_${"a".repeat(40)}`)));
    expect(withKey.statusCode).toBe(401);
    expect(json(withKey).error.code).toBe("invalid_token");
    const without = await handler(event("GET", "/dashboard/api/me", {}));
    expect(without.statusCode).toBe(401);
    expect(json(without).error.code).toBe("missing_token");
  });

  it("stores a BYOK vendor key wrapped by the stack's KMS key, showing only its last 4 characters", async () => {
    const token = await accessToken({ sub: "byok-user" });
    const project = personalProjectId("byok-user");
    await handler(event("GET", "/dashboard/api/me", bearer(token)));
    const secret = "sk-test-byok-0123456789";
    const stored = await handler(
      event("PUT", `/dashboard/api/projects/${project}/vendor-keys/openai`, bearer(token), { key: secret }),
    );
    expect(stored.statusCode).toBe(200);
    expect(json(stored).vendorKey).toMatchObject({ vendor: "openai", last4: "6789" });
    expect(dataKeyRequests).toEqual([
      { KeyId: BYOK_KEY_ARN, KeySpec: "AES_256", EncryptionContext: { "dmt:context": expect.any(String) } },
    ]);
    const listed = await handler(
      event("GET", `/dashboard/api/projects/${project}/vendor-keys`, bearer(token)),
    );
    expect(json(listed).vendorKeys).toEqual([expect.objectContaining({ vendor: "openai", last4: "6789" })]);
    for (const response of [stored, listed]) expect(response.body).not.toContain(secret);
    const items = await createDynamoClient({ endpoint: dynamo.endpoint }).send(
      new ScanCommand({ TableName: "dash-vendorKeys" }),
    );
    expect(JSON.stringify(items.Items)).not.toContain(secret);
  });

  it("answers Buy credits and the recharge rule 404 payments_not_configured without Stripe's secrets, as locally", async () => {
    const token = await accessToken({ sub: "no-stripe-user" });
    const project = personalProjectId("no-stripe-user");
    await handler(event("GET", "/dashboard/api/me", bearer(token)));
    const base = `/dashboard/api/projects/${project}/credits`;
    const offer = await handler(event("GET", `${base}/purchase`, bearer(token)));
    expect(offer.statusCode).toBe(200);
    expect(json(offer)).toEqual({ configured: false, amounts_usd: [] });
    for (const [method, path, body] of [
      ["POST", `${base}/checkout`, { usd: "10", return_url: "https://d1.cloudfront.net/dashboard/credits" }],
      ["PUT", `${base}/recharge`, { threshold_usd: "5", amount_usd: "10" }],
      ["DELETE", `${base}/recharge`, undefined],
    ] as const) {
      const response = await handler(event(method, path, bearer(token), body));
      expect(response.statusCode).toBe(404);
      expect(json(response).error.code).toBe("payments_not_configured");
    }
  });

  it("puts key.created on the stack's event bus when a key is created", async () => {
    const token = await accessToken({ sub: "events-user" });
    const project = personalProjectId("events-user");
    await handler(event("GET", "/dashboard/api/me", bearer(token)));
    const created = await handler(
      event("POST", `/dashboard/api/projects/${project}/keys`, bearer(token), { name: "ci" }),
    );
    expect(created.statusCode).toBe(201);
    const keyId = json(created).apiKey.keyId as string;
    const entry = bus.entries.find((e) => e.DetailType === "key.created");
    expect(entry).toMatchObject({ EventBusName: "dmt-events", Source: "dmt" });
    expect(JSON.parse(entry?.Detail ?? "{}")).toMatchObject({
      type: "key.created",
      projectid: project,
      data: { key_id: keyId },
    });
    expect(entry?.Detail).not.toContain(json(created).key);
  });
});

describe("dashboard export downloads (presigned S3, not the HTTP API's body)", () => {
  const range = { start: "2026-01-15", end: "2026-01-15" };
  const exportsOf = (projectId: string) => `/dashboard/api/projects/${projectId}/exports`;
  async function exporter(sub: string) {
    const token = await accessToken({ sub });
    await handler(event("GET", "/dashboard/api/me", bearer(token)));
    return { token, projectId: personalProjectId(sub) };
  }

  it("writes the export to the results bucket and answers a 5-minute presigned GET that saves it under its name", async () => {
    const { token, projectId } = await exporter("exporter-1");
    const rows = Array.from({ length: 40 }, (_, i) => syntheticRecord(i, { projectId }));
    athena.rows.set(projectId, rows);
    const response = await handler(
      event("POST", exportsOf(projectId), bearer(token), { format: "csv", range }),
    );
    expect(response.statusCode).toBe(200);
    const answer = json(response) as { download_url: string; file_name: string; expires_at: string };
    const fileName = `dmt-export-${projectId}-2026-01-15-to-2026-01-15.csv`;
    expect(answer.file_name).toBe(fileName);
    // The answer names the file; the rows are not in it.
    expect(response.body?.length).toBeLessThan(2_000);

    const url = new URL(answer.download_url);
    expect(url.host).toBe(`${RESULTS_BUCKET}.s3.us-east-1.amazonaws.com`);
    const key = decodeURIComponent(url.pathname.slice(1));
    expect(key).toMatch(
      new RegExp(`^dashboard-downloads/${projectId}/[0-9a-f-]{36}/${fileName.replaceAll(".", "\\.")}$`),
    );
    expect(url.searchParams.get("X-Amz-Expires")).toBe("300");
    expect(url.searchParams.get("X-Amz-SignedHeaders")).toBe("host");
    expect(url.searchParams.get("response-content-disposition")).toBe(`attachment; filename="${fileName}"`);
    expect(Date.parse(answer.expires_at) - Date.now()).toBeLessThanOrEqual(300_000);

    // The object is the export, as POST /api/v1/exports frames it.
    const csv = s3.objects.get(`${RESULTS_BUCKET}/${key}`)?.toString() ?? "";
    expect(csv.startsWith(CSV_HEADER)).toBe(true);
    const lines = csv.trimEnd().split("\r\n");
    expect(lines).toHaveLength(1 + rows.length);
    expect(
      lines
        .slice(1)
        .map((line) => line.split(",")[1])
        .sort(),
    ).toEqual(rows.map((r) => r.transaction_id).sort());

    // JSON too; each download its own object.
    const asJson = await handler(
      event("POST", exportsOf(projectId), bearer(token), { format: "json", range }),
    );
    const jsonKey = decodeURIComponent(new URL(json(asJson).download_url).pathname.slice(1));
    expect(jsonKey).not.toBe(key);
    const parsed = JSON.parse(s3.objects.get(`${RESULTS_BUCKET}/${jsonKey}`)?.toString() ?? "") as {
      transaction_id: string;
    }[];
    expect(parsed.map((r) => r.transaction_id).sort()).toEqual(rows.map((r) => r.transaction_id).sort());
  });

  it("refuses up front a download over what the dashboard API prepares in its 29 s, naming the data API and the bucket destination", async () => {
    const { token, projectId } = await exporter("exporter-2");
    athena.rows.set(projectId, [syntheticRecord(0, { projectId })]);
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    const rollup = (requests: number) =>
      db.send(
        new PutItemCommand({
          TableName: process.env.DMT_TABLE_USAGEROLLUPS,
          Item: marshall({
            projectId,
            rollupId: "2026-01-15#openai#managed#gpt-4o-mini",
            day: "2026-01-15",
            vendor: "openai",
            billing_mode: "managed",
            model: "gpt-4o-mini",
            requests,
          }),
        }),
      );
    await rollup(DASHBOARD_DOWNLOAD_MAX_ROWS);
    const atLimit = await handler(
      event("POST", exportsOf(projectId), bearer(token), { format: "csv", range }),
    );
    expect(atLimit.statusCode).toBe(200);

    await rollup(DASHBOARD_DOWNLOAD_MAX_ROWS + 1);
    const queries = athena.started.length;
    const objects = s3.objects.size;
    const refused = await handler(
      event("POST", exportsOf(projectId), bearer(token), { format: "csv", range }),
    );
    expect(refused.statusCode).toBe(400);
    expect(json(refused)).toEqual({
      error: {
        type: "invalid_request_error",
        code: "export_too_large",
        message: expect.stringContaining("50,001 rows"),
      },
    });
    expect(json(refused).error.message).toContain("POST /api/v1/exports");
    expect(json(refused).error.message).toContain(`${STREAMED_EXPORT_MAX_ROWS.toLocaleString("en-US")} rows`);
    expect(json(refused).error.message).toContain("--export-bucket s3://");
    expect(athena.started.length).toBe(queries);
    expect(s3.objects.size).toBe(objects);
  });

  it("answers an error, and no URL or object, when the query fails partway", async () => {
    const { token, projectId } = await exporter("exporter-3");
    athena.rows.set(
      projectId,
      Array.from({ length: 2_500 }, (_, i) => syntheticRecord(i, { projectId })),
    );
    athena.failAfterPages = 1;
    athena.pagesRead = 0;
    try {
      const response = await handler(
        event("POST", exportsOf(projectId), bearer(token), { format: "csv", range }),
      );
      expect(response.statusCode).toBe(500);
      expect(json(response)).toMatchObject({ error: { type: "api_error" } });
      expect(s3.keys(`${RESULTS_BUCKET}/dashboard-downloads/${projectId}/`)).toEqual([]);
    } finally {
      athena.failAfterPages = undefined;
    }
  });
});
