import { readFileSync } from "node:fs";
import { join } from "node:path";
import { importJWK, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoDeletionRequests } from "../../lambda/adapters/dynamodb/deletion-requests";
import { DynamoMemberStore } from "../../lambda/adapters/dynamodb/members";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { hashUserId, newDeletionRequest } from "../../lambda/core/deletion";
import { startTestHost, type TestHost } from "../support/host";

/**
 * Settings, deletion requests, through the dashboard API on the real local stack: the same body and
 * refusals as the data API's `POST /api/v1/data`, processed by the same local runner; listed newest
 * first with their status; kept to the project's members. Tokens are minted with the local provider's
 * own signing key, as in dashboard-api.test.ts.
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

function tokenFor(userId: string, expiresInSeconds = 600): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: "dmt-dashboard", scope: "dashboard" })
    .setProtectedHeader({ alg, typ: "at+jwt", kid })
    .setSubject(userId)
    .setIssuer(`${stack.url}/oidc`)
    .setAudience(`${stack.url}/dashboard/api`)
    .setIssuedAt(now - 5)
    .setExpirationTime(now + expiresInSeconds)
    .sign(signingKey);
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
  text: string;
}

async function call(
  url: string,
  authorization: string | undefined,
  method: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(url, {
    method,
    headers: { ...(authorization ? { Authorization: authorization } : {}), ...headers },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { status: res.status, body: JSON.parse(text) as Record<string, unknown>, text };
}

const api = (token: string, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  call(`${stack.url}/dashboard/api${path}`, `Bearer ${token}`, method, body, headers);

let users = 0;
async function newUser(): Promise<{ token: string; projectId: string; path: string }> {
  const token = await tokenFor(`deletion-user-${process.pid}-${++users}`);
  const me = await api(token, "GET", "/me");
  const projectId = (me.body.projects as { projectId: string }[])[0]?.projectId ?? "";
  return { token, projectId, path: `/projects/${projectId}/deletion-requests` };
}

interface View {
  requestId: string;
  status: string;
  reason: string;
  userIdHash?: string;
  transactionIdCount: number;
  counts: Record<string, number>;
  createdAt: number;
  finishedAt?: number;
  error?: string;
}

const list = async (token: string, path: string, cursor?: string) => {
  const res = await api(token, "GET", cursor === undefined ? path : `${path}?cursor=${cursor}`);
  expect(res.status).toBe(200);
  return res.body as { requests: View[]; cursor?: string };
};

/** Reads the list until the request has finished (the local runner processes it in the background). */
async function finished(token: string, path: string, requestId: string): Promise<View> {
  let found: View | undefined;
  await expect
    .poll(
      async () => {
        found = (await list(token, path)).requests.find((r) => r.requestId === requestId);
        return found?.status;
      },
      { timeout: 60_000, interval: 100 },
    )
    .toMatch(/^(completed|failed)$/);
  return found as View;
}

describe("deletion requests from the dashboard", () => {
  it("lists none at first, then a new request, processed to completed, never showing the user id", async () => {
    const { token, projectId, path } = await newUser();
    expect(await list(token, path)).toEqual({ requests: [] });

    const userId = "alice@example.com";
    const created = await api(token, "POST", path, { reason: "GDPR erasure #1", user_id: userId });
    expect(created.status).toBe(202);
    const request = created.body.request as View;
    expect(request).toMatchObject({
      requestId: expect.stringMatching(/^del_[0-9a-f]{24}$/),
      status: expect.stringMatching(/^(queued|running|completed)$/),
      reason: "GDPR erasure #1",
      userIdHash: hashUserId(projectId, userId),
      transactionIdCount: 0,
    });
    expect(created.text).not.toContain(userId);

    const done = await finished(token, path, request.requestId);
    expect(done).toMatchObject({
      requestId: request.requestId,
      status: "completed",
      counts: { rowsDeleted: 0, filesRewritten: 0, filesDeleted: 0, copiesPurged: 0 },
      createdAt: request.createdAt,
    });
    expect(done.finishedAt).toBeGreaterThanOrEqual(request.createdAt);
    expect(JSON.stringify(await list(token, path))).not.toContain(userId);
  });

  it("is the data API's request: readable there with the project's key, in the same state", async () => {
    const { token, projectId, path } = await newUser();
    const ids = ["tx-1", "tx-2", "tx-1"];
    const created = await api(token, "POST", path, { reason: "cleanup", transaction_ids: ids });
    expect(created.status).toBe(202);
    const request = created.body.request as View;
    expect(request.transactionIdCount).toBe(2);
    await finished(token, path, request.requestId);
    const { key } = await stack.newKey({ projectId });
    const read = await call(`${stack.url}/api/v1/data/${request.requestId}`, `Bearer ${key}`, "GET");
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      request_id: request.requestId,
      status: "completed",
      transaction_ids: 2,
    });
  });

  it("refuses what the data API refuses, with the same answer, and makes nothing", async () => {
    const { token, path } = await newUser();
    const { key } = await stack.newKey();
    const bad: unknown[] = [
      {},
      { reason: "no target" },
      { reason: "", user_id: "u" },
      { reason: "empty user", user_id: "" },
      { reason: "10 KB user", user_id: "u".repeat(10 * 1024) },
      { reason: "257 characters", user_id: "u".repeat(257) },
      { reason: "not a string", user_id: 42 },
      { reason: "not an array", transaction_ids: "tx-1" },
      { reason: "empty array", transaction_ids: [] },
      { reason: "malformed id", transaction_ids: ["tx-1", "<script>"] },
      { reason: "space in id", transaction_ids: ["tx 1"] },
      { reason: "too long id", transaction_ids: ["t".repeat(129)] },
      { reason: "not a string id", transaction_ids: [7] },
      { reason: "too many ids", transaction_ids: Array.from({ length: 1001 }, (_, i) => `tx-${i}`) },
      { reason: "misspelt", userid: "u" },
      "{not json",
      "[]",
    ];
    for (const body of bad) {
      const ours = await api(token, "POST", path, body);
      const theirs = await call(`${stack.url}/api/v1/data`, `Bearer ${key}`, "POST", body);
      const label = JSON.stringify(body).slice(0, 60);
      expect(ours.status, label).toBe(400);
      expect(ours.body, label).toEqual(theirs.body);
      expect(ours.body.error).toMatchObject({ type: "invalid_request_error" });
      // A refused value is never echoed back.
      expect(ours.text, label).not.toContain("uuuuuuuuuu");
      expect(ours.text, label).not.toContain("<script>");
    }
    expect(await list(token, path)).toEqual({ requests: [] });
  });

  it("makes one request out of a double submit with one Idempotency-Key", async () => {
    const { token, path } = await newUser();
    const body = { reason: "double click", user_id: "bob" };
    const headers = { "Idempotency-Key": "deletion-form-1" };
    const answers = await Promise.all([
      api(token, "POST", path, body, headers),
      api(token, "POST", path, body, headers),
    ]);
    // One makes the request; the other finds it in progress (409) or, if it came second, replays it.
    const statuses = answers.map((a) => a.status).sort();
    expect([
      [202, 409],
      [200, 202],
    ]).toContainEqual(statuses);
    const made = answers.find((a) => a.status === 202)?.body.request as View | undefined;
    const first = made?.requestId;
    expect(first).toMatch(/^del_/);

    const again = await api(token, "POST", path, body, headers);
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ replayed: true, request: { requestId: first } });

    const other = await api(token, "POST", path, { ...body, user_id: "carol" }, headers);
    expect(other.status).toBe(409);
    expect(other.body).toMatchObject({ error: { code: "idempotency_key_reused" } });
    expect((await list(token, path)).requests.map((r) => r.requestId)).toEqual([first]);
  });

  it("pages the requests newest first", async () => {
    const { token, projectId, path } = await newUser();
    // Written straight to the store (not started): the listing is what is under test here.
    const store = new DynamoDeletionRequests(stack.db, tableNames(process.env).deletionRequests);
    const made: string[] = [];
    for (let i = 0; i < 23; i++) {
      const request = newDeletionRequest(
        projectId,
        { reason: `r${i}`, transactionIds: [`tx-${i}`] },
        1_700_000_000_000 + i,
      );
      await store.create(request);
      made.unshift(request.requestId);
    }
    const first = await list(token, path);
    expect(first.requests.map((r) => r.requestId)).toEqual(made.slice(0, 20));
    expect(first.requests.every((r) => r.status === "queued")).toBe(true);
    const second = await list(token, path, first.cursor);
    expect(second.requests.map((r) => r.requestId)).toEqual(made.slice(20));
    expect(second.cursor).toBeUndefined();

    const forged = await api(token, "GET", `${path}?cursor=bm90LWEtY3Vyc29y`);
    expect(forged.status).toBe(400);
    expect(forged.body).toMatchObject({
      error: { code: "invalid_field", message: expect.stringContaining("'cursor'") },
    });
  });
});

describe("deletion requests: who may", () => {
  it("never lets a user of project A list or request deletions in project B", async () => {
    const a = await newUser();
    const b = await newUser();
    const created = await api(b.token, "POST", b.path, { reason: "b's own", user_id: "b-user" });
    expect(created.status).toBe(202);
    await finished(b.token, b.path, (created.body.request as View).requestId);

    for (const [method, body] of [["GET"], ["POST", { reason: "intruder", user_id: "b-user" }]] as const) {
      for (const path of [
        b.path,
        "/projects/no-such-project/deletion-requests",
        "/projects/Not%20A%20Project/deletion-requests",
      ]) {
        const res = await api(a.token, method, path, body);
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(res.body).toMatchObject({ error: { type: "not_found_error" } });
      }
    }
    expect((await list(b.token, b.path)).requests).toHaveLength(1);
    expect((await list(a.token, a.path)).requests).toHaveLength(0);
  });

  it("lets any member of the project, not only its owner, list and request, as for keys", async () => {
    const owner = await newUser();
    const member = await newUser();
    await new DynamoMemberStore(stack.db, tableNames(process.env)).addMembership({
      userId: `deletion-user-${process.pid}-${users}`,
      projectId: owner.projectId,
      role: "member",
      createdAt: Date.now(),
    });
    const created = await api(member.token, "POST", owner.path, {
      reason: "member's",
      transaction_ids: ["tx-9"],
    });
    expect(created.status).toBe(202);
    const listed = await list(owner.token, owner.path);
    expect(listed.requests.map((r) => r.requestId)).toEqual([(created.body.request as View).requestId]);
    await finished(owner.token, owner.path, (created.body.request as View).requestId);
  });

  it("refuses no token, an expired token and a service key with 401", async () => {
    const { projectId, path } = await newUser();
    const { key } = await stack.newKey({ projectId });
    const url = `${stack.url}/dashboard/api${path}`;
    const expired = await tokenFor(`deletion-user-${process.pid}-${users}`, -60);
    for (const authorization of [undefined, `Bearer ${expired}`, `Bearer ${key}`]) {
      for (const method of ["GET", "POST"]) {
        const res = await call(
          url,
          authorization,
          method,
          method === "POST" ? { reason: "r", user_id: "u" } : undefined,
        );
        expect(res.status, `${method} ${authorization?.slice(0, 12)}`).toBe(401);
        expect(res.body).toMatchObject({ error: { type: "authentication_error" } });
      }
    }
  });

  it("answers other methods with 405 and Allow", async () => {
    const { token, path } = await newUser();
    const res = await fetch(`${stack.url}/dashboard/api${path}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST");
  });
});
