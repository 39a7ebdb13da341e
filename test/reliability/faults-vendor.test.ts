import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { TRANSACTION_ID_HEADER } from "../../lambda/app/proxy/app";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";
import { expectSecurityHeaders } from "../support/http";
import {
  allLedgerEntries,
  unresolvedOrDoubled,
  until,
  type WarehouseRow,
  warehouseRows,
} from "../support/reliability";

/**
 * Vendor-side faults, each injected in the simulator, each with what the client gets, what is stored
 * and what is charged (docs/reliability.md).
 */
const GRANT = 5_000_000;
let sim: Simulator;
let stack: TestHost;
let credits: DynamoCredits;

beforeAll(async () => {
  sim = await startSimulator();
  stack = await startTestHost({
    ...simulatorEnv(sim.origins),
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
    // Short enough for a test, far above the simulator's normal answers.
    DMT_UPSTREAM_IDLE_TIMEOUT_MS: "1000",
  });
  credits = new DynamoCredits(stack.db, tableNames(process.env));
});
afterAll(async () => {
  await stack?.stop();
  await sim?.close();
});
beforeEach(() => {
  sim.reset();
  sim.setChunkDelay(0);
});

async function paidProject() {
  const project = await stack.newKey({ tier: "pro" });
  await credits.grant(project.projectId, GRANT, "test");
  return project;
}

function chat(key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "one two three" }],
      max_tokens: 50,
      ...body,
    }),
  });
}

/** After the after-work ran: the project's records, ledger, balance. */
async function books(projectId: string) {
  await stack.drain();
  const entries = await allLedgerEntries(credits, projectId);
  return {
    rows: (await warehouseRows(stack.dataDir)).filter((r) => r.project_id === projectId),
    entries,
    types: entries.map((e) => e.type),
    balance: await credits.balance(projectId),
    unresolved: unresolvedOrDoubled(entries),
  };
}

const costOf = (rows: WarehouseRow[]) => rows.reduce((sum, r) => sum + (r.cost_micros ?? 0), 0);

describe("vendor 5xx", () => {
  it("passes the vendor's error through, records it, charges nothing, and a retry with the same X-Request-ID runs again", async () => {
    const { key, projectId } = await paidProject();
    sim.inject({ vendor: "openai", fault: { kind: "status", status: 503 } });
    const failed = await chat(key, {}, { "X-Request-ID": "vendor-5xx-1" });
    expect(failed.status).toBe(503);
    // The vendor's own error shape, as its SDK expects it.
    expect(((await failed.json()) as { error: { type: string } }).error.type).toEqual(expect.any(String));
    const failedId = failed.headers.get(TRANSACTION_ID_HEADER);
    await stack.drain();

    const retried = await chat(key, {}, { "X-Request-ID": "vendor-5xx-1" });
    expect(retried.status).toBe(200);
    expect(retried.headers.get("idempotent-replayed")).toBeNull();
    await retried.json();

    const { rows, types, balance, unresolved } = await books(projectId);
    expect(rows.find((r) => r.transaction_id === failedId)).toMatchObject({
      status_code: 503,
      error_type: "vendor_error",
      error_code: "503",
      cost_micros: 0,
    });
    expect(rows).toHaveLength(2);
    expect(sim.requests).toHaveLength(2);
    expect(types.sort()).toEqual(["grant", "hold", "hold", "release", "settle"]);
    expect(unresolved).toEqual([]);
    expect(balance).toMatchObject({ availableMicros: GRANT - costOf(rows), openHolds: 0 });
  });
});

describe("vendor timeout before the first byte", () => {
  it.each([false, true])(
    "answers 504 upstream_timeout in our shape (stream: %s), records it, charges nothing",
    async (stream) => {
      const { key, projectId } = await paidProject();
      sim.inject({ vendor: "openai", fault: { kind: "hang" } });
      const res = await chat(key, { stream });
      expect(res.status).toBe(504);
      expect(await res.json()).toEqual({
        error: { message: expect.any(String), type: "upstream_error", code: "upstream_timeout" },
      });
      expectSecurityHeaders(res.headers);

      const { rows, types, balance } = await books(projectId);
      expect(rows).toEqual([
        expect.objectContaining({
          status_code: 504,
          error_type: "upstream_error",
          error_code: "upstream_timeout",
        }),
      ]);
      expect(types).toEqual(["grant", "hold", "release"]);
      expect(balance).toMatchObject({ availableMicros: GRANT, openHolds: 0 });
    },
  );
});

describe("vendor reset mid-stream", () => {
  it("breaks the client's stream, records the usage seen so far as incomplete, charges nothing", async () => {
    const { key, projectId } = await paidProject();
    sim.inject({ vendor: "anthropic", fault: { kind: "resetMidStream", afterChunks: 3 } });
    const client = new Anthropic({ apiKey: key, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
    const stream = await client.messages.create({
      model: "claude-haiku-4-5",
      max_tokens: 64,
      messages: [{ role: "user", content: "tell me a long story" }],
      stream: true,
    });
    const events: string[] = [];
    await expect(
      (async () => {
        for await (const event of stream) events.push(event.type);
      })(),
    ).rejects.toThrow();
    expect(events[0]).toBe("message_start");

    const { rows, types, balance } = await books(projectId);
    expect(rows).toEqual([
      expect.objectContaining({
        status_code: 200,
        streamed: true,
        usage_complete: false,
        error_type: "upstream_error",
        error_code: "upstream_reset",
        cost_micros: 0,
      }),
    ]);
    expect(types).toEqual(["grant", "hold", "release"]);
    expect(balance).toMatchObject({ availableMicros: GRANT, openHolds: 0 });
  });
});

describe("client disconnect mid-stream", () => {
  it("records the abandoned stream and charges what was used, once", async () => {
    const { key, projectId } = await paidProject();
    sim.setChunkDelay(100);
    const client = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "count slowly to twenty" }],
      max_tokens: 50,
      stream: true,
    });
    let chunks = 0;
    for await (const _ of stream) {
      if (++chunks === 2) break; // leaving the loop aborts the request
    }
    // The server learns of the disconnect from its socket: wait for the call's record.
    await until(async () => {
      await stack.drain();
      return (await warehouseRows(stack.dataDir)).some((r) => r.project_id === projectId) || undefined;
    });

    const { rows, types, balance, unresolved } = await books(projectId);
    expect(rows).toEqual([
      expect.objectContaining({
        streamed: true,
        usage_complete: false,
        error_type: "client_error",
        error_code: "client_closed_request",
      }),
    ]);
    const cost = rows[0]?.cost_micros ?? 0;
    expect(cost).toBeGreaterThan(0);
    expect(types).toEqual(["grant", "hold", "settle"]);
    expect(unresolved).toEqual([]);
    expect(balance).toMatchObject({ availableMicros: GRANT - cost, openHolds: 0 });
  });
});
