import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { parseUsd } from "../../lambda/core/credits";
import { startTestHost, type TestHost } from "../support/host";

/**
 * The cost of each call: `x-dmt-cost-usd` and `x-dmt-billing-mode` on answers sent whole, and
 * `GET /api/v1/transactions/{id}` with the call's summary for keys of its project only.
 */

const WAIT = { timeout: 30_000, interval: 100 };

let stack: TestHost;
let owner: { key: string; projectId: string };
let stranger: { key: string };

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" });
  owner = await stack.newKey();
  stranger = await stack.newKey();
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(owner.projectId, parseUsd("10"), "test");
});

afterAll(async () => {
  await stack?.stop();
});

const chat = (key: string, stream = false) =>
  fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "gpt-4o-mini", stream, messages: [{ role: "user", content: "cost?" }] }),
  });

const transaction = (key: string, id: string) =>
  fetch(`${stack.url}/api/v1/transactions/${id}`, { headers: { authorization: `Bearer ${key}` } });

async function summaryOf(key: string, id: string): Promise<Record<string, unknown>> {
  await stack.drain();
  let body: Record<string, unknown> = {};
  await expect
    .poll(async () => {
      const res = await transaction(key, id);
      body = (await res.json()) as Record<string, unknown>;
      return res.status;
    }, WAIT)
    .toBe(200);
  return body;
}

describe("the cost of a call", () => {
  it("an answer sent whole says its cost and billing mode, as its transaction does", async () => {
    const res = await chat(owner.key);
    expect(res.status).toBe(200);
    const answer = (await res.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    const cost = res.headers.get("x-dmt-cost-usd");
    expect(cost).toMatch(/^\d+\.\d{2,6}$/);
    expect(parseUsd(cost ?? "")).toBeGreaterThan(0);
    expect(res.headers.get("x-dmt-billing-mode")).toBe("managed");
    const id = res.headers.get("x-dmt-transaction-id") ?? "";

    const summary = await summaryOf(owner.key, id);
    expect(summary).toMatchObject({
      transaction_id: id,
      status: "success",
      status_code: 200,
      billing_mode: "managed",
      cost_usd: cost,
      model: "gpt-4o-mini",
      streamed: false,
      usage: {
        input_tokens: answer.usage.prompt_tokens,
        output_tokens: answer.usage.completion_tokens,
      },
    });
    expect(JSON.stringify(summary)).not.toContain("cost?");
  });

  it("a stream's headers carry the billing mode only; its cost is in the transaction", async () => {
    const res = await chat(owner.key, true);
    expect(res.status).toBe(200);
    await res.text();
    expect(res.headers.get("x-dmt-cost-usd")).toBeNull();
    expect(res.headers.get("x-dmt-billing-mode")).toBe("managed");
    const summary = await summaryOf(owner.key, res.headers.get("x-dmt-transaction-id") ?? "");
    expect(summary).toMatchObject({
      streamed: true,
      billing_mode: "managed",
      cost_usd: expect.stringMatching(/^\d+\.\d+$/),
    });
  });

  it("another project's key, an unknown id and a malformed id get 404 in the error shape", async () => {
    const res = await chat(owner.key);
    await res.arrayBuffer();
    const id = res.headers.get("x-dmt-transaction-id") ?? "";
    await summaryOf(owner.key, id);
    for (const [key, path] of [
      [stranger.key, id],
      [owner.key, "tx-that-never-was"],
      [owner.key, "bad%20id"],
    ] as const) {
      const refused = await transaction(key, path);
      expect(refused.status).toBe(404);
      expect(await refused.json()).toEqual({
        error: {
          message: expect.stringContaining("was not found"),
          type: "not_found_error",
          code: "not_found",
        },
      });
    }
  });
});
