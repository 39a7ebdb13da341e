import { readFileSync } from "node:fs";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { importJWK, type JWK, SignJWT } from "jose";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { startTestHost, type TestHost } from "../support/host";

/**
 * The Interactions, Usage and Settings parts of the dashboard API on the real local stack: calls made
 * with the official SDKs through the proxy (metering on), written by the warehouse consumer to the
 * index and rollups, read back through the dashboard API with tokens of the local provider's key.
 */

let stack: TestHost;
let signingKey: CryptoKey | Uint8Array;
let kid: string;
let alg: string;

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
  text: string;
}

function tokenFor(userId: string, operator = false): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    client_id: "dmt-dashboard",
    scope: "dashboard",
    ...(operator ? { "cognito:groups": ["operators"] } : {}),
  })
    .setProtectedHeader({ alg, typ: "at+jwt", kid })
    .setSubject(userId)
    .setIssuer(`${stack.url}/oidc`)
    .setAudience(`${stack.url}/dashboard/api`)
    .setIssuedAt(now - 5)
    .setExpirationTime(now + 600)
    .sign(signingKey);
}

async function api(token: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${stack.url}/dashboard/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // a download: the test reads `text`
  }
  return { status: res.status, headers: res.headers, body: parsed, text };
}

async function signedIn(userId: string, operator = false): Promise<{ token: string; projectId: string }> {
  const token = await tokenFor(userId, operator);
  const me = await api(token, "GET", "/me");
  return { token, projectId: (me.body.projects as { projectId: string }[])[0]?.projectId ?? "" };
}

interface Row {
  transaction_id: string;
  vendor: string;
  model: string | null;
  user_id: string | null;
  billing_mode: string;
  status_code: number;
  input_tokens: number;
  output_tokens: number;
  cost_micros: number | null;
  started_at: number;
  latency_ms: number;
  streamed: boolean;
}

const today = () => new Date().toISOString().slice(0, 10);
const HTML_USER = `<img src=x onerror="alert(1)">`;

let alice: { token: string; projectId: string };
let bob: { token: string; projectId: string };
let key: string;
let keyId: string;

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  const state = JSON.parse(readFileSync(join(stack.dataDir, "oidc.json"), "utf8")) as { signingKey: JWK };
  alg = state.signingKey.alg ?? "";
  signingKey = await importJWK(state.signingKey, alg);
  kid = state.signingKey.kid ?? "";

  alice = await signedIn("alice");
  bob = await signedIn("bob");
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(alice.projectId, 5_000_000, "test");
  const created = (await api(alice.token, "POST", `/projects/${alice.projectId}/keys`, { name: "sdk" })).body;
  key = created.key as string;
  keyId = (created.apiKey as { keyId: string }).keyId;

  const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
  await openai.chat.completions.create({
    model: "gpt-4o-mini",
    messages: [{ role: "user", content: "count the apples" }],
    user: "u-alice",
  });
  const stream = await openai.chat.completions.create(
    { model: "gpt-4o-mini", messages: [{ role: "user", content: "stream please" }], stream: true },
    { headers: { "X-User-ID": HTML_USER } },
  );
  for await (const _ of stream);
  // A model without a price: refused by metering, recorded as a failure.
  await expect(
    openai.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }),
  ).rejects.toThrow();
  const anthropic = new Anthropic({ apiKey: key, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
  await anthropic.messages.create({
    model: "claude-haiku-4-5",
    max_tokens: 32,
    messages: [{ role: "user", content: "hello" }],
  });
  await stack.drain();
});
afterAll(() => stack.stop());

const list = async (who: { token: string; projectId: string }, query = "") =>
  api(who.token, "GET", `/projects/${who.projectId}/interactions${query}`);

describe("the interactions list", () => {
  it("shows every call, newest first, with tokens, cost and latency", async () => {
    const res = await list(alice);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const rows = res.body.interactions as Row[];
    expect(rows.map((r) => [r.vendor, r.model, r.status_code])).toEqual([
      ["anthropic", "claude-haiku-4-5", 200],
      ["openai", "no-such-model", 404],
      ["openai", "gpt-4o-mini", 200],
      ["openai", "gpt-4o-mini", 200],
    ]);
    expect(res.body.cursor).toBeUndefined();
    const plain = rows[3] as Row;
    expect(plain).toMatchObject({ user_id: "u-alice", billing_mode: "managed", streamed: false });
    expect(plain.input_tokens).toBeGreaterThan(0);
    expect(plain.output_tokens).toBeGreaterThan(0);
    expect(plain.cost_micros).toBeGreaterThan(0);
    expect(plain.latency_ms).toBeGreaterThanOrEqual(0);
    expect(rows[2]).toMatchObject({ user_id: HTML_USER, streamed: true });
    expect(rows.every((r, i) => i === 0 || (rows[i - 1] as Row).started_at >= r.started_at)).toBe(true);
    // Bodies stay in the detail view.
    expect(JSON.stringify(res.body)).not.toContain("count the apples");
  });

  it("filters by vendor, model, key, user id (markup and all), status, billing mode and day", async () => {
    const ids = async (query: string) =>
      ((await list(alice, query)).body.interactions as Row[]).map((r) => r.model);
    expect(await ids("?vendor=anthropic")).toEqual(["claude-haiku-4-5"]);
    expect(await ids("?model=gpt-4o-mini")).toEqual(["gpt-4o-mini", "gpt-4o-mini"]);
    // Part of a model's name, in any case.
    expect(await ids("?model=MINI")).toEqual(["gpt-4o-mini", "gpt-4o-mini"]);
    expect(await ids("?model=haiku")).toEqual(["claude-haiku-4-5"]);
    expect(await ids(`?key_id=${keyId}`)).toHaveLength(4);
    expect(await ids("?key_id=aaaaaaaaaaaaaaaa")).toEqual([]);
    expect(await ids(`?user_id=${encodeURIComponent(HTML_USER)}`)).toEqual(["gpt-4o-mini"]);
    expect(await ids("?status=error")).toEqual(["no-such-model"]);
    expect(await ids("?status=404")).toEqual(["no-such-model"]);
    expect(await ids("?status=success&vendor=openai")).toEqual(["gpt-4o-mini", "gpt-4o-mini"]);
    expect(await ids("?billing_mode=byok")).toEqual([]);
    expect(await ids(`?from=${today()}&to=${today()}&vendor=openai&model=gpt-4o-mini`)).toHaveLength(2);
    expect(await ids("?from=2026-01-01&to=2026-01-02")).toEqual([]);
  });

  it("pages with a cursor bound to the project and the filters", async () => {
    const first = await list(alice, "?limit=3");
    expect(first.body.interactions).toHaveLength(3);
    const cursor = first.body.cursor as string;
    const second = await list(alice, `?limit=3&cursor=${cursor}`);
    expect(second.status).toBe(200);
    expect(second.body.interactions).toHaveLength(1);
    expect(second.body.cursor).toBeUndefined();
    const seen = [...(first.body.interactions as Row[]), ...(second.body.interactions as Row[])];
    expect(new Set(seen.map((r) => r.transaction_id)).size).toBe(4);

    // Bob cannot use Alice's cursor, nor a forged one, nor one of other filters: 400, never rows.
    for (const [who, query] of [
      [bob, `?limit=3&cursor=${cursor}`],
      [alice, `?limit=3&vendor=openai&cursor=${cursor}`],
      [alice, "?cursor=eyJwIjoiMDAwIiwicSI6IngifQ"],
      [alice, `?cursor=${"A".repeat(5000)}`],
      [alice, "?cursor=%3Cscript%3E"],
    ] as const) {
      const res = await list(who, query);
      expect(res.status, query).toBe(400);
      expect(res.body).toEqual({
        error: {
          type: "invalid_request_error",
          code: "invalid_field",
          message: expect.stringContaining("'cursor'"),
        },
      });
    }
  });

  it("refuses filter values of the wrong type with a 400 naming the parameter", async () => {
    for (const [query, field] of [
      ["?limit=ten", "limit"],
      ["?limit=-1", "limit"],
      ["?status=broken", "status"],
      ["?vendor=azure", "vendor"],
      ["?billing_mode=credits", "billing_mode"],
      ["?from=2026-13-01", "from"],
      ["?to=tomorrow", "to"],
      ["?vendor=openai&vendor=groq", "vendor"],
      ["?sort=oldest", "sort"],
      ["?user_id=", "user_id"],
      ["?model=%20%20", "model"],
      ["?key_id=ABCDEFGHIJKLMNOP", "key_id"],
      ["?key_id=dmt_abc", "key_id"],
    ]) {
      const res = await list(alice, query);
      expect(res.status, query).toBe(400);
      expect((res.body.error as { message: string }).message).toContain(`'${field}'`);
    }
  });

  it("shows a project only to its members", async () => {
    expect((await list(bob)).body.interactions).toEqual([]);
    const res = await api(bob.token, "GET", `/projects/${alice.projectId}/interactions`);
    expect(res.status).toBe(404);
  });
});

describe("the interaction detail", () => {
  it("has the request and response bodies, tokens, cost and latency", async () => {
    const rows = (await list(alice, "?model=gpt-4o-mini")).body.interactions as Row[];
    const streamed = rows.find((r) => r.streamed) as Row;
    const res = await api(
      alice.token,
      "GET",
      `/projects/${alice.projectId}/interactions/${streamed.transaction_id}`,
    );
    expect(res.status).toBe(200);
    const interaction = res.body.interaction as Record<string, unknown>;
    expect(interaction).toMatchObject({
      transaction_id: streamed.transaction_id,
      project_id: alice.projectId,
      streamed: true,
      input_tokens: streamed.input_tokens,
      output_tokens: streamed.output_tokens,
      cost_micros: streamed.cost_micros,
    });
    expect(String(interaction.request_body)).toContain("stream please");
    expect(typeof interaction.response_body).toBe("string");
    expect(JSON.stringify(interaction)).not.toContain(key.slice(21));
  });

  it("is not found for another project's interaction or an id that cannot exist", async () => {
    const [row] = (await list(alice)).body.interactions as Row[];
    const theirs = await api(
      bob.token,
      "GET",
      `/projects/${bob.projectId}/interactions/${row?.transaction_id}`,
    );
    expect(theirs.status).toBe(404);
    for (const id of ["no-such-id", "%3Cb%3E", "x".repeat(300)]) {
      const res = await api(alice.token, "GET", `/projects/${alice.projectId}/interactions/${id}`);
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ error: { type: "not_found_error", code: "not_found" } });
    }
  });
});

describe("usage", () => {
  it("adds up requests, tokens and cost per day by vendor and model", async () => {
    const res = await api(alice.token, "GET", `/projects/${alice.projectId}/usage`);
    expect(res.status).toBe(200);
    const report = res.body as {
      days: string[];
      series: {
        vendor: string;
        model: string;
        requests: number[];
        cost_micros: number[];
        errors: number[];
      }[];
      totals: Record<string, { requests: number; cost_micros: number }>;
    };
    expect(report.days).toHaveLength(30);
    expect(report.days.at(-1)).toBe(today());
    const rows = (await list(alice)).body.interactions as Row[];
    const last = (values: number[]) => values.at(-1);
    const gpt = report.series.find((s) => s.model === "gpt-4o-mini");
    expect(last(gpt?.requests ?? [])).toBe(2);
    const cost = rows
      .filter((r) => r.model === "gpt-4o-mini")
      .reduce((sum, r) => sum + (r.cost_micros ?? 0), 0);
    expect(last(gpt?.cost_micros ?? [])).toBe(cost);
    expect(last(report.series.find((s) => s.model === "no-such-model")?.errors ?? [])).toBe(1);
    expect(report.totals.managed?.requests).toBe(4);
  });

  it("refuses a range it cannot show", async () => {
    const path = `/projects/${alice.projectId}/usage`;
    expect((await api(alice.token, "GET", `${path}?from=2020-01-01&to=2026-01-01`)).status).toBe(400);
    expect((await api(alice.token, "GET", `${path}?from=soon`)).status).toBe(400);
    expect((await api(alice.token, "GET", `${path}?vendor=openai`)).status).toBe(400);
  });
});

describe("settings", () => {
  it("sets, shows and clears an s3 export destination", async () => {
    const path = `/projects/${alice.projectId}/export-destination`;
    expect((await api(alice.token, "GET", path)).body).toEqual({ exportDestination: null });
    const set = await api(alice.token, "PUT", path, { url: "s3://acme-exports/dmt/daily" });
    expect(set.body).toEqual({ exportDestination: { url: "s3://acme-exports/dmt/daily/" } });
    expect((await api(alice.token, "GET", path)).body).toEqual(set.body);
    expect((await api(bob.token, "GET", `/projects/${bob.projectId}/export-destination`)).body).toEqual({
      exportDestination: null,
    });
    for (const body of [
      { url: "gs://bucket" },
      { url: "ftp://example.com/exports" },
      { url: "exports/daily" },
      { url: "/var/exports" },
      { url: "file://exports/daily" },
      { url: "file:///tmp/../etc" },
      { url: "s3://Bad_Bucket" },
      { url: 42 },
      {},
      { url: "s3://ok-bucket", extra: 1 },
    ]) {
      const res = await api(alice.token, "PUT", path, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error, JSON.stringify(body)).toMatchObject({ type: "invalid_request_error" });
    }
    // Nothing refused changed the destination.
    expect((await api(alice.token, "GET", path)).body).toEqual(set.body);
    expect((await api(alice.token, "DELETE", path)).body).toEqual({ exportDestination: null });
    expect((await api(alice.token, "GET", path)).body).toEqual({ exportDestination: null });
  });

  it("takes a local folder as the destination on the local stack, and clears it when saved empty", async () => {
    const path = `/projects/${alice.projectId}/export-destination`;
    const folder = join(stack.dataDir, "my exports");
    const set = await api(alice.token, "PUT", path, { url: ` file://${folder} ` });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ exportDestination: { url: `file://${folder.replaceAll(" ", "%20")}` } });
    expect((await api(alice.token, "GET", path)).body).toEqual(set.body);
    const refused = await api(alice.token, "PUT", path, { url: "file:relative/folder" });
    expect(refused.body).toEqual({
      error: {
        type: "invalid_request_error",
        code: "invalid_field",
        message: expect.stringContaining("'url'"),
      },
    });
    for (const empty of ["", "   "]) {
      const cleared = await api(alice.token, "PUT", path, { url: empty });
      expect(cleared.body).toEqual({ exportDestination: null });
      expect((await api(alice.token, "GET", path)).body).toEqual({ exportDestination: null });
    }
  });

  it("lets only operators change a project's tier", async () => {
    const path = `/projects/${alice.projectId}/tier`;
    const refused = await api(alice.token, "PUT", path, { tier: "pro" });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: { code: "insufficient_permissions" } });

    // An operator who is a member of the project (operators see projects they belong to).
    const operator = await signedIn("alice", true);
    expect((await api(operator.token, "PUT", path, { tier: "gold" })).status).toBe(400);
    const changed = await api(operator.token, "PUT", path, { tier: "pro" });
    expect(changed.body).toEqual({ project: { projectId: alice.projectId, tier: "pro" } });
    const me = await api(alice.token, "GET", "/me");
    expect((me.body.projects as { tier: string }[])[0]?.tier).toBe("pro");
  });

  it("answers a short-lived download URL of the project's data export, which the browser follows without the token", async () => {
    const before = Date.now();
    const res = await api(alice.token, "POST", `/projects/${alice.projectId}/exports`, {
      format: "csv",
      range: { start: today(), end: today() },
      filters: { vendor: "openai" },
    });
    expect(res.status).toBe(200);
    const answer = res.body as { download_url: string; file_name: string; expires_at: string };
    expect(answer.file_name).toBe(`dmt-export-${alice.projectId}-${today()}-to-${today()}.csv`);
    expect(answer.download_url.startsWith(`${stack.url}/dashboard/api/downloads/`)).toBe(true);
    // Five minutes.
    const lifetime = Date.parse(answer.expires_at) - before;
    expect(lifetime).toBeGreaterThan(4 * 60_000);
    expect(lifetime).toBeLessThanOrEqual(5 * 60_000 + 1_000);

    const file = await fetch(answer.download_url);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-disposition")).toBe(`attachment; filename="${answer.file_name}"`);
    expect(file.headers.get("cache-control")).toBe("no-store");
    const text = await file.text();
    const lines = text.trim().split("\r\n");
    expect(lines[0]).toMatch(/^schema_version,transaction_id,/);
    expect(lines).toHaveLength(4);
    expect(text).not.toContain("claude-haiku");

    // A link edited to name another project, or cut short, is refused in the service's shape.
    const token = answer.download_url.slice(answer.download_url.lastIndexOf("/") + 1);
    const [payload = "", signature = ""] = token.split(".");
    const edited = Buffer.from(
      Buffer.from(payload, "base64url").toString("utf8").replaceAll(alice.projectId, bob.projectId),
    ).toString("base64url");
    for (const bad of [`${edited}.${signature}`, payload, `${payload}.`, "x"]) {
      const refused = await fetch(`${stack.url}/dashboard/api/downloads/${bad}`);
      expect(refused.status).toBe(403);
      expect(await refused.json()).toMatchObject({
        error: { type: "permission_error", code: "download_link_invalid" },
      });
    }

    const empty = await api(bob.token, "POST", `/projects/${bob.projectId}/exports`, {
      format: "json",
      range: { start: today(), end: today() },
    });
    const emptyFile = await fetch((empty.body as { download_url: string }).download_url);
    expect(await emptyFile.json()).toEqual([]);
    const bad = await api(alice.token, "POST", `/projects/${alice.projectId}/exports`, { format: "xml" });
    expect(bad.status).toBe(400);
    // FOCUS is the data API's: refused here, never answered with interaction rows.
    const focus = await api(alice.token, "POST", `/projects/${alice.projectId}/exports`, {
      format: "csv",
      schema: "focus",
      range: { start: today(), end: today() },
    });
    expect(focus.status).toBe(400);
    expect(focus.text).toContain("schema");
  });
});

interface Breakdown {
  lines: {
    id: string | null;
    deleted: boolean;
    requests: number;
    cost_micros: number;
    charged_micros: number;
  }[];
  totals: { requests: number; cost_micros: number; charged_micros: number; input_tokens: number };
}

describe("usage by key and by end user", () => {
  const breakdown = async (query: string) => {
    const res = await api(alice.token, "GET", `/projects/${alice.projectId}/usage/breakdown${query}`);
    expect(res.status, query).toBe(200);
    return res.body as unknown as Breakdown;
  };
  const usageTotals = async () =>
    (await api(alice.token, "GET", `/projects/${alice.projectId}/usage`)).body.totals as Record<
      string,
      { requests: number; cost_micros: number }
    >;

  it("sums the period's calls per key and per user, agreeing with the usage totals", async () => {
    const byKey = await breakdown("?by=key");
    const usage = await usageTotals();
    expect(byKey.lines).toEqual([
      expect.objectContaining({
        id: keyId,
        deleted: false,
        requests: 4,
        cost_micros: usage.managed?.cost_micros,
      }),
    ]);
    expect(byKey.totals.charged_micros).toBe(usage.managed?.cost_micros);
    const byUser = await breakdown(`?by=user&from=${today()}&to=${today()}`);
    expect(byUser.lines.map((l) => [l.id, l.requests]).sort()).toEqual([
      [HTML_USER, 1],
      ["u-alice", 1],
    ]);
    // Bob's project has its own rows: none.
    const bobs = await api(bob.token, "GET", `/projects/${bob.projectId}/usage/breakdown?by=key`);
    expect((bobs.body as unknown as Breakdown).lines).toEqual([]);
  });

  it("refuses a breakdown it cannot give with a 400 naming the parameter", async () => {
    for (const [query, field, code] of [
      ["", "by", "missing_field"],
      ["?by=model", "by", "invalid_field"],
      ["?by=key&by=user", "by", "invalid_field"],
      ["?by=key&from=2026-11-20&to=2026-11-10", "from", "invalid_field"],
      ["?by=key&from=2020-01-01&to=2026-01-01", "from", "invalid_field"],
      ["?by=user&to=tomorrow", "to", "invalid_field"],
      ["?by=user&vendor=openai", "vendor", "invalid_field"],
    ]) {
      const res = await api(alice.token, "GET", `/projects/${alice.projectId}/usage/breakdown${query}`);
      expect(res.status, query).toBe(400);
      expect(res.body, query).toEqual({
        error: { type: "invalid_request_error", code, message: expect.stringContaining(`'${field}'`) },
      });
    }
  });

  it("keeps every total after a user's privacy deletion; the user's line is a deleted user's", async () => {
    const before = {
      key: await breakdown("?by=key"),
      user: await breakdown("?by=user"),
      usage: await usageTotals(),
    };
    const path = `/projects/${alice.projectId}/deletion-requests`;
    const created = await api(alice.token, "POST", path, { reason: "erasure", user_id: "u-alice" });
    expect(created.status).toBe(202);
    const requestId = (created.body.request as { requestId: string }).requestId;
    await expect
      .poll(
        async () =>
          (
            (await api(alice.token, "GET", path)).body.requests as { requestId: string; status: string }[]
          ).find((r) => r.requestId === requestId)?.status,
        { timeout: 120_000, interval: 250 },
      )
      .toBe("completed");
    // The user's interaction is gone from the list; the figures are not.
    expect(((await list(alice, "?user_id=u-alice")).body.interactions as Row[]).length).toBe(0);
    expect(await usageTotals()).toEqual(before.usage);
    expect(await breakdown("?by=key")).toEqual(before.key);
    const after = await breakdown("?by=user");
    expect(after.totals).toEqual(before.user.totals);
    expect(after.lines.map((l) => [l.id, l.deleted, l.requests]).sort()).toEqual([
      [null, true, 1],
      [HTML_USER, false, 1],
    ]);
    expect(JSON.stringify(after)).not.toContain("u-alice");
  });
});
