import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { parseUsd } from "../../lambda/core/credits";
import { startTestHost, type TestHost } from "../support/host";
import { recordedCall } from "../support/http";

/**
 * `X-DMT-Include-Cost` through the whole server, against a vendor that answers recorded streams: with
 * `1` the last usage event carries the record's cost; without it, or with any other value, the client
 * gets the vendor's bytes exactly. The header never reaches the vendor.
 */

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url));

const STREAMS = [
  {
    vendor: "openai",
    path: "/openai/v1/chat/completions",
    fixture: "openai-chat.sse",
    body: { model: "gpt-4o-mini", stream: true, stream_options: { include_usage: true }, messages: [] },
  },
  {
    vendor: "anthropic",
    path: "/anthropic/v1/messages",
    fixture: "anthropic-messages.sse",
    body: { model: "claude-sonnet-4-6", stream: true, max_tokens: 64, messages: [] },
  },
  {
    vendor: "gemini",
    path: "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    fixture: "gemini-stream.sse",
    body: { contents: [{ parts: [{ text: "hi" }] }] },
  },
  {
    vendor: "gemini (JSON array)",
    path: "/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent",
    fixture: "gemini-stream.json",
    body: { contents: [{ parts: [{ text: "hi" }] }] },
  },
] as const;

let vendor: Server;
let stack: TestHost;
let owner: { key: string; projectId: string };
const received: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  vendor = createServer((req, res) => {
    received.push(req.headers);
    req.resume();
    const stream = STREAMS.find((s) => (req.url ?? "").endsWith(s.path.slice(s.path.indexOf("/", 1))));
    const contentType = stream?.fixture.endsWith(".json") ? "application/json" : "text/event-stream";
    res.writeHead(stream ? 200 : 404, { "content-type": contentType });
    // Cut where the network might: in the middle of events.
    const bytes = stream ? fixture(stream.fixture) : Buffer.alloc(0);
    for (let at = 0; at < bytes.length; at += 50) res.write(bytes.subarray(at, at + 50));
    res.end();
  });
  await new Promise<void>((resolve) => vendor.listen(0, "127.0.0.1", resolve));
  const origin = `http://127.0.0.1:${(vendor.address() as AddressInfo).port}`;
  const env: Record<string, string> = { DMT_METERING: "on", DMT_WAREHOUSE_FLUSH_MS: "100" };
  for (const name of ["OPENAI", "ANTHROPIC", "GEMINI"]) {
    env[`DMT_UPSTREAM_${name}`] = origin;
    env[`${name}_API_KEY`] = `sk-test-managed-${name.toLowerCase()}-0123456789`;
  }
  stack = await startTestHost(env);
  owner = await stack.newKey();
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(owner.projectId, parseUsd("10"), "test");
});

afterAll(async () => {
  await stack?.stop();
  vendor?.closeAllConnections();
  await new Promise((resolve) => vendor?.close(resolve));
});

async function call(stream: (typeof STREAMS)[number], headers: Record<string, string>, key = owner.key) {
  const res = await fetch(`${stack.url}${stream.path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(stream.body),
  });
  expect(res.status).toBe(200);
  return { text: await res.text(), id: res.headers.get("x-dmt-transaction-id") ?? "" };
}

/** The call's cost as its record says it, once recorded. */
async function recordedCost(id: string): Promise<unknown> {
  return (await recordedCall(stack, owner.key, id)).cost_usd;
}

describe.each(STREAMS)("a $vendor stream", (stream) => {
  it("passes byte for byte without the header or with any value but 1", async () => {
    const asked: Record<string, string>[] = [
      {},
      { "x-dmt-include-cost": "0" },
      { "x-dmt-include-cost": "true" },
      { "X-DMT-Include-Cost": "01" },
    ];
    for (const headers of asked) {
      expect((await call(stream, headers)).text).toBe(fixture(stream.fixture).toString());
    }
  });

  it("carries the record's cost in its last usage event with X-DMT-Include-Cost: 1; the vendor never sees the header", async () => {
    received.length = 0;
    const { text, id } = await call(stream, { "X-DMT-Include-Cost": "1" });
    const costs = [...text.matchAll(/"dmt_cost_usd":"([^"]*)"/g)].map((found) => found[1]);
    expect(costs).toHaveLength(1);
    expect(costs[0]).toMatch(/^\d+\.\d+$/);
    expect(parseUsd(costs[0] ?? "")).toBeGreaterThan(0);
    expect(await recordedCost(id)).toBe(costs[0]);
    expect(received).toHaveLength(1);
    expect(Object.keys(received[0] ?? {})).not.toContain("x-dmt-include-cost");
    // Everything but the member added is the vendor's.
    expect(text.replace(/,"dmt_cost_usd":"[^"]*"/, "").replace(/\s/g, "")).toBe(
      fixture(stream.fixture).toString().replace(/\s/g, ""),
    );
  });

  it("repeats the stream, cost included, when an idempotent call is replayed", async () => {
    const headers = {
      "X-DMT-Include-Cost": "1",
      "X-Request-ID": `replay-${stream.fixture.replace(/\W/g, "-")}`,
    };
    const first = await call(stream, headers);
    received.length = 0;
    const again = await call(stream, headers);
    expect(received).toHaveLength(0);
    expect(again.text).toBe(first.text);
    expect(first.text).toContain('"dmt_cost_usd":"');
    expect(await recordedCost(first.id)).toBe(/"dmt_cost_usd":"([^"]*)"/.exec(first.text)?.[1]);
  });

  it("says a dual-key call's cost as its record does (the list price)", async () => {
    const { text, id } = await call(
      stream,
      { "X-DMT-Include-Cost": "1" },
      `${owner.key};sk-callers-own-vendor-key-0123`,
    );
    const cost = /"dmt_cost_usd":"([^"]*)"/.exec(text)?.[1];
    expect(cost).toMatch(/^\d+\.\d+$/);
    expect(await recordedCost(id)).toBe(cost);
  });
});
