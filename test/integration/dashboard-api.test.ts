import { readFileSync } from "node:fs";
import { join } from "node:path";
import { importJWK, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoMemberStore } from "../../lambda/adapters/dynamodb/members";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { createProject } from "../../lambda/core/accounts";
import { personalProjectId } from "../../lambda/core/members";
import { startTestHost, type TestHost } from "../support/host";

/**
 * The dashboard API on the real local stack. Tokens are minted with the local provider's own signing
 * key (kept in the data dir), so each test can be any user; dashboard-signin.test.ts gets real ones
 * through the provider's sign-in.
 */

let stack: TestHost;
let signingKey: CryptoKey | Uint8Array;
let kid: string;
let alg: string;

beforeAll(async () => {
  stack = await startTestHost();
  const state = JSON.parse(readFileSync(join(stack.dataDir, "oidc.json"), "utf8")) as { signingKey: JWK };
  alg = state.signingKey.alg ?? "";
  signingKey = await importJWK(state.signingKey, alg);
  kid = state.signingKey.kid ?? "";
});
afterAll(() => stack.stop());

interface TokenOptions {
  expiresInSeconds?: number;
  audience?: string;
  clientId?: string;
  operator?: boolean;
}

function tokenFor(userId: string, options: TokenOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    client_id: options.clientId ?? "dmt-dashboard",
    scope: "dashboard",
    ...(options.operator ? { "cognito:groups": ["operators"] } : {}),
  })
    .setProtectedHeader({ alg, typ: "at+jwt", kid })
    .setSubject(userId)
    .setIssuer(`${stack.url}/oidc`)
    .setAudience(options.audience ?? `${stack.url}/dashboard/api`)
    .setIssuedAt(now - 5)
    .setExpirationTime(now + (options.expiresInSeconds ?? 600))
    .sign(signingKey);
}

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

async function api(
  token: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(`${stack.url}/dashboard/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

let users = 0;
/** A new user, signed in once so that its personal project exists. */
async function newUser(options: TokenOptions = {}): Promise<{ token: string; projectId: string }> {
  const token = await tokenFor(`user-${process.pid}-${++users}`, options);
  const me = await api(token, "GET", "/me");
  const projects = me.body.projects as { projectId: string }[];
  return { token, projectId: projects[0]?.projectId ?? "" };
}

async function createKey(token: string, projectId: string, body: Record<string, unknown>, headers = {}) {
  return api(token, "POST", `/projects/${projectId}/keys`, body, headers);
}

async function status(key: string): Promise<number> {
  return (await fetch(`${stack.url}/api/v1/status`, { headers: { Authorization: `Bearer ${key}` } })).status;
}

describe("first sign-in", () => {
  it("creates one personal project per user, owned by that user", async () => {
    const token = await tokenFor("first-sign-in-user");
    const [a, b] = await Promise.all([api(token, "GET", "/me"), api(token, "GET", "/me")]);
    expect(a.status).toBe(200);
    expect(b.body).toEqual(a.body);
    expect(a.body).toEqual({
      user: { id: "first-sign-in-user", operator: false },
      projects: [
        {
          projectId: expect.stringMatching(/^personal-[0-9a-f]{16}$/),
          tier: "free",
          role: "owner",
          personal: true,
        },
      ],
    });
    const other = await api(await tokenFor("another-user"), "GET", "/me");
    expect(other.body.projects).not.toEqual(a.body.projects);
  });

  it("completes a first sign-in that stopped after creating the project", async () => {
    const projectId = personalProjectId("interrupted-user");
    await createProject(stack.store, projectId, "free", Date.now());
    const me = await api(await tokenFor("interrupted-user"), "GET", "/me");
    expect(me.body.projects).toEqual([{ projectId, tier: "free", role: "owner", personal: true }]);
  });
});

describe("API keys", () => {
  it("creates, lists and revokes a key that works until it is revoked", async () => {
    const { token, projectId } = await newUser();
    const created = await createKey(token, projectId, { name: "backend" });
    expect(created.status).toBe(201);
    const key = created.body.key as string;
    const view = created.body.apiKey as Record<string, unknown>;
    expect(key).toMatch(/^dmt_[a-z0-9]{16}_[A-Za-z0-9]{43}$/);
    expect(view).toMatchObject({ name: "backend", projectId, status: "active", prefix: key.slice(0, 20) });
    expect(view).not.toHaveProperty("secretHash");
    const listed = await api(token, "GET", `/projects/${projectId}/keys`);
    expect(listed.body.keys).toEqual([view]);
    expect(JSON.stringify(listed.body)).not.toContain(key.slice(20));
    expect(await status(key)).toBe(200);

    const revoked = await api(token, "POST", `/projects/${projectId}/keys/${view.keyId}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.apiKey).toMatchObject({ keyId: view.keyId, status: "revoked", revoked: true });
    expect(await status(key)).toBe(401);

    // Revoking again is harmless and keeps the first revocation time.
    const again = await api(token, "POST", `/projects/${projectId}/keys/${view.keyId}/revoke`);
    expect(again.status).toBe(200);
    expect((again.body.apiKey as { revokedAt: number }).revokedAt).toBe(
      (revoked.body.apiKey as { revokedAt: number }).revokedAt,
    );
  });

  it("keeps endpoint restrictions and expiry", async () => {
    const { token, projectId } = await newUser();
    const expiresAt = Date.now() + 86_400_000;
    const created = await createKey(token, projectId, { name: "embeddings", allow: ["openai:*"], expiresAt });
    expect(created.body.apiKey).toMatchObject({ allow: ["openai:*"], expiresAt });
    expect(await status(created.body.key as string)).toBe(403);
  });

  it("stores a name with markup as plain data", async () => {
    const { token, projectId } = await newUser();
    const name = `<img src=x onerror="alert(1)"><script>alert(2)</script>`;
    const created = await createKey(token, projectId, { name });
    expect(created.status).toBe(201);
    expect((created.body.apiKey as { name: string }).name).toBe(name);
    expect(created.headers.get("content-type")).toMatch(/^application\/json/);
  });

  it("refuses bad input with a clear 400", async () => {
    const { token, projectId } = await newUser();
    const cases: [unknown, string, RegExp][] = [
      [{ name: "x".repeat(10 * 1024) }, "invalid_field", /'name': must be at most 100 characters/],
      [{ name: "" }, "invalid_field", /'name': must not be empty/],
      [{}, "missing_field", /'name'/],
      [{ name: 42 }, "invalid_field", /'name'/],
      [{ name: "ok", allow: ["nowhere"] }, "invalid_field", /'allow'/],
      [{ name: "ok", allow: [] }, "invalid_field", /'allow'/],
      [{ name: "ok", expiresAt: Date.now() - 1000 }, "invalid_field", /'expires': must be in the future/],
      [{ name: "ok", expiresAt: "tomorrow" }, "invalid_field", /'expiresAt'/],
      [{ name: "ok", owner: "me" }, "invalid_field", /'owner'/],
      ["{not json", "invalid_json", /not valid JSON/],
      [[1, 2], "invalid_json", /JSON object/],
    ];
    for (const [body, code, message] of cases) {
      const res = await createKey(token, projectId, body as Record<string, unknown>);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body).toEqual({
        error: { type: "invalid_request_error", code, message: expect.stringMatching(message) },
      });
    }
    expect((await api(token, "GET", `/projects/${projectId}/keys`)).body.keys).toEqual([]);
  });

  it("answers unknown keys and malformed ids with 404", async () => {
    const { token, projectId } = await newUser();
    for (const keyId of ["abcdefghijklmnop", "x".repeat(3000), "UPPER"]) {
      const res = await api(token, "POST", `/projects/${projectId}/keys/${keyId}/revoke`);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: { type: "not_found_error", code: "not_found" } });
    }
  });

  it("answers other methods with 405 and Allow", async () => {
    const { token, projectId } = await newUser();
    const res = await api(token, "DELETE", `/projects/${projectId}/keys`);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST");
  });
});

describe("Idempotency-Key on key creation", () => {
  it("replays a repeated request without making a second key or showing the secret again", async () => {
    const { token, projectId } = await newUser();
    const headers = { "Idempotency-Key": "form-1" };
    const first = await createKey(token, projectId, { name: "once" }, headers);
    const second = await createKey(token, projectId, { name: "once" }, headers);
    expect(first.status).toBe(201);
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ apiKey: first.body.apiKey, replayed: true });
    expect((await api(token, "GET", `/projects/${projectId}/keys`)).body.keys).toHaveLength(1);
  });

  it("makes one key out of concurrent submissions", async () => {
    const { token, projectId } = await newUser();
    const headers = { "Idempotency-Key": "double-click" };
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => createKey(token, projectId, { name: "double" }, headers)),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    for (const answer of answers.filter((a) => a.status !== 201)) {
      expect([200, 409]).toContain(answer.status);
      expect(answer.body).not.toHaveProperty("key");
    }
    expect((await api(token, "GET", `/projects/${projectId}/keys`)).body.keys).toHaveLength(1);
  });

  it("refuses the same key for a different request", async () => {
    const { token, projectId } = await newUser();
    const headers = { "Idempotency-Key": "form-2" };
    expect((await createKey(token, projectId, { name: "first" }, headers)).status).toBe(201);
    const other = await createKey(token, projectId, { name: "second" }, headers);
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({
      error: { type: "idempotency_error", code: "idempotency_key_reused" },
    });
  });

  it("lets a refused request be corrected under the same key", async () => {
    const { token, projectId } = await newUser();
    const headers = { "Idempotency-Key": "form-3" };
    expect((await createKey(token, projectId, { name: "x".repeat(200) }, headers)).status).toBe(400);
    expect((await createKey(token, projectId, { name: "fixed" }, headers)).status).toBe(201);
  });

  it("scopes keys per user: another user's identical key is a new request", async () => {
    const a = await newUser();
    const b = await newUser();
    const headers = { "Idempotency-Key": "same-for-both" };
    expect((await createKey(a.token, a.projectId, { name: "k" }, headers)).status).toBe(201);
    expect((await createKey(b.token, b.projectId, { name: "k" }, headers)).status).toBe(201);
  });

  it("refuses an unusable Idempotency-Key", async () => {
    const { token, projectId } = await newUser();
    const res = await createKey(token, projectId, { name: "k" }, { "Idempotency-Key": "x".repeat(300) });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { code: "invalid_header" } });
  });
});

describe("authorization between projects", () => {
  it("never lets a user of project A see or touch project B", async () => {
    const a = await newUser();
    const b = await newUser();
    const bKey = await createKey(b.token, b.projectId, { name: "b's key" });
    const bKeyId = (bKey.body.apiKey as { keyId: string }).keyId;

    const attempts: [string, string, unknown?][] = [
      ["GET", `/projects/${b.projectId}/keys`],
      ["POST", `/projects/${b.projectId}/keys`, { name: "intruder" }],
      ["POST", `/projects/${b.projectId}/keys/${bKeyId}/revoke`],
      // A's own project, B's key id: still B's key, still not found.
      ["POST", `/projects/${a.projectId}/keys/${bKeyId}/revoke`],
      ["GET", "/projects/no-such-project/keys"],
    ];
    for (const [method, path, body] of attempts) {
      const res = await api(a.token, method, path, body);
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body).toMatchObject({ error: { type: "not_found_error", code: "not_found" } });
    }
    const bKeys = (await api(b.token, "GET", `/projects/${b.projectId}/keys`)).body.keys as {
      status: string;
    }[];
    expect(bKeys.map((k) => k.status)).toEqual(["active"]);
    expect(await status(bKey.body.key as string)).toBe(200);
  });
});

describe("no id oracle", () => {
  /** The same id with its last characters changed: one that does not exist. */
  const unknown = (id: string) => `${id.slice(0, -6)}${"zzzzzz"}`;
  /** An answer with the id it names replaced: what must not tell the two ids apart. */
  const shape = (answer: { status: number; body: unknown }, id: string) => ({
    status: answer.status,
    body: JSON.stringify(answer.body).replaceAll(id, "<id>"),
  });

  it("answers another project's ids as ids that do not exist, on every route that takes one", async () => {
    const a = await newUser();
    const b = await newUser();
    const aKey = (await createKey(a.token, a.projectId, { name: "a" })).body.key as string;
    const bCreated = await createKey(b.token, b.projectId, { name: "b" });
    const bKey = bCreated.body.key as string;
    const bKeyId = (bCreated.body.apiKey as { keyId: string }).keyId;
    const budget = await api(b.token, "PUT", `/projects/${b.projectId}/budgets`, { usd: "5", window: "day" });
    const bBudgetId = (budget.body.budget as { id: string }).id;
    const hook = { url: "http://127.0.0.1:9/hook" };
    const bHook = (await api(b.token, "POST", `/projects/${b.projectId}/webhooks`, hook)).body.webhook as {
      webhookId: string;
    };
    const aHook = (await api(a.token, "POST", `/projects/${a.projectId}/webhooks`, hook)).body.webhook as {
      webhookId: string;
    };
    const tested = await api(b.token, "POST", `/projects/${b.projectId}/webhooks/${bHook.webhookId}/test`);
    const bEventId = (tested.body.delivery as { eventId: string }).eventId;
    const call = await fetch(`${stack.url}/openai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${bKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
    });
    await call.arrayBuffer();
    const bTransaction = call.headers.get("x-dmt-transaction-id") ?? "";
    const deletion = await fetch(`${stack.url}/api/v1/data`, {
      method: "POST",
      headers: { authorization: `Bearer ${bKey}`, "content-type": "application/json" },
      body: JSON.stringify({ reason: "test", transaction_ids: ["none"] }),
    });
    const bRequestId = ((await deletion.json()) as { request_id: string }).request_id;
    await stack.drain();
    // Each id exists for its owner.
    expect((await api(b.token, "GET", `/projects/${b.projectId}/interactions/${bTransaction}`)).status).toBe(
      200,
    );
    expect(bEventId).toMatch(/^evt_/);

    const base = `/projects/${a.projectId}`;
    const dashboard: [string, (id: string) => string, string, ((id: string) => unknown)?][] = [
      ["POST", (id) => `${base}/keys/${id}/revoke`, bKeyId],
      ["PUT", (id) => `${base}/keys/${id}/policy`, bKeyId, () => ({ tpm: 10 })],
      ["PUT", () => `${base}/budgets`, bKeyId, (id) => ({ keyId: id, usd: "5", window: "day" })],
      ["DELETE", (id) => `${base}/budgets/${id}`, bBudgetId],
      ["GET", (id) => `${base}/interactions/${id}`, bTransaction],
      ["DELETE", (id) => `${base}/webhooks/${id}`, bHook.webhookId],
      ["GET", (id) => `${base}/webhooks/${id}/deliveries`, bHook.webhookId],
      ["POST", (id) => `${base}/webhooks/${id}/test`, bHook.webhookId],
      ["POST", (id) => `${base}/webhooks/${aHook.webhookId}/deliveries/${id}/resend`, bEventId],
    ];
    for (const [method, path, id, body] of dashboard) {
      const theirs = await api(a.token, method, path(id), body?.(id));
      const none = await api(a.token, method, path(unknown(id)), body?.(unknown(id)));
      expect(theirs.status, `${method} ${path(id)}`).toBe(404);
      expect(shape(theirs, id), `${method} ${path(id)}`).toEqual(shape(none, unknown(id)));
    }
    const dataApi = async (path: string) => {
      const res = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${aKey}` } });
      return { status: res.status, body: await res.json() };
    };
    for (const [path, id] of [
      ["/api/v1/transactions/", bTransaction],
      ["/api/v1/data/", bRequestId],
    ] as const) {
      const theirs = await dataApi(`${path}${id}`);
      expect(theirs.status, path).toBe(404);
      expect(shape(theirs, id), path).toEqual(shape(await dataApi(`${path}${unknown(id)}`), unknown(id)));
    }
    // B's things are untouched.
    expect(await status(bKey)).toBe(200);
  });
});

describe("tokens the dashboard API refuses", () => {
  it("refuses expired, wrong-audience, wrong-client and forged tokens with 401", async () => {
    const { projectId } = await newUser();
    const forged = (await tokenFor("user-x")).replace(
      /\.[^.]+$/,
      `.${Buffer.from("forged").toString("base64url")}`,
    );
    const tokens = [
      await tokenFor("user-x", { expiresInSeconds: -60 }),
      await tokenFor("user-x", { audience: "dmt-dashboard" }),
      await tokenFor("user-x", { clientId: "other-client" }),
      forged,
    ];
    for (const token of tokens) {
      const res = await api(token, "GET", `/projects/${projectId}/keys`);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ error: { type: "authentication_error", code: "invalid_token" } });
    }
  });

  it("refuses a service key, even a valid one", async () => {
    const { key } = await stack.newKey();
    const res = await api(key, "GET", "/me");
    expect(res.status).toBe(401);
    expect(res.body).toMatchObject({
      error: { code: "invalid_token", message: expect.stringMatching(/API keys are not accepted/) },
    });
  });

  it("and the data API refuses a dashboard token", async () => {
    const token = await tokenFor("user-y");
    const res = await fetch(`${stack.url}/api/v1/status`, { headers: { Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({
      error: { type: "authentication_error", code: "invalid_api_key" },
    });
  });

  it("refuses a request without a token", async () => {
    const res = await fetch(`${stack.url}/dashboard/api/me`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: { code: "missing_token" } });
  });
});

describe("responses", () => {
  it("carry the security headers and are never cached", async () => {
    const { token } = await newUser();
    for (const res of [await api(token, "GET", "/me"), await api("bad", "GET", "/me")]) {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(res.headers.get(name)).toBe(value);
      expect(res.headers.get("cache-control")).toBe("no-store");
    }
  });
});

describe("credits", () => {
  it("lets an operator grant credits, recorded in the ledger with their source", async () => {
    const { token, projectId } = await newUser({ operator: true });
    expect((await api(token, "GET", `/projects/${projectId}/credits`)).body).toEqual({
      balance: { projectId, availableMicros: 0, heldMicros: 0, chargedInFlightMicros: 0, openHolds: 0 },
    });
    const granted = await api(token, "POST", `/projects/${projectId}/credits/grants`, {
      usd: "12.50",
      source: "invoice",
      note: "invoice 2031-004",
    });
    expect(granted.status).toBe(201);
    expect(granted.body.balance).toMatchObject({ availableMicros: 12_500_000 });
    const ledger = await api(token, "GET", `/projects/${projectId}/credits/ledger`);
    expect(ledger.body.entries).toEqual([
      expect.objectContaining({
        type: "grant",
        deltaMicros: 12_500_000,
        source: "invoice",
        note: "invoice 2031-004",
      }),
    ]);
  });

  it("reads the ledger as a statement: the grant a credit line, a running balance, a 400 for a bad period", async () => {
    const { token, projectId } = await newUser({ operator: true });
    await api(token, "POST", `/projects/${projectId}/credits/grants`, { usd: "3", source: "invoice" });
    const statement = await api(token, "GET", `/projects/${projectId}/credits/statement`);
    expect(statement.status).toBe(200);
    expect(statement.body).toMatchObject({ grouping: "day", openingMicros: 0, closingMicros: 3_000_000 });
    expect(statement.body.lines).toEqual([
      expect.objectContaining({ kind: "grant", amountMicros: 3_000_000, balanceMicros: 3_000_000 }),
    ]);
    const reversed = await api(
      token,
      "GET",
      `/projects/${projectId}/credits/statement?from=2026-11-02&to=2026-11-01`,
    );
    expect(reversed.status).toBe(400);
    expect(reversed.body.error).toMatchObject({ code: "invalid_field" });
  });

  it("lets a viewer read a project but not change it", async () => {
    const owner = await newUser({ operator: true });
    const viewerToken = await tokenFor(`viewer-${process.pid}`);
    await api(viewerToken, "GET", "/me");
    await new DynamoMemberStore(stack.db, tableNames(process.env)).addMembership({
      userId: `viewer-${process.pid}`,
      projectId: owner.projectId,
      role: "viewer",
      createdAt: Date.now(),
    });
    expect((await api(viewerToken, "GET", `/projects/${owner.projectId}/keys`)).status).toBe(200);
    expect((await api(viewerToken, "GET", `/projects/${owner.projectId}/overview`)).status).toBe(200);
    const refused = await createKey(viewerToken, owner.projectId, { name: "nope" });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: "permission_error", code: "insufficient_permissions" });
    expect((await api(owner.token, "GET", `/projects/${owner.projectId}/keys`)).body.keys).toEqual([]);
  });

  it("refuses grants from non-operators and bad amounts", async () => {
    const member = await newUser();
    const refused = await api(member.token, "POST", `/projects/${member.projectId}/credits/grants`, {
      usd: "5",
      source: "promotion",
    });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({
      error: { type: "permission_error", code: "insufficient_permissions" },
    });

    const operator = await newUser({ operator: true });
    for (const body of [
      { usd: "-5", source: "promotion" },
      { usd: "1.1234567", source: "promotion" },
      { usd: "5", source: "Not A Source!" },
      { usd: 5, source: "promotion" },
    ]) {
      const res = await api(operator.token, "POST", `/projects/${operator.projectId}/credits/grants`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
    expect(
      (await api(operator.token, "GET", `/projects/${operator.projectId}/credits/ledger`)).body.entries,
    ).toEqual([]);
  });

  it("grants once per Idempotency-Key", async () => {
    const { token, projectId } = await newUser({ operator: true });
    const headers = { "Idempotency-Key": "grant-form-1" };
    const body = { usd: "3", source: "promotion" };
    expect((await api(token, "POST", `/projects/${projectId}/credits/grants`, body, headers)).status).toBe(
      201,
    );
    const again = await api(token, "POST", `/projects/${projectId}/credits/grants`, body, headers);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ replayed: true, balance: { availableMicros: 3_000_000 } });
  });

  it("pages the ledger newest first", async () => {
    const { token, projectId } = await newUser({ operator: true });
    for (let i = 1; i <= 27; i++) {
      await api(token, "POST", `/projects/${projectId}/credits/grants`, {
        usd: String(i),
        source: "promotion",
      });
    }
    const first = await api(token, "GET", `/projects/${projectId}/credits/ledger`);
    const firstEntries = first.body.entries as { deltaMicros: number }[];
    expect(firstEntries).toHaveLength(25);
    expect(firstEntries[0]?.deltaMicros).toBe(27_000_000);
    const second = await api(
      token,
      "GET",
      `/projects/${projectId}/credits/ledger?cursor=${encodeURIComponent(first.body.cursor as string)}`,
    );
    expect((second.body.entries as { deltaMicros: number }[]).map((e) => e.deltaMicros)).toEqual([
      2_000_000, 1_000_000,
    ]);
  });
});

describe("vendor keys (BYOK)", () => {
  const secret = "sk-test-0123456789abcdefWXYZ";

  it("sets, replaces and deletes a key, showing only its last 4 characters", async () => {
    const { token, projectId } = await newUser();
    const set = await api(token, "PUT", `/projects/${projectId}/vendor-keys/openai`, { key: secret });
    expect(set.status).toBe(200);
    expect(set.body.vendorKey).toMatchObject({ projectId, vendor: "openai", last4: "WXYZ" });
    const listed = await api(token, "GET", `/projects/${projectId}/vendor-keys`);
    expect(listed.body.vendorKeys).toEqual([set.body.vendorKey]);
    for (const answer of [set, listed])
      expect(JSON.stringify(answer.body)).not.toContain(secret.slice(0, -4));

    const replaced = await api(token, "PUT", `/projects/${projectId}/vendor-keys/openai`, {
      key: "sk-test-9999999999999999ABCD",
    });
    expect(replaced.body.vendorKey).toMatchObject({ last4: "ABCD" });

    expect((await api(token, "DELETE", `/projects/${projectId}/vendor-keys/openai`)).body).toEqual({
      deleted: true,
    });
    const gone = await api(token, "DELETE", `/projects/${projectId}/vendor-keys/openai`);
    expect(gone.status).toBe(404);
    expect((await api(token, "GET", `/projects/${projectId}/vendor-keys`)).body.vendorKeys).toEqual([]);
  });

  it("refuses keys with whitespace and unknown vendors, never echoing the key", async () => {
    const { token, projectId } = await newUser();
    const padded = await api(token, "PUT", `/projects/${projectId}/vendor-keys/groq`, { key: `${secret}\n` });
    expect(padded.status).toBe(400);
    expect(padded.body).toMatchObject({
      error: { code: "invalid_field", message: expect.stringMatching(/whitespace/) },
    });
    expect(JSON.stringify(padded.body)).not.toContain(secret);
    const unknown = await api(token, "PUT", `/projects/${projectId}/vendor-keys/mistral`, { key: secret });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ error: { message: expect.stringMatching(/'vendor'/) } });
  });

  it("keeps each project's keys and credits to its members", async () => {
    const a = await newUser({ operator: true });
    const b = await newUser();
    await api(b.token, "PUT", `/projects/${b.projectId}/vendor-keys/anthropic`, { key: secret });
    const attempts: [string, string, unknown?][] = [
      ["GET", `/projects/${b.projectId}/vendor-keys`],
      ["PUT", `/projects/${b.projectId}/vendor-keys/anthropic`, { key: "sk-intruder-000000000000" }],
      ["DELETE", `/projects/${b.projectId}/vendor-keys/anthropic`],
      ["GET", `/projects/${b.projectId}/credits`],
      ["GET", `/projects/${b.projectId}/credits/ledger`],
      // Being an operator does not open other projects.
      ["POST", `/projects/${b.projectId}/credits/grants`, { usd: "1", source: "promotion" }],
    ];
    for (const [method, path, body] of attempts) {
      expect((await api(a.token, method, path, body)).status, `${method} ${path}`).toBe(404);
    }
    const bKeys = (await api(b.token, "GET", `/projects/${b.projectId}/vendor-keys`)).body.vendorKeys;
    expect(bKeys).toEqual([expect.objectContaining({ vendor: "anthropic", last4: "WXYZ" })]);
    expect((await api(b.token, "GET", `/projects/${b.projectId}/credits`)).body).toMatchObject({
      balance: { availableMicros: 0 },
    });
  });
});

describe("budgets and key policies", () => {
  it("sets, lists with spend, changes and deletes budgets; refuses bad ones in the error shape", async () => {
    const { token, projectId } = await newUser();
    const key = await createKey(token, projectId, { name: "batch", models: "gpt-4o*", tpm: 5000 });
    expect(key.status).toBe(201);
    const apiKey = key.body.apiKey as { keyId: string; models: string[]; tpm: number };
    expect(apiKey).toMatchObject({ models: ["gpt-4o*"], tpm: 5000 });

    const set = await api(token, "PUT", `/projects/${projectId}/budgets`, {
      keyId: apiKey.keyId,
      usd: "20",
      window: "day",
    });
    expect(set.status).toBe(200);
    const budget = set.body.budget as { id: string; scope: string; limit_usd: string };
    expect(budget).toMatchObject({ scope: "key", limit_usd: "20.00" });
    const changed = await api(token, "PUT", `/projects/${projectId}/budgets`, {
      keyId: apiKey.keyId,
      usd: "25",
      window: "day",
      soft: true,
    });
    expect(changed.body.budget).toMatchObject({ id: budget.id, limit_usd: "25.00", soft: true });
    const listed = await api(token, "GET", `/projects/${projectId}/budgets`);
    expect(listed.body.budgets).toEqual([
      expect.objectContaining({ id: budget.id, spent_usd: "0.00", held_usd: "0.00" }),
    ]);

    for (const [body, message] of [
      [{ usd: "0", window: "day" }, /more than \$0/],
      [{ usd: "-1", window: "day" }, /more than \$0/],
      [{ usd: "5", window: "year" }, /must be one of day, month, total/],
      [{ keyId: apiKey.keyId, userId: "u", usd: "5", window: "day" }, /not both/],
    ] as const) {
      const refused = await api(token, "PUT", `/projects/${projectId}/budgets`, body);
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({
        type: "invalid_request_error",
        message: expect.stringMatching(message),
      });
    }
    // A key of another project.
    const other = await newUser();
    const foreign = await createKey(other.token, other.projectId, { name: "theirs" });
    const foreignId = (foreign.body.apiKey as { keyId: string }).keyId;
    const refused = await api(token, "PUT", `/projects/${projectId}/budgets`, {
      keyId: foreignId,
      usd: "5",
      window: "day",
    });
    // Answered as for a key that does not exist: no oracle for other projects' ids.
    expect(refused.status).toBe(404);
    expect((refused.body.error as { message: string }).message).toBe(`Key '${foreignId}' was not found.`);
    // Another project's budget is not found from here.
    expect(
      (await api(other.token, "DELETE", `/projects/${other.projectId}/budgets/${budget.id}`)).status,
    ).toBe(404);

    expect((await api(token, "DELETE", `/projects/${projectId}/budgets/${budget.id}`)).status).toBe(200);
    expect((await api(token, "GET", `/projects/${projectId}/budgets`)).body.budgets).toEqual([]);
  });

  it("updates a key's models and TPM, warning about a glob no model matches; refuses a TPM over the cap", async () => {
    const { token, projectId } = await newUser();
    const keyId = ((await createKey(token, projectId, { name: "k" })).body.apiKey as { keyId: string }).keyId;
    const updated = await api(token, "PUT", `/projects/${projectId}/keys/${keyId}/policy`, {
      models: "claude-*,no-such-model",
      tpm: 1000,
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({
      models: ["claude-*", "no-such-model"],
      tpm: 1000,
      warnings: ["'no-such-model' matches no model of the price catalogue"],
    });
    const cleared = await api(token, "PUT", `/projects/${projectId}/keys/${keyId}/policy`, {
      models: "*",
      tpm: 0,
    });
    expect(cleared.body).toEqual({ models: null, tpm: null, warnings: [] });
    const over = await api(token, "PUT", `/projects/${projectId}/keys/${keyId}/policy`, { tpm: 100_000_001 });
    expect(over.status).toBe(400);
    expect(over.body.error).toMatchObject({
      code: "invalid_field",
      message: expect.stringContaining("'tpm'"),
    });
  });
});

describe("privacy settings", () => {
  it("reads the defaults, saves a change and reads it back", async () => {
    const owner = await newUser();
    const path = `/projects/${owner.projectId}/privacy`;
    const before = await api(owner.token, "GET", path);
    expect(before.status).toBe(200);
    expect(before.body).toEqual({ privacy: { store: "full", retentionDays: null, bodyRetentionDays: null } });

    const saved = await api(owner.token, "PUT", path, {
      store: "metadata",
      retentionDays: 30,
      bodyRetentionDays: 7,
    });
    expect(saved.status).toBe(200);
    expect(saved.body).toEqual({ privacy: { store: "metadata", retentionDays: 30, bodyRetentionDays: 7 } });
    expect((await api(owner.token, "GET", path)).body).toEqual(saved.body);

    // null clears: kept until deleted.
    const cleared = await api(owner.token, "PUT", path, { retentionDays: null, bodyRetentionDays: null });
    expect(cleared.body).toEqual({
      privacy: { store: "metadata", retentionDays: null, bodyRetentionDays: null },
    });
    expect((await api(owner.token, "GET", path)).body).toEqual(cleared.body);
  });

  it.each([
    ["an unknown level", { store: "everything" }, "store"],
    ["zero days", { retentionDays: 0 }, "retentionDays"],
    ["more than 3650 days", { retentionDays: 3651 }, "retentionDays"],
    ["a fraction of a day", { bodyRetentionDays: 1.5 }, "bodyRetentionDays"],
    ["bodies kept longer than records", { retentionDays: 7, bodyRetentionDays: 30 }, "bodyRetentionDays"],
    ["an unknown field", { retention: 30 }, "retention"],
  ])("refuses %s with a 400", async (_name, body, field) => {
    const owner = await newUser();
    const path = `/projects/${owner.projectId}/privacy`;
    const refused = await api(owner.token, "PUT", path, body);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ type: "invalid_request_error", code: "invalid_field" });
    expect((refused.body.error as { message: string }).message).toContain(`'${field}'`);
    // Nothing was written.
    expect((await api(owner.token, "GET", path)).body).toEqual({
      privacy: { store: "full", retentionDays: null, bodyRetentionDays: null },
    });
  });

  it("lets a viewer read the settings but not change them", async () => {
    const owner = await newUser();
    const viewerId = `privacy-viewer-${process.pid}`;
    const viewerToken = await tokenFor(viewerId);
    await api(viewerToken, "GET", "/me");
    await new DynamoMemberStore(stack.db, tableNames(process.env)).addMembership({
      userId: viewerId,
      projectId: owner.projectId,
      role: "viewer",
      createdAt: Date.now(),
    });
    const path = `/projects/${owner.projectId}/privacy`;
    expect((await api(viewerToken, "GET", path)).status).toBe(200);
    const refused = await api(viewerToken, "PUT", path, { store: "none" });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ type: "permission_error", code: "insufficient_permissions" });
    expect(((await api(owner.token, "GET", path)).body.privacy as { store: string }).store).toBe("full");
  });
});
