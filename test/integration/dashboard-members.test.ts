import { readFileSync } from "node:fs";
import { join } from "node:path";
import { importJWK, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";

/**
 * The Members routes of the dashboard API (lambda/app/dashboard/members.ts) on the real local stack:
 * list, invite by email (the local provider knows one user, the development user), change a role,
 * remove; viewers read only; the personal project's owner cannot be changed; other projects stay
 * absent. Tokens are minted with the local provider's signing key, as in dashboard-api.test.ts.
 */

let stack: TestHost;
let signingKey: CryptoKey | Uint8Array;
let kid: string;
let alg: string;
let devUser: { sub: string; email: string };

beforeAll(async () => {
  stack = await startTestHost();
  const state = JSON.parse(readFileSync(join(stack.dataDir, "oidc.json"), "utf8")) as {
    signingKey: JWK;
    devUser: { sub: string; email: string };
  };
  alg = state.signingKey.alg ?? "";
  signingKey = await importJWK(state.signingKey, alg);
  kid = state.signingKey.kid ?? "";
  devUser = state.devUser;
});
afterAll(() => stack.stop());

function tokenFor(userId: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: "dmt-dashboard", scope: "dashboard" })
    .setProtectedHeader({ alg, typ: "at+jwt", kid })
    .setSubject(userId)
    .setIssuer(`${stack.url}/oidc`)
    .setAudience(`${stack.url}/dashboard/api`)
    .setIssuedAt(now - 5)
    .setExpirationTime(now + 600)
    .sign(signingKey);
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function api(token: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(`${stack.url}/dashboard/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

let users = 0;
/** A new user, signed in once so that its personal project exists. */
async function newUser(): Promise<{ token: string; userId: string; projectId: string }> {
  const userId = `member-test-${process.pid}-${++users}`;
  const token = await tokenFor(userId);
  const me = await api(token, "GET", "/me");
  const projects = me.body.projects as { projectId: string }[];
  return { token, userId, projectId: projects[0]?.projectId ?? "" };
}

const errorOf = (answer: Answer) => answer.body.error as { message: string; type: string; code: string };

describe("the Members routes", () => {
  let owner: { token: string; userId: string; projectId: string };
  let dev: string;
  const members = (token: string) => api(token, "GET", `/projects/${owner.projectId}/members`);

  beforeAll(async () => {
    owner = await newUser();
    dev = await tokenFor(devUser.sub);
    await api(dev, "GET", "/me");
  });

  it("lists the owner of a personal project, and says invitations are offered", async () => {
    const listed = await members(owner.token);
    expect(listed.status).toBe(200);
    expect(listed.body.canInvite).toBe(true);
    expect(listed.body.members).toEqual([
      { userId: owner.userId, role: "owner", addedAt: expect.any(Number), personal: true },
    ]);
  });

  it("invites a user by email with a role, once: a second invitation changes nothing", async () => {
    const path = `/projects/${owner.projectId}/members`;
    const invited = await api(owner.token, "POST", path, { email: " DEV@dmt.local ", role: "viewer" });
    expect(invited.status).toBe(201);
    expect(invited.body).toMatchObject({
      added: true,
      member: { userId: devUser.sub, email: devUser.email, role: "viewer", personal: false },
    });
    const again = await api(owner.token, "POST", path, { email: devUser.email, role: "admin" });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ added: false, member: { role: "viewer" } });
    const listed = (await members(owner.token)).body.members as { email?: string; role: string }[];
    expect(listed.map((m) => [m.email ?? "(owner)", m.role])).toEqual([
      ["(owner)", "owner"],
      [devUser.email, "viewer"],
    ]);
  });

  it("refuses invitations the CLI refuses, in the error shape", async () => {
    const path = `/projects/${owner.projectId}/members`;
    const unknown = await api(owner.token, "POST", path, { email: "nobody@example.com", role: "viewer" });
    expect(unknown.status).toBe(404);
    expect(errorOf(unknown).message).toContain("No dashboard user has the email nobody@example.com");
    const role = await api(owner.token, "POST", path, { email: devUser.email, role: "owner" });
    expect(role.status).toBe(400);
    expect(errorOf(role)).toMatchObject({ code: "invalid_field" });
    expect(errorOf(role).message).toContain("viewer, admin");
    const email = await api(owner.token, "POST", path, { email: "not-an-email", role: "viewer" });
    expect(errorOf(email).message).toContain("'email'");
    const missing = await api(owner.token, "POST", path, { role: "viewer" });
    expect(missing.status).toBe(400);
    expect(errorOf(missing).code).toBe("missing_field");
    const extra = await api(owner.token, "POST", path, { email: devUser.email, role: "viewer", x: 1 });
    expect(errorOf(extra).message).toContain("'x'");
  });

  it("lets a viewer list the members but change nothing", async () => {
    const listed = await members(dev);
    expect(listed.status).toBe(200);
    expect((listed.body.members as unknown[]).length).toBe(2);
    for (const [method, path, body] of [
      ["POST", "/members", { email: devUser.email, role: "admin" }],
      ["PUT", `/members/${devUser.sub}`, { role: "admin" }],
      ["DELETE", `/members/${owner.userId}`, undefined],
    ] as const) {
      const refused = await api(dev, method, `/projects/${owner.projectId}${path}`, body);
      expect(refused.status).toBe(403);
      expect(errorOf(refused)).toMatchObject({ type: "permission_error", code: "insufficient_permissions" });
    }
  });

  it("changes a member's role; the owner's role and access stay", async () => {
    const promoted = await api(owner.token, "PUT", `/projects/${owner.projectId}/members/${devUser.sub}`, {
      role: "admin",
    });
    expect(promoted.status).toBe(200);
    expect(promoted.body.member).toMatchObject({ userId: devUser.sub, role: "admin", email: devUser.email });
    // Now an admin, the development user may change the project, but not its owner.
    const demote = await api(dev, "PUT", `/projects/${owner.projectId}/members/${owner.userId}`, {
      role: "viewer",
    });
    expect(demote.status).toBe(400);
    expect(errorOf(demote).code).toBe("owner_membership");
    const remove = await api(dev, "DELETE", `/projects/${owner.projectId}/members/${owner.userId}`);
    expect(remove.status).toBe(400);
    const bad = await api(owner.token, "PUT", `/projects/${owner.projectId}/members/${devUser.sub}`, {
      role: "root",
    });
    expect(bad.status).toBe(400);
    const nobody = await api(owner.token, "PUT", `/projects/${owner.projectId}/members/nobody`, {
      role: "viewer",
    });
    expect(nobody.status).toBe(404);
    expect((await members(owner.token)).body.members).toMatchObject([{ role: "owner" }, { role: "admin" }]);
  });

  it("keeps members of one project out of another's list and changes", async () => {
    const stranger = await newUser();
    expect((await members(stranger.token)).status).toBe(404);
    const path = `/projects/${owner.projectId}/members/${devUser.sub}`;
    expect((await api(stranger.token, "PUT", path, { role: "viewer" })).status).toBe(404);
    expect((await api(stranger.token, "DELETE", path)).status).toBe(404);
    // And nothing changed.
    expect((await members(owner.token)).body.members).toMatchObject([{ role: "owner" }, { role: "admin" }]);
  });

  it("removes a member, who then no longer sees the project", async () => {
    const removed = await api(owner.token, "DELETE", `/projects/${owner.projectId}/members/${devUser.sub}`);
    expect(removed.status).toBe(200);
    expect(removed.body.member).toMatchObject({ userId: devUser.sub, role: "admin" });
    expect((await members(dev)).status).toBe(404);
    const again = await api(owner.token, "DELETE", `/projects/${owner.projectId}/members/${devUser.sub}`);
    expect(again.status).toBe(404);
    const me = (await api(dev, "GET", "/me")).body.projects as { projectId: string }[];
    expect(me.map((p) => p.projectId)).not.toContain(owner.projectId);
  });
});
