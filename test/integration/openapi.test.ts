import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { createDataApp, type DataApiDeps } from "../../lambda/app/data-api/app";
import { setBudget } from "../../lambda/core/budgets";
import { startTestHost, type TestHost } from "../support/host";

/**
 * `GET /api/v1/openapi.json` on the running local stack: a valid OpenAPI 3.1 document, describing every
 * route the data API mounts, and every real answer (errors included) matches what it describes.
 */

const STEP_MS = 240_000;
type Json = Record<string, unknown>;

let stack: TestHost;
let key: string;
let keyId: string;
let projectId: string;
let description: Json;
let transactionId: string;
const today = new Date().toISOString().slice(0, 10);

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  ({ key, keyId, projectId } = await stack.newKey({ tier: "pro" }));
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(projectId, 5_000_000, "test");
  const budgets = new DynamoBudgets(stack.db, tableNames(process.env));
  await setBudget(stack.store, budgets, { projectId, usd: "100", window: "month" }, Date.now());
  await setBudget(stack.store, budgets, { projectId, keyId, usd: "5", window: "day" }, Date.now());
  await setBudget(
    stack.store,
    budgets,
    { projectId, userId: "u-ann", usd: "1", window: "total" },
    Date.now(),
  );
  const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
  const answer = await openai.chat.completions
    .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hello" }], user: "u-ann" })
    .withResponse();
  transactionId = answer.response.headers.get("x-dmt-transaction-id") ?? "";
  await stack.drain();
  const res = await fetch(`${stack.url}/api/v1/openapi.json`);
  expect(res.status).toBe(200);
  description = (await res.json()) as Json;
}, STEP_MS);
afterAll(() => stack?.stop());

const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });

/** The operation of the description for a path and method, found by its templated path. */
function operation(path: string, method: string): Json | undefined {
  const paths = description.paths as Record<string, Record<string, Json>>;
  for (const [template, item] of Object.entries(paths)) {
    const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`);
    if (pattern.test(path)) return item[method.toLowerCase()];
  }
  return undefined;
}

/** The description's shared error answer. */
const errorResponse = () =>
  ((description.components as Json).responses as Record<string, Json>).Error as Json;

/**
 * Checks one real answer against the description: its status is described for the operation (a method
 * the path does not have answers 405 in the error shape), and its body matches the schema of its type.
 */
async function conforms(res: Response, path: string, method: string): Promise<unknown> {
  const op = operation(path, method);
  let response: Json | undefined;
  if (op === undefined) {
    expect(res.status, `${method} ${path} is not described, so it must be refused`).toBe(405);
    response = errorResponse();
  } else {
    response = (op.responses as Record<string, Json>)[String(res.status)];
    expect(response, `${method} ${path} answering ${res.status} is described`).toBeDefined();
    if (response?.$ref) response = errorResponse();
  }
  const type = (res.headers.get("content-type") ?? "").split(";")[0] ?? "";
  const contents = (response?.content ?? {}) as Record<string, { schema: Json }>;
  const content = contents[type];
  expect(content, `${method} ${path} ${res.status} as ${type} is described`).toBeDefined();
  const text = await res.text();
  const body = type === "application/json" ? JSON.parse(text) : text;
  const validate = ajv.compile(content?.schema ?? {});
  expect(validate(body) ? [] : validate.errors, `${method} ${path} ${res.status}`).toEqual([]);
  return body;
}

async function call(method: string, path: string, body?: unknown, headers: Json = {}) {
  const res = await fetch(`${stack.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", ...headers } as Record<
      string,
      string
    >,
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.status, body: await conforms(res, new URL(path, stack.url).pathname, method) };
}

describe("the data API's description", { timeout: STEP_MS }, () => {
  it("is a valid OpenAPI 3.1 document, served without a key", async () => {
    expect(description.openapi).toBe("3.1.0");
    const result = await new Validator().validate(description as never);
    expect(result).toEqual({ valid: true });
    const res = await fetch(`${stack.url}/api/v1/openapi.json`, { method: "POST" });
    expect(res.status).toBe(405);
  });

  it("describes every route the data API mounts", () => {
    // Every dependency present (stand-ins that are never called), so every optional route is mounted.
    const anything: unknown = new Proxy(() => anything, { get: () => anything });
    const deps = new Proxy({} as DataApiDeps, {
      get: (_, name) => (name === "rateLimit" ? undefined : anything),
    });
    const app = createDataApp(deps);
    const mounted = app.routes
      .filter((r) => r.method !== "ALL")
      .map((r) => `${r.method} ${r.path.replace(/:([^/]+)/g, "{$1}")}`);
    const described = Object.entries(description.paths as Record<string, Json>).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect(mounted.length).toBeGreaterThan(5);
    expect([...new Set(mounted)].sort()).toEqual([...new Set(described)].sort());
  });

  it("matches the answers of status, budgets and transactions, errors included", async () => {
    expect((await call("GET", "/api/v1/status")).status).toBe(200);
    expect((await call("GET", "/api/v1/status", undefined, { Authorization: "Bearer dmt_bad" })).status).toBe(
      401,
    );
    expect((await call("DELETE", "/api/v1/status")).status).toBe(405);
    const budgets = await call("GET", "/api/v1/budgets");
    expect((budgets.body as { data: unknown[] }).data.length).toBe(3);
    expect((await call("GET", "/api/v1/budgets?user=u-ann")).status).toBe(200);
    expect((await call("GET", `/api/v1/budgets?user=${"x".repeat(300)}`)).status).toBe(400);
    await expect
      .poll(
        async () =>
          (
            await fetch(`${stack.url}/api/v1/transactions/${transactionId}`, {
              headers: { Authorization: `Bearer ${key}` },
            })
          ).status,
        {
          timeout: STEP_MS,
          interval: 250,
        },
      )
      .toBe(200);
    expect((await call("GET", `/api/v1/transactions/${transactionId}`)).status).toBe(200);
    expect((await call("GET", "/api/v1/transactions/txn_nothing")).status).toBe(404);
  });

  it("matches the answers of exports, in every schema and format, errors included", async () => {
    const range = { start: today, end: today };
    await expect
      .poll(
        async () =>
          ((await call("POST", "/api/v1/exports", { format: "json", range })).body as unknown[]).length,
        {
          timeout: STEP_MS,
          interval: 250,
        },
      )
      .toBe(1);
    const focus = await call("POST", "/api/v1/exports", { format: "json", schema: "focus", range });
    expect((focus.body as unknown[]).length).toBe(1);
    expect((await call("POST", "/api/v1/exports", { format: "csv", schema: "focus", range })).status).toBe(
      200,
    );
    expect((await call("POST", "/api/v1/exports", { format: "csv", range })).status).toBe(200);
    expect((await call("POST", "/api/v1/exports", { format: "xml", range })).status).toBe(400);
    expect((await call("POST", "/api/v1/exports", "{not json")).status).toBe(400);
    expect((await call("GET", "/api/v1/exports")).status).toBe(405);
  });

  it("matches the answers of the Stripe webhook, which takes no key", async () => {
    // This stack has no Stripe settings: the route says so, in the error shape it describes.
    const res = await call(
      "POST",
      "/stripe/webhook",
      { id: "evt_1" },
      { Authorization: "", "Stripe-Signature": "t=1,v1=x" },
    );
    expect(res.status).toBe(404);
  });

  it("matches the answers of deletion requests and their status, errors included", async () => {
    const queued = await call("POST", "/api/v1/data", { user_id: "u-ben", reason: "asked" });
    expect(queued.status).toBe(202);
    const id = (queued.body as { request_id: string }).request_id;
    expect((await call("GET", `/api/v1/data/${id}`)).status).toBe(200);
    expect((await call("GET", "/api/v1/data/del_000000000000000000000000")).status).toBe(404);
    expect((await call("POST", "/api/v1/data", { user_id: "u-ben" })).status).toBe(400);
    expect((await call("POST", "/api/v1/data", { reason: "x", userid: "u" })).status).toBe(400);
  });
});
