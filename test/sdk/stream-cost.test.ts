import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { parseUsd } from "../../lambda/core/credits";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { startMeteredHost, type TestHost } from "../support/host";
import { recordedCall } from "../support/http";

/**
 * The cost in the stream through the official SDKs: with `X-DMT-Include-Cost: 1` each SDK still parses
 * the stream, and the last usage it reports carries `dmt_cost_usd`, the cost the call's record and the
 * credits' ledger say. The header stays with us.
 */

const WAIT = { timeout: 30_000, interval: 100 };
const headers = { "X-DMT-Include-Cost": "1" };

let simulator: Simulator;
let stack: TestHost;
let owner: { key: string; projectId: string };
let openai: OpenAI;
let groq: OpenAI;
let anthropic: Anthropic;
let gemini: GoogleGenAI;
let credits: DynamoCredits;

beforeAll(async () => {
  simulator = await startSimulator();
  ({ stack, owner, credits } = await startMeteredHost(simulator.origins, "10"));
  openai = new OpenAI({ apiKey: owner.key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
  groq = new OpenAI({ apiKey: owner.key, baseURL: `${stack.url}/groq/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: owner.key, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
  gemini = new GoogleGenAI({ apiKey: owner.key, httpOptions: { baseUrl: `${stack.url}/gemini` } });
});
afterAll(async () => {
  await stack?.stop();
  await simulator?.close();
});
beforeEach(() => simulator.reset());

/** `dmt_cost_usd` of a usage object the SDK's types do not know it in. */
const costIn = (usage: unknown): unknown =>
  typeof usage === "object" && usage !== null && "dmt_cost_usd" in usage ? usage.dmt_cost_usd : undefined;

/** The call's cost as its record says it, once recorded. */
async function recordedCost(transactionId: string | null): Promise<unknown> {
  return (await recordedCall(stack, owner.key, transactionId)).cost_usd;
}

/** The header stayed with us: the vendor never saw it. */
function notForwarded(): void {
  const forwarded = simulator.requests.at(-1);
  expect(forwarded).toBeDefined();
  expect(Object.keys(forwarded?.headers ?? {}).map((name) => name.toLowerCase())).not.toContain(
    "x-dmt-include-cost",
  );
}

const messages = [{ role: "user" as const, content: "Say hello" }];

describe.each([
  ["openai", () => openai, "gpt-4o-mini"],
  ["groq", () => groq, "llama-3.3-70b-versatile"],
] as const)("%s chat through the openai SDK", (_vendor, client, model) => {
  it("puts the recorded cost in the usage chunk, and only there", async () => {
    const { data: stream, response } = await client()
      .chat.completions.create(
        { model, messages, stream: true, stream_options: { include_usage: true } },
        { headers },
      )
      .withResponse();
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const costs = chunks.map((chunk) => costIn(chunk.usage)).filter((cost) => cost !== undefined);
    expect(costs).toHaveLength(1);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage?.completion_tokens).toBeGreaterThan(0);
    const cost = costIn(last?.usage);
    expect(cost).toMatch(/^\d+\.\d+$/);
    expect(parseUsd(String(cost))).toBeGreaterThan(0);
    expect(await recordedCost(response.headers.get("x-dmt-transaction-id"))).toBe(cost);
    notForwarded();
  });

  it("adds nothing the client did not ask usage for", async () => {
    const stream = await client().chat.completions.create({ model, messages, stream: true }, { headers });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.some((chunk) => "usage" in chunk)).toBe(false);
  });
});

describe("the OpenAI Responses API through the openai SDK", () => {
  it("puts the recorded cost in response.completed's usage", async () => {
    const { data: stream, response } = await openai.responses
      .create({ model: "gpt-4o-mini", input: "Say hello", stream: true }, { headers })
      .withResponse();
    const events = [];
    for await (const event of stream) events.push(event);
    const completed = events.at(-1);
    expect(completed?.type).toBe("response.completed");
    const usage = completed?.type === "response.completed" ? completed.response.usage : undefined;
    expect(usage?.output_tokens).toBeGreaterThan(0);
    const cost = costIn(usage);
    expect(cost).toMatch(/^\d+\.\d+$/);
    expect(await recordedCost(response.headers.get("x-dmt-transaction-id"))).toBe(cost);
  });
});

describe("@anthropic-ai/sdk", () => {
  it("puts the recorded cost in the message_delta usage; the message still assembles", async () => {
    const request = { model: "claude-sonnet-4-6", max_tokens: 64, messages };
    const stream = anthropic.messages.stream(request, { headers });
    const deltas: unknown[] = [];
    stream.on("streamEvent", (event) => {
      if (event.type === "message_delta") deltas.push(event.usage);
    });
    const final = await stream.finalMessage();
    expect(final.content[0]?.type).toBe("text");
    expect(final.usage.output_tokens).toBeGreaterThan(0);
    expect(deltas).toHaveLength(1);
    const cost = costIn(deltas[0]);
    expect(cost).toMatch(/^\d+\.\d+$/);
    const { response } = await stream.withResponse();
    expect(await recordedCost(response.headers.get("x-dmt-transaction-id"))).toBe(cost);
    notForwarded();
  });
});

describe("@google/genai", () => {
  it("puts the recorded cost in the last chunk's usageMetadata", async () => {
    const stream = await gemini.models.generateContentStream({
      model: "gemini-2.5-flash",
      contents: "Say hello",
      config: { httpOptions: { headers } },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    const costs = chunks.map((chunk) => costIn(chunk.usageMetadata));
    expect(costs.slice(0, -1).every((cost) => cost === undefined)).toBe(true);
    const cost = costs.at(-1);
    expect(cost).toMatch(/^\d+\.\d+$/);
    expect(chunks.map((chunk) => chunk.text ?? "").join("")).not.toBe("");
    // The SDK keeps no headers of a stream: the transaction is the one the simulator's answer is for.
    const transactionId = chunks.at(-1)?.sdkHttpResponse?.headers?.["x-dmt-transaction-id"] ?? null;
    expect(await recordedCost(transactionId)).toBe(cost);
    notForwarded();
  });
});

/** What the credits still have: open leases' holds count as not spent, what they charged as spent. */
async function unspent(): Promise<number> {
  const balance = await credits.balance(owner.projectId);
  return balance.availableMicros + balance.heldMicros - balance.chargedInFlightMicros;
}

describe("the credits", () => {
  it("are charged what the stream said", async () => {
    const before = await unspent();
    const stream = await openai.chat.completions.create(
      { model: "gpt-4o-mini", messages, stream: true, stream_options: { include_usage: true } },
      { headers },
    );
    let cost: unknown;
    for await (const chunk of stream) cost ??= costIn(chunk.usage);
    await stack.drain();
    await expect.poll(async () => before - (await unspent()), WAIT).toBe(parseUsd(String(cost)));
  });
});
