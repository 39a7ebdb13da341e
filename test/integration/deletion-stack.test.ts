import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";

/** Deletion through the running local stack: the same routes and local runner `npm start` serves. */
let stack: TestHost;
let key: string;
const today = () => new Date().toISOString().slice(0, 10);

async function api(path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${stack.url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  stack = await startTestHost({ DMT_WAREHOUSE_FLUSH_MS: "100" });
  ({ key } = await stack.newKey({ tier: "pro" }));
});
afterAll(() => stack.stop());

describe("POST /api/v1/data on the local stack", () => {
  it("deletes one user's interactions and keeps the other's", async () => {
    const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1` });
    for (const user of ["u1", "u2", "u1"]) {
      await openai.chat.completions.create({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: `hello from ${user}` }],
        user,
      });
    }
    await stack.drain();

    const queued = await api("/api/v1/data", { user_id: "u1", reason: "user asked to be forgotten" });
    expect(queued.status).toBe(202);
    expect(queued.json).toMatchObject({ status: "ok", message: "Deletion request queued" });
    const requestId = String(queued.json.request_id);

    let state: Record<string, unknown> = {};
    for (let i = 0; i < 200 && state.status !== "completed" && state.status !== "failed"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      state = (await api(`/api/v1/data/${requestId}`)).json;
    }
    expect(state).toMatchObject({ status: "completed", counts: { rows_deleted: 2 } });
    expect(JSON.stringify(state)).not.toContain('"u1"');

    const rows = (await api("/api/v1/exports", { format: "json", range: { start: today(), end: today() } }))
      .json as unknown as { user_id: string }[];
    expect(rows.map((r) => r.user_id)).toEqual(["u2"]);
  });

  it("refuses a request without a reason", async () => {
    const res = await api("/api/v1/data", { user_id: "u2" });
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: { type: "invalid_request_error" } });
  });
});
