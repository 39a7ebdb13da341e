import { readFileSync } from "node:fs";
import { join } from "node:path";
import { importJWK, type JWK, SignJWT } from "jose";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoMemberStore } from "../../lambda/adapters/dynamodb/members";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { startTestHost, type TestHost } from "../support/host";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * Settings -> Alerts and Webhooks through the dashboard API of the real local stack: the same rules
 * and webhooks as the CLI's, a secret shown once, a test delivery in the log, and viewers kept to
 * reading.
 */

let stack: TestHost;
let receiver: WebhookReceiver;
let signingKey: CryptoKey | Uint8Array;
let kid: string;
let alg: string;

beforeAll(async () => {
  stack = await startTestHost();
  receiver = await startWebhookReceiver();
  const state = JSON.parse(readFileSync(join(stack.dataDir, "oidc.json"), "utf8")) as { signingKey: JWK };
  alg = state.signingKey.alg ?? "";
  signingKey = await importJWK(state.signingKey, alg);
  kid = state.signingKey.kid ?? "";
});
afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

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

async function api(token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${stack.url}/dashboard/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${token}` },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  return { status: res.status, body: (await res.json()) as any };
}

let users = 0;
async function newUser(): Promise<{ token: string; projectId: string; userId: string }> {
  const userId = `alerts-user-${process.pid}-${++users}`;
  const token = await tokenFor(userId);
  const me = await api(token, "GET", "/me");
  return { token, userId, projectId: me.body.projects[0].projectId };
}

describe("dashboard: alert rules", () => {
  it("sets, lists and deletes the rules, refusing bad input with 400 naming the field", async () => {
    const { token, projectId } = await newUser();
    const base = `/projects/${projectId}/alerts`;
    const set = await api(token, "PUT", base, { lowBalanceUsd: "5", budgetThresholds: "80,50,100" });
    expect(set.status).toBe(200);
    expect(set.body.rules).toEqual([
      expect.objectContaining({ ruleId: "low-balance", thresholdMicros: 5_000_000 }),
      expect.objectContaining({ ruleId: "budget-thresholds", thresholds: [50, 80, 100] }),
    ]);
    const listed = await api(token, "GET", base);
    expect(listed.body.rules.map((r: { ruleId: string }) => r.ruleId).sort()).toEqual([
      "budget-thresholds",
      "low-balance",
    ]);

    for (const [body, field] of [
      [{ budgetThresholds: "50,50" }, "budget_thresholds"],
      [{ budgetThresholds: "0" }, "budget_thresholds"],
      [{ budgetThresholds: "" }, "budget_thresholds"],
      [{ lowBalanceUsd: "-5" }, "low_balance_usd"],
      [{}, "low_balance_usd or budget_thresholds"],
      [{ thresholds: "50" }, "thresholds"],
    ] as const) {
      const refused = await api(token, "PUT", base, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error.type).toBe("invalid_request_error");
      expect(refused.body.error.message).toContain(field);
    }

    expect((await api(token, "DELETE", `${base}/budget-thresholds`)).status).toBe(200);
    expect((await api(token, "DELETE", `${base}/budget-thresholds`)).status).toBe(404);
    expect((await api(token, "DELETE", `${base}/nothing`)).status).toBe(404);
    expect((await api(token, "GET", base)).body.rules).toHaveLength(1);
  });
});

describe("dashboard: webhooks", () => {
  it("adds a webhook with its secret shown once, tests it and shows the delivery in the log", async () => {
    const { token, projectId } = await newUser();
    const base = `/projects/${projectId}/webhooks`;
    const added = await api(token, "POST", base, {
      url: receiver.url,
      events: "budget.exceeded,balance.low",
    });
    expect(added.status).toBe(201);
    const secret = added.body.secret as string;
    expect(secret).toMatch(/^whsec_/);
    const webhookId = added.body.webhook.webhookId as string;
    expect(added.body.webhook.events).toEqual(["budget.exceeded", "balance.low"]);

    const listed = await api(token, "GET", base);
    expect(listed.body.webhooks).toEqual([expect.objectContaining({ webhookId, url: receiver.url })]);
    expect(JSON.stringify(listed.body)).not.toContain(secret);

    const tested = await api(token, "POST", `${base}/${webhookId}/test`);
    expect(tested.status).toBe(200);
    expect(tested.body.delivery).toMatchObject({ status: "delivered", lastStatusCode: 200, attempts: 1 });
    const got = receiver.received.find((r) => r.body.includes(webhookId));
    expect(got).toBeDefined();
    expect(new Webhook(secret).verify(got?.body ?? "", got?.headers as Record<string, string>)).toMatchObject(
      {
        type: "webhook.test",
      },
    );
    const log = await api(token, "GET", `${base}/${webhookId}/deliveries`);
    expect(log.body.deliveries).toEqual([
      expect.objectContaining({ eventType: "webhook.test", status: "delivered", lastStatusCode: 200 }),
    ]);
    const eventId = log.body.deliveries[0].eventId as string;
    const resent = await api(token, "POST", `${base}/${webhookId}/deliveries/${eventId}/resend`);
    expect(resent.body.delivery).toMatchObject({ eventId, status: "delivered", attempts: 2 });

    for (const [body, text] of [
      [{ url: "ftp://example.com/hook" }, "url"],
      [{ url: receiver.url, events: "nothing.here" }, "events"],
      [{}, "url"],
    ] as const) {
      const refused = await api(token, "POST", base, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error.message).toContain(text);
    }
    expect((await api(token, "POST", `${base}/wh_nothing/test`)).status).toBe(404);
    expect((await api(token, "DELETE", `${base}/${webhookId}`)).status).toBe(200);
    expect((await api(token, "GET", base)).body.webhooks).toEqual([]);
  });

  it("lets a viewer read alerts, webhooks and deliveries, and refuses every change with 403", async () => {
    const owner = await newUser();
    const base = `/projects/${owner.projectId}`;
    const added = await api(owner.token, "POST", `${base}/webhooks`, { url: receiver.url });
    const webhookId = added.body.webhook.webhookId as string;
    const viewerId = `alerts-viewer-${process.pid}`;
    const viewer = await tokenFor(viewerId);
    await api(viewer, "GET", "/me");
    await new DynamoMemberStore(stack.db, tableNames(process.env)).addMembership({
      userId: viewerId,
      projectId: owner.projectId,
      role: "viewer",
      createdAt: Date.now(),
    });
    expect((await api(viewer, "GET", `${base}/alerts`)).status).toBe(200);
    expect((await api(viewer, "GET", `${base}/webhooks`)).status).toBe(200);
    expect((await api(viewer, "GET", `${base}/webhooks/${webhookId}/deliveries`)).status).toBe(200);
    for (const [method, path, body] of [
      ["PUT", `${base}/alerts`, { lowBalanceUsd: "5" }],
      ["DELETE", `${base}/alerts/low-balance`, undefined],
      ["POST", `${base}/webhooks`, { url: receiver.url }],
      ["DELETE", `${base}/webhooks/${webhookId}`, undefined],
      ["POST", `${base}/webhooks/${webhookId}/test`, undefined],
    ] as const) {
      const refused = await api(viewer, method, path, body);
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(refused.body.error).toMatchObject({
        type: "permission_error",
        code: "insufficient_permissions",
      });
    }
    expect((await api(owner.token, "GET", `${base}/webhooks`)).body.webhooks).toHaveLength(1);
  });
});
