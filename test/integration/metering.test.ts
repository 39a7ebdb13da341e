import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../../lambda/adapters/fs/master-key";
import { createKey, createProject } from "../../lambda/core/accounts";
import type { CallBilling, ProxyCall, ProxyHooks, ProxyOutcome } from "../../lambda/core/call";
import { type LedgerEntry, parseUsd } from "../../lambda/core/credits";
import { silentLogger } from "../../lambda/core/logger";
import { parseLocalConfig } from "../../lambda/local/config";
import { runningStoreEndpoint } from "../../lambda/local/embedded-dynamo";
import { type EmbeddedHost, startEmbeddedHost } from "../../lambda/local/host";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, testVendorKey } from "../support/host";
import { rawRequest } from "../support/http";

/**
 * Metering through the local stack and the official SDKs: exact costs per vendor family, holds, 402,
 * unpriced models, free endpoints, BYOK and dual keys, idempotency, bad inputs and the critical path.
 * The vendors are the simulator; the OpenAI family goes through a spy that marks when the vendor is called.
 */

let simulator: Simulator;
let spy: Server;
let stack: EmbeddedHost;
let dataDir: string;
let credits: DynamoCredits;
/** Events in order: store commands sent (while `recording`) and requests reaching the vendor. */
const events: string[] = [];
let recording = false;
/** While set, store commands wait until a request reaches the vendor: a call that needs one never does. */
let storeGate: Promise<void> | undefined;
let openStoreGate = () => {};
/** What the record would get: every call, its outcome and its billing once metering's `after` ran. */
const records: { call: ProxyCall; outcome: ProxyOutcome; billing: CallBilling | undefined }[] = [];
const recorder: ProxyHooks = {
  after(call, outcome) {
    records.push({ call, outcome, billing: call.billing && { ...call.billing } });
  },
};

/**
 * A hold's t2 and t3 (lambda/adapters/dynamodb/hold-items.ts): its own item put, then the owner's
 * transient marker removed. The take starts them once t1 answered and does not wait for them.
 */
function confirmation(input: Record<string, unknown>): boolean {
  return (
    JSON.stringify(input.Item ?? {}).includes("#hold#") ||
    (input.UpdateExpression === "REMOVE #marker" &&
      String((input.ExpressionAttributeNames as Record<string, string> | undefined)?.["#marker"]).startsWith(
        "p_",
      ))
  );
}

/** An HTTP hop in front of the simulator that notes when a request reaches "the vendor". */
function startSpy(target: string): Promise<Server> {
  const server = createServer((req, res) => {
    if (recording) events.push("vendor");
    openStoreGate();
    const forward = httpRequest(
      `${target}${req.url}`,
      { method: req.method, headers: req.headers },
      (upstream) => {
        res.writeHead(upstream.statusCode ?? 502, upstream.headers);
        upstream.pipe(res);
        // A vendor connection cut mid-body is cut for the proxy too.
        upstream.once("close", () => {
          if (!upstream.complete) res.destroy();
        });
      },
    );
    forward.on("error", () => res.destroy());
    req.pipe(forward);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

beforeAll(async () => {
  simulator = await startSimulator();
  spy = await startSpy(simulator.url);
  const spyUrl = `http://127.0.0.1:${(spy.address() as AddressInfo).port}`;
  dataDir = mkdtempSync(join(tmpdir(), "dmt-metering-"));
  const env = simulatorEnv({ ...simulator.origins, openai: `${spyUrl}/openai`, groq: `${spyUrl}/groq` });
  const config = parseLocalConfig({
    PORT: "0",
    DMT_ACCESS_LOG: "off",
    DMT_DATA_DIR: dataDir,
    DMT_KEY_CACHE_MS: "60000",
    ...env,
  });
  stack = await startEmbeddedHost(config, silentLogger, { hooks: [recorder] });
  // Every store command the server sends, whichever client it has (the lean one for dynalite).
  const send = stack.db.send.bind(stack.db);
  stack.db.send = (async (
    command: { constructor: { name: string }; input: Record<string, unknown> },
    ...rest: unknown[]
  ) => {
    const name = `${command.constructor.name}${confirmation(command.input) ? " (hold confirmed)" : ""}`;
    // The sweeper's scans run on their own schedule, not on any request's path.
    const noted = recording && name !== "ScanCommand";
    if (noted) events.push(`start ${name}`);
    try {
      await storeGate;
      return await (send as (...args: unknown[]) => Promise<unknown>)(command, ...rest);
    } finally {
      if (noted) events.push(`end ${name}`);
    }
  }) as typeof stack.db.send;
  credits = new DynamoCredits(stack.db, tableNames(process.env));
});
afterAll(async () => {
  await stack.close();
  await new Promise((resolve) => spy.close(resolve));
  await simulator.close();
  rmSync(dataDir, { recursive: true, force: true });
});
beforeEach(() => {
  simulator.reset();
  simulator.setChunkDelay(0);
  records.length = 0;
});

let projects = 0;

/** A project with a key (pro tier: tests here are not about rate limits) and `usd` of credits. */
async function project(usd?: number): Promise<{ projectId: string; key: string; keyId: string }> {
  const projectId = `m${process.pid}-${++projects}`;
  await createProject(stack.store, projectId, "pro", Date.now());
  const { key, record } = await createKey(stack.store, { projectId, name: "test" }, Date.now());
  if (usd !== undefined) await credits.grant(projectId, usd * 1_000_000, "test");
  return { projectId, key, keyId: record.keyId };
}

async function ledger(projectId: string): Promise<LedgerEntry[]> {
  return (await credits.ledger(projectId, { limit: 1000 })).entries;
}

/** What the newest settlement charged, once the calls answered so far are settled. */
async function lastCharge(projectId: string): Promise<number | undefined> {
  await stack.drain();
  return (await ledger(projectId)).find((entry) => entry.type === "settle")?.chargedMicros;
}

async function available(projectId: string): Promise<number> {
  await stack.drain();
  return (await credits.balance(projectId)).availableMicros;
}

/** Micro-USD of token counts at rates in nano-USD per token (USD per million tokens × 1000), rounded up. */
function micros(parts: [tokens: number, nanosPerToken: number][]): number {
  return Math.ceil(parts.reduce((sum, [tokens, rate]) => sum + tokens * rate, 0) / 1000);
}

/** A prompt of ~1,300 tokens: long enough for the vendors' prompt caches (1,024 tokens and up). */
const LONG_PROMPT = `Remember these facts for later. ${"The quick brown fox jumps over the lazy dog. ".repeat(120)}`;

function post(path: string, key: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(`${stack.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const chat = (content = "Say hello to the world", extra: Record<string, unknown> = {}) => ({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content }],
  max_tokens: 64,
  ...extra,
});

describe("exact cost of known usage, per vendor family", () => {
  // Catalogue list prices (prices/catalogue.json, 2026-11-22), in nano-USD per token.
  const GPT_4O_MINI = { input: 150, cached: 75, output: 600 };
  const GPT_OSS_120B = { input: 150, cached: 75, output: 600 };
  const SONNET_4_6 = { input: 3000, cacheRead: 300, cacheWrite: 3750, output: 15000 };
  const GEMINI_2_5_FLASH = { input: 300, cached: 30, output: 2500 };

  it.each([
    ["openai", "gpt-4o-mini", GPT_4O_MINI],
    ["groq", "openai/gpt-oss-120b", GPT_OSS_120B],
  ] as const)("%s: chat, plain then cached, streamed and not", async (vendor, model, rates) => {
    const { projectId, key } = await project(10);
    const client = new OpenAI({ apiKey: key, baseURL: `${stack.url}/${vendor}/v1`, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: LONG_PROMPT }];
    const charges: { expected: number; charged: number | undefined }[] = [];
    const expectedOf = (usage: OpenAI.CompletionUsage) => {
      const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
      return micros([
        [usage.prompt_tokens - cached, rates.input],
        [cached, rates.cached],
        [usage.completion_tokens, rates.output],
      ]);
    };

    const first = await client.chat.completions.create({ model, messages, max_tokens: 100 });
    charges.push({
      expected: expectedOf(first.usage as OpenAI.CompletionUsage),
      charged: await lastCharge(projectId),
    });
    const cachedCall = await client.chat.completions.create({ model, messages, max_tokens: 100 });
    expect(cachedCall.usage?.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
    charges.push({
      expected: expectedOf(cachedCall.usage as OpenAI.CompletionUsage),
      charged: await lastCharge(projectId),
    });
    const stream = await client.chat.completions.create({
      model,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) usage ??= chunk.usage;
    expect(usage?.prompt_tokens_details?.cached_tokens).toBeGreaterThan(0);
    charges.push({
      expected: expectedOf(usage as OpenAI.CompletionUsage),
      charged: await lastCharge(projectId),
    });

    for (const { expected, charged } of charges) expect(charged).toBe(expected);
    expect(charges[1]?.expected).toBeLessThan(charges[0]?.expected ?? 0);
    // Nothing but the settled charges left the balance.
    const spent = charges.reduce((sum, c) => sum + c.expected, 0);
    expect(await available(projectId)).toBe(10_000_000 - spent);
  });

  it("anthropic: messages writing then reading the prompt cache, streamed and not", async () => {
    const { projectId, key } = await project(10);
    const client = new Anthropic({ apiKey: key, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
    const request = {
      model: "claude-sonnet-4-6",
      max_tokens: 200,
      system: [{ type: "text" as const, text: LONG_PROMPT, cache_control: { type: "ephemeral" as const } }],
      messages: [{ role: "user" as const, content: "What did I ask you to remember?" }],
    };
    const expectedOf = (usage: Anthropic.Usage) =>
      micros([
        [usage.input_tokens, SONNET_4_6.input],
        [usage.cache_creation_input_tokens ?? 0, SONNET_4_6.cacheWrite],
        [usage.cache_read_input_tokens ?? 0, SONNET_4_6.cacheRead],
        [usage.output_tokens, SONNET_4_6.output],
      ]);

    const writing = await client.messages.create(request);
    expect(writing.usage.cache_creation_input_tokens).toBeGreaterThan(0);
    expect(await lastCharge(projectId)).toBe(expectedOf(writing.usage));
    const reading = await client.messages.create(request);
    expect(reading.usage.cache_read_input_tokens).toBeGreaterThan(0);
    expect(await lastCharge(projectId)).toBe(expectedOf(reading.usage));
    const streamed = await client.messages.stream(request).finalMessage();
    expect(streamed.usage.cache_read_input_tokens).toBeGreaterThan(0);
    expect(await lastCharge(projectId)).toBe(expectedOf(streamed.usage));
  });

  it("anthropic: 1-hour cache writes at twice the input rate, 5-minute ones at 1.25x", async () => {
    // claude-sonnet-4-6 1-hour write $6 per MTok (platform.claude.com/docs/en/about-claude/pricing, 2026-11-26).
    const { projectId, key } = await project(10);
    const client = new Anthropic({ apiKey: key, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
    const request = {
      model: "claude-sonnet-4-6",
      max_tokens: 200,
      system: [
        {
          type: "text" as const,
          text: `${LONG_PROMPT} (hourly)`,
          cache_control: { type: "ephemeral" as const, ttl: "1h" as const },
        },
      ],
      messages: [{ role: "user" as const, content: "What did I ask you to remember?" }],
    };
    const written = await client.messages.create(request);
    const hour = written.usage.cache_creation?.ephemeral_1h_input_tokens ?? 0;
    expect(hour).toBeGreaterThan(0);
    expect(await lastCharge(projectId)).toBe(
      micros([
        [written.usage.input_tokens, SONNET_4_6.input],
        [hour, 2 * SONNET_4_6.input],
        [(written.usage.cache_creation_input_tokens ?? 0) - hour, SONNET_4_6.cacheWrite],
        [written.usage.output_tokens, SONNET_4_6.output],
      ]),
    );
    const record = records.at(-1);
    expect(record?.billing?.breakdown?.items).toContainEqual(
      expect.objectContaining({ dimension: "cache_write_1h", quantity: hour, rate_usd: "6" }),
    );
  });

  it("openai: the service tier the answer names sets the rates, streamed and not", async () => {
    // gpt-5 flex at Batch rates, priority $2.50 / $0.25 / $20 per MTok (prices/catalogue.json sources).
    const GPT_5 = { flex: { input: 625, output: 5000 }, priority: { input: 2500, output: 20000 } };
    const { projectId, key } = await project(10);
    const client = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
    for (const tier of ["flex", "priority"] as const) {
      const messages = [{ role: "user" as const, content: `A question for the ${tier} tier.` }];
      const answer = await client.chat.completions.create({ model: "gpt-5", messages, service_tier: tier });
      expect(answer.service_tier).toBe(tier);
      const usage = answer.usage as OpenAI.CompletionUsage;
      const expected = micros([
        [usage.prompt_tokens - (usage.prompt_tokens_details?.cached_tokens ?? 0), GPT_5[tier].input],
        [usage.completion_tokens, GPT_5[tier].output],
      ]);
      expect(await lastCharge(projectId)).toBe(expected);
      expect(records.at(-1)?.billing?.breakdown?.service_tier).toBe(tier);
      const stream = await client.chat.completions.create({
        model: "gpt-5",
        messages,
        service_tier: tier,
        stream: true,
        stream_options: { include_usage: true },
      });
      let streamed: OpenAI.CompletionUsage | undefined | null;
      for await (const chunk of stream) streamed ??= chunk.usage;
      expect(streamed?.prompt_tokens_details?.cached_tokens ?? 0).toBe(0);
      expect(await lastCharge(projectId)).toBe(
        micros([
          [streamed?.prompt_tokens ?? 0, GPT_5[tier].input],
          [streamed?.completion_tokens ?? 0, GPT_5[tier].output],
        ]),
      );
    }
  });

  it("gemini: generate (thinking billed as output), a cache created, then read, streamed and not", async () => {
    const { projectId, key } = await project(10);
    const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: `${stack.url}/gemini` } });
    const model = "gemini-2.5-flash";
    const expectedOf = (usage: { [k: string]: number | undefined }) =>
      micros([
        [(usage.promptTokenCount ?? 0) - (usage.cachedContentTokenCount ?? 0), GEMINI_2_5_FLASH.input],
        [usage.cachedContentTokenCount ?? 0, GEMINI_2_5_FLASH.cached],
        [(usage.candidatesTokenCount ?? 0) + (usage.thoughtsTokenCount ?? 0), GEMINI_2_5_FLASH.output],
      ]);
    const usageOf = (metadata: unknown) => metadata as { [k: string]: number | undefined };

    const plain = await ai.models.generateContent({ model, contents: "Say hello to the world" });
    expect(plain.usageMetadata?.thoughtsTokenCount).toBeGreaterThan(0);
    expect(await lastCharge(projectId)).toBe(expectedOf(usageOf(plain.usageMetadata)));

    const cache = await ai.caches.create({ model, config: { contents: LONG_PROMPT } });
    // Creating a cache writes its tokens once, at the input rate (the model has no cache-write price).
    const written = cache.usageMetadata?.totalTokenCount ?? 0;
    expect(written).toBeGreaterThan(0);
    expect(await lastCharge(projectId)).toBe(micros([[written, GEMINI_2_5_FLASH.input]]));

    const config = { cachedContent: cache.name ?? "" };
    const fromCache = await ai.models.generateContent({ model, contents: "Summarise it", config });
    expect(fromCache.usageMetadata?.cachedContentTokenCount).toBe(written);
    expect(await lastCharge(projectId)).toBe(expectedOf(usageOf(fromCache.usageMetadata)));

    let last: unknown;
    for await (const chunk of await ai.models.generateContentStream({
      model,
      contents: "Summarise",
      config,
    })) {
      last = chunk.usageMetadata;
    }
    expect(usageOf(last).cachedContentTokenCount).toBe(written);
    expect(await lastCharge(projectId)).toBe(expectedOf(usageOf(last)));
  });

  it("openai: endpoints billed per second of audio, per image and per character", async () => {
    const { projectId, key } = await project(10);
    const client = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
    // whisper-1: $0.006 a minute, in whole seconds: 100 micro-USD a second.
    const audio = await toFile(Buffer.alloc(16_000 * 7), "speech.mp3", { type: "audio/mpeg" });
    const transcript = await client.audio.transcriptions.create({ model: "whisper-1", file: audio });
    expect((transcript as unknown as { usage: { seconds: number } }).usage.seconds).toBe(7);
    expect(await lastCharge(projectId)).toBe(700);
    // dall-e-3, hd 1024x1792: $0.12 an image.
    await client.images.generate({
      model: "dall-e-3",
      prompt: "a lighthouse",
      quality: "hd",
      size: "1024x1792",
    });
    expect(await lastCharge(projectId)).toBe(120_000);
    // dall-e-2 edits, an upload whose fields say two images of 512x512: $0.018 each.
    const image = await toFile(Buffer.from("png"), "in.png", { type: "image/png" });
    await client.images.edit({ model: "dall-e-2", image, prompt: "add a boat", n: 2, size: "512x512" });
    expect(await lastCharge(projectId)).toBe(36_000);
    // tts-1: $15 per million characters.
    const speech = await client.audio.speech.create({
      model: "tts-1",
      voice: "alloy",
      input: "Hello, wörld!",
    });
    await speech.arrayBuffer();
    expect(await lastCharge(projectId)).toBe(13 * 15);
  });

  it("openai: a transcript or translation is charged its seconds in every format, and comes back as asked", async () => {
    const { projectId, key } = await project(10);
    const client = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
    // 7 seconds of audio at whisper-1's $0.006 a minute: 700 micro-USD, whatever the format.
    const file = () => toFile(Buffer.alloc(16_000 * 7), "speech.mp3", { type: "audio/mpeg" });
    const cases = [
      ["transcriptions", "text", "json", /^[^\n]+\n$/],
      ["transcriptions", "srt", "verbose_json", /^1\n00:00:00,000 --> 00:00:07,000\n\S.*\n\n$/],
      ["transcriptions", "vtt", "verbose_json", /^WEBVTT\n\n00:00:00\.000 --> 00:00:07\.000\n\S.*\n\n$/],
      ["transcriptions", "json", "json", /^\{"text":"\S.*","usage":/],
      ["transcriptions", "verbose_json", "verbose_json", /"duration":7/],
      // A translation reports its seconds in verbose_json only: json, its default, is fetched so too.
      ["translations", "json", "verbose_json", /^\{"text":"\S[^"]*"\}$/],
      ["translations", "text", "verbose_json", /^[^\n]+\n$/],
      ["translations", "srt", "verbose_json", /^1\n00:00:00,000 --> 00:00:07,000\n/],
    ] as const;
    for (const [endpoint, format, fetchedAs, shape] of cases) {
      const what = `${endpoint} ${format}`;
      // One call shape for both endpoints and every format (the SDK types each format apart).
      const create = client.audio[endpoint].create.bind(client.audio[endpoint]) as unknown as (
        body: Record<string, unknown>,
      ) => ReturnType<OpenAI["audio"]["translations"]["create"]>;
      const { data, response } = await create({
        model: "whisper-1",
        file: await file(),
        response_format: format,
      }).withResponse();
      expect(typeof data === "string" ? data : JSON.stringify(data), what).toMatch(shape);
      expect(response.headers.get("x-dmt-cost-usd"), what).toBe("0.0007");
      const forwarded = simulator.requests.at(-1)?.body.toString() ?? "";
      expect(forwarded, what).toContain(`name="response_format"\r\n\r\n${fetchedAs}\r\n`);
    }
    // What the calls were charged, in the credits: 8 calls of 7 seconds.
    await stack.drain();
    const balance = await credits.balance(projectId);
    expect(10_000_000 - balance.availableMicros - balance.heldMicros).toBe(8 * 700);
  });

  it("applies the deployment's markup to what credits pay, rounded up once", async () => {
    const marked = await startEmbeddedHost(
      parseLocalConfig({
        PORT: "0",
        DMT_ACCESS_LOG: "off",
        DMT_DATA_DIR: dataDir,
        DMT_DYNAMODB_ENDPOINT: runningStoreEndpoint(dataDir) ?? "",
        DMT_PRICE_MARKUP: "1.1",
        DMT_SWEEP_INTERVAL_MS: "3600000",
        ...simulatorEnv(simulator.origins),
      }),
      silentLogger,
    );
    try {
      const { projectId, key } = await project(1);
      const res = await fetch(`${marked.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(chat()),
      });
      const { usage } = await res.json();
      await marked.drain();
      const nanos = usage.prompt_tokens * 150 + usage.completion_tokens * 600;
      expect((await ledger(projectId)).find((e) => e.type === "settle")?.chargedMicros).toBe(
        Math.ceil((nanos * 11) / 10 / 1000),
      );
    } finally {
      await marked.close();
    }
  });
});

describe("credit holds", () => {
  it("refuses a call the balance cannot cover with 402, forwarding nothing and charging nothing", async () => {
    const { projectId, key } = await project();
    await credits.grant(projectId, 10, "test"); // $0.00001: less than any hold
    const res = await post("/openai/v1/chat/completions", key, chat());
    expect(res.status).toBe(402);
    expect((await res.json()).error).toMatchObject({ type: "billing_error", code: "insufficient_credits" });
    expect(simulator.requests).toEqual([]);
    expect(await available(projectId)).toBe(10);
    expect((await ledger(projectId)).map((e) => e.type)).toEqual(["grant"]);
  });

  it("holds the output limit the request set, else the model's cap", async () => {
    // A balance too small for any call: the 402 names the amount the call would have held.
    const { key } = await project();
    // gpt-4o-mini: the hold is the input estimate at the dearest input rate plus the output at 0.60/M.
    for (const [body, output] of [
      [chat("hi", { max_tokens: 1000 }), 1000],
      [chat("hi", { max_tokens: undefined, max_completion_tokens: 2000 }), 2000],
      [chat("hi", { max_tokens: undefined }), 16384],
      [chat("hi", { max_tokens: 1000, n: 3 }), 3000],
    ] as const) {
      const res = await post("/openai/v1/chat/completions", key, body);
      expect(res.status).toBe(402);
      const message: string = (await res.json()).error.message;
      const held = parseUsd(/may cost up to \$([\d.]+)/.exec(message)?.[1] ?? "");
      const outputPart = Math.ceil((output * 600) / 1000);
      expect(held).toBeGreaterThanOrEqual(outputPart);
      expect(held).toBeLessThan(outputPart + 50);
    }
    expect(simulator.requests).toEqual([]);
  });

  it("releases the hold of a call the vendor failed: it costs nothing", async () => {
    const { projectId, key } = await project(1);
    simulator.inject({ vendor: "openai", fault: { kind: "status", status: 500 } });
    expect((await post("/openai/v1/chat/completions", key, chat())).status).toBe(500);
    simulator.inject({ vendor: "openai", fault: { kind: "resetMidStream", afterChunks: 2 } });
    const broken = await post("/openai/v1/chat/completions", key, chat("a b c d e f g h", { stream: true }));
    await broken.text().catch(() => "");
    expect(await available(projectId)).toBe(1_000_000);
    // The calls' hold (a lease of several calls' worth) was released: nothing was charged.
    const entries = await ledger(projectId);
    expect(entries.filter((e) => e.type === "release").length).toBeGreaterThan(0);
    expect(entries.some((e) => e.type === "settle")).toBe(false);
  });

  it("charges a stream the client abandoned for what it got, though the vendor reported no usage yet", async () => {
    const { projectId, key } = await project(1);
    simulator.setChunkDelay(50);
    const res = await post(
      "/openai/v1/chat/completions",
      key,
      chat("one two three four five six seven eight", { stream: true }),
    );
    const reader = res.body?.getReader();
    // Leave once some text arrived (the first chunk may carry only the role).
    let received = "";
    while (reader && !/"content":"[^"]/.test(received)) {
      const { value, done } = await reader.read();
      if (done) break;
      received += new TextDecoder().decode(value);
    }
    await reader?.cancel();
    // The cancellation reaches the server asynchronously: wait until the hold is resolved.
    while ((await credits.balance(projectId)).openHolds > 0) await new Promise((r) => setTimeout(r, 20));
    await stack.drain();
    const settled = (await ledger(projectId)).find((e) => e.type === "settle");
    expect(settled?.chargedMicros).toBeGreaterThan(0);
    expect(settled?.chargedMicros).toBeLessThanOrEqual(settled?.heldMicros ?? 0);
    // The record shows the tokens charged, estimated from the text delivered, not its JSON wrapper.
    const abandoned = records.find((r) => r.outcome.error?.code === "client_closed_request");
    const delivered = abandoned?.outcome.deliveredText ?? "";
    const charged = abandoned?.billing?.usage;
    expect(delivered.length).toBeGreaterThan(0);
    expect(charged).toMatchObject({ estimated: true, outputTokens: Math.ceil(delivered.length / 4) });
    expect(charged?.inputTokens).toBeGreaterThan(0);
    expect(charged?.outputTokens).toBeLessThan(
      Math.ceil((abandoned?.outcome.response.text ?? "").length / 4),
    );
    expect(abandoned?.billing?.breakdown?.micros).toBe(settled?.chargedMicros);
    expect(abandoned?.billing?.costMicros).toBe(settled?.chargedMicros);
  });
});

describe("prices", () => {
  it("refuses a managed call to a model without a price with 404 naming it, before forwarding", async () => {
    const { key } = await project(1);
    const res = await post("/openai/v1/chat/completions", key, chat("hi", { model: "gpt-unreleased-9" }));
    expect(res.status).toBe(404);
    expect((await res.json()).error).toMatchObject({
      type: "not_found_error",
      code: "model_not_found",
      message: expect.stringContaining("'gpt-unreleased-9'"),
    });
    const gemini = await post("/gemini/v1beta/models/gemini-unknown:generateContent", key, {
      contents: [{ parts: [{ text: "hi" }] }],
    });
    expect(gemini.status).toBe(404);
    expect((await gemini.json()).error.message).toContain("'gemini-unknown'");
    expect(simulator.requests).toEqual([]);
  });

  it("answers free endpoints without credits and without a hold", async () => {
    const { projectId, key } = await project();
    const get = (path: string) =>
      fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
    expect((await get("/openai/v1/models")).status).toBe(200);
    expect((await get("/openai/health")).status).toBe(200);
    expect((await post("/openai/v1/moderations", key, { input: "hello" })).status).toBe(200);
    const count = await post("/anthropic/v1/messages/count_tokens", key, {
      model: "claude-sonnet-4-6",
      messages: [{ role: "user", content: "hello" }],
    });
    expect(count.status).toBe(200);
    const geminiCount = await post("/gemini/v1beta/models/gemini-2.5-flash:countTokens", key, {
      contents: [{ parts: [{ text: "hello" }] }],
    });
    expect(geminiCount.status).toBe(200);
    expect(await ledger(projectId)).toEqual([]);
    expect(records.every((r) => r.billing?.costMicros === 0)).toBe(true);
  });

  it("fails the start on a price file with a missing field, naming it", async () => {
    const file = join(dataDir, "bad-prices.json");
    writeFileSync(
      file,
      JSON.stringify({
        models: [
          {
            vendor: "groq",
            model: "my-fine-tune",
            kind: "chat",
            max_output_tokens: 8192,
            prices: [{ effective_from: "2026-11-01", input: 0.2 }],
          },
        ],
      }),
    );
    const config = parseLocalConfig({
      PORT: "0",
      DMT_ACCESS_LOG: "off",
      DMT_DATA_DIR: join(dataDir, "never"),
      DMT_PRICES_OVERRIDE: file,
    });
    await expect(startEmbeddedHost(config, silentLogger)).rejects.toThrow(
      "Invalid price override: groq/my-fine-tune: prices[0].output: required for a chat model",
    );
  });
});

describe("BYOK and dual keys", () => {
  const vendorKeys = () =>
    new DynamoVendorKeys(stack.db, tableNames(process.env), LocalMasterKey.inDataDir(dataDir));

  it("BYOK: forwards the project's own key, charges nothing, records usage at list price", async () => {
    const { projectId, key } = await project();
    const own = "sk-own-openai-key-0123456789abcdef";
    await vendorKeys().set(projectId, "openai", own);
    const res = await post("/openai/v1/chat/completions", key, chat());
    expect(res.status).toBe(200);
    const { usage } = await res.json();
    expect(simulator.requests.at(-1)?.headers.authorization).toBe(`Bearer ${own}`);
    await stack.drain();
    expect(await ledger(projectId)).toEqual([]);
    expect((await credits.balance(projectId)).availableMicros).toBe(0);
    const record = records.at(-1);
    expect(record?.outcome.usage.inputTokens).toBe(usage.prompt_tokens);
    expect(record?.billing).toEqual({
      mode: "byok",
      priceVersion: expect.any(String),
      costMicros: micros([
        [usage.prompt_tokens, 150],
        [usage.completion_tokens, 600],
      ]),
      // At list price: the breakdown names no markup.
      breakdown: expect.objectContaining({ markup: "1", micros: record?.billing?.costMicros }),
    });
  });

  it("BYOK with Anthropic's header, and a model without a price: forwarded, cost unknown", async () => {
    const { projectId, key } = await project();
    const own = "sk-ant-own-key-0123456789abcdef";
    await vendorKeys().set(projectId, "anthropic", own);
    const client = new Anthropic({ apiKey: key, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
    await client.messages.create({
      model: "claude-unpriced-1",
      max_tokens: 32,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(simulator.requests.at(-1)?.headers["x-api-key"]).toBe(own);
    await stack.drain();
    expect(records.at(-1)?.billing).toEqual({ mode: "byok", costMicros: undefined });
    expect(await ledger(projectId)).toEqual([]);
  });

  it("dual key: forwards the supplied key for that request only, charges nothing", async () => {
    const { projectId, key } = await project();
    const supplied = "sk-dual-supplied-0123456789";
    const openai = new OpenAI({
      apiKey: `${key};${supplied}`,
      baseURL: `${stack.url}/openai/v1`,
      maxRetries: 0,
    });
    await openai.chat.completions.create(chat() as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(simulator.requests.at(-1)?.headers.authorization).toBe(`Bearer ${supplied}`);
    // Through x-goog-api-key too; the next call without a vendor half uses the managed key again.
    const ai = new GoogleGenAI({
      apiKey: `${key};${supplied}`,
      httpOptions: { baseUrl: `${stack.url}/gemini` },
    });
    await ai.models.generateContent({ model: "gemini-2.5-flash", contents: "hi" });
    expect(simulator.requests.at(-1)?.headers["x-goog-api-key"]).toBe(supplied);
    await stack.drain();
    expect(records.map((r) => r.billing?.mode)).toEqual(["dual", "dual"]);
    expect(records.every((r) => (r.billing?.costMicros ?? 0) > 0)).toBe(true);
    expect(await ledger(projectId)).toEqual([]);
    await credits.grant(projectId, 1_000_000, "test");
    expect((await post("/openai/v1/chat/completions", key, chat())).status).toBe(200);
    expect(simulator.requests.at(-1)?.headers.authorization).toBe(`Bearer ${testVendorKey("openai")}`);
    expect(JSON.stringify(records.map((r) => r.billing))).not.toContain(supplied);
  });

  it("refuses a dual key whose vendor half has whitespace or is empty", async () => {
    const { key } = await project(1);
    for (const authorization of [`Bearer ${key};sk-has space-0123456789`, `Bearer ${key};`]) {
      const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify(chat()),
      });
      expect(res.status).toBe(401);
      expect((await res.json()).error.code).toBe("invalid_api_key");
    }
    expect(simulator.requests).toEqual([]);
  });
});

describe("idempotency (X-Request-ID)", () => {
  it("replays a completed call: same status, headers and body, marked, no vendor call, no second charge", async () => {
    const { projectId, key } = await project(1);
    const first = await post("/openai/v1/chat/completions", key, chat(), { "x-request-id": "order-1" });
    const body = await first.text();
    const charged = await available(projectId);
    const again = await post("/openai/v1/chat/completions", key, chat(), { "x-request-id": "order-1" });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    expect(again.headers.get("content-type")).toBe(first.headers.get("content-type"));
    expect(again.headers.get("x-ratelimit-limit")).toBe("600");
    expect(await again.text()).toBe(body);
    expect(simulator.requests).toHaveLength(1);
    expect(await available(projectId)).toBe(charged);
    expect((await ledger(projectId)).filter((e) => e.type === "settle")).toHaveLength(1);
  });

  it("replays a stream as a stream", async () => {
    const { key } = await project(1);
    const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
    const read = async () => {
      const { data, response } = await openai.chat.completions
        .create(
          { model: "gpt-4o-mini", messages: [{ role: "user", content: "one two three four" }], stream: true },
          { headers: { "X-Request-ID": "stream-1" } },
        )
        .withResponse();
      const chunks: string[] = [];
      for await (const chunk of data) chunks.push(chunk.choices[0]?.delta.content ?? "");
      return {
        chunks,
        replayed: response.headers.get("idempotent-replayed"),
        type: response.headers.get("content-type"),
      };
    };
    const first = await read();
    await stack.drain();
    const again = await read();
    expect(again.replayed).toBe("true");
    expect(again.type).toContain("text/event-stream");
    expect(again.chunks).toEqual(first.chunks);
    expect(first.chunks.length).toBeGreaterThan(2);
    expect(simulator.requests).toHaveLength(1);
  });

  it("answers 409 while the first call is in flight, and 422 for the same id with another body", async () => {
    const { key } = await project(1);
    simulator.setChunkDelay(100);
    const first = post("/openai/v1/chat/completions", key, chat("a b c d", { stream: true }), {
      "x-request-id": "slow-1",
    });
    const response = await first;
    const reader = response.body?.getReader();
    await reader?.read();
    const inFlight = await post("/openai/v1/chat/completions", key, chat("a b c d", { stream: true }), {
      "x-request-id": "slow-1",
    });
    expect(inFlight.status).toBe(409);
    expect((await inFlight.json()).error).toMatchObject({
      type: "idempotency_error",
      code: "request_in_progress",
    });
    const other = await post("/openai/v1/chat/completions", key, chat("another body"), {
      "x-request-id": "slow-1",
    });
    expect(other.status).toBe(422);
    expect((await other.json()).error.message).toContain("different request");
    await reader?.cancel();
    expect(simulator.requests).toHaveLength(1);
  });

  it("forgets a failed call, so its retry runs; calls without the header are never deduplicated", async () => {
    const { key } = await project(1);
    simulator.inject({ vendor: "openai", fault: { kind: "status", status: 503 } });
    expect(
      (await post("/openai/v1/chat/completions", key, chat(), { "x-request-id": "retry-1" })).status,
    ).toBe(503);
    await stack.drain();
    const retry = await post("/openai/v1/chat/completions", key, chat(), { "x-request-id": "retry-1" });
    expect(retry.status).toBe(200);
    expect(retry.headers.get("idempotent-replayed")).toBeNull();
    await post("/openai/v1/chat/completions", key, chat());
    await post("/openai/v1/chat/completions", key, chat());
    expect(simulator.requests).toHaveLength(4);
  });

  it("scopes ids per key", async () => {
    const a = await project(1);
    const b = await project(1);
    await (await post("/openai/v1/chat/completions", a.key, chat(), { "x-request-id": "shared" })).text();
    await stack.drain();
    const other = await post("/openai/v1/chat/completions", b.key, chat("something else"), {
      "x-request-id": "shared",
    });
    expect(other.status).toBe(200);
    expect(other.headers.get("idempotent-replayed")).toBeNull();
  });

  it("refuses a malformed X-Request-ID with 400", async () => {
    const { key } = await project(1);
    const long = await post("/openai/v1/chat/completions", key, chat(), {
      "x-request-id": "x".repeat(10 * 1024),
    });
    expect(long.status).toBe(400);
    expect((await long.json()).error).toMatchObject({
      code: "invalid_header",
      message: expect.stringContaining("X-Request-ID"),
    });
    const body = JSON.stringify(chat());
    const raw = await rawRequest(
      stack.port,
      `POST /openai/v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n` +
        `Content-Type: application/json\r\nX-Request-ID: a\tb\r\nContent-Length: ${body.length}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
    expect(raw.status).toBe(400);
    expect(JSON.parse(raw.body).error.code).toBe("invalid_header");
    expect(simulator.requests).toEqual([]);
  });
});

describe("bad inputs", () => {
  it.each([
    ["a negative max_tokens", chat("hi", { max_tokens: -1 }), "invalid_field", "max_tokens"],
    ["an absurd max_tokens", chat("hi", { max_tokens: 1e12 }), "invalid_field", "max_tokens"],
    ["a fractional max_tokens", chat("hi", { max_tokens: 1.5 }), "invalid_field", "max_tokens"],
    ["max_tokens as text", chat("hi", { max_tokens: "100" }), "invalid_field", "max_tokens"],
    ["a missing model", chat("hi", { model: undefined }), "missing_field", "model"],
    ["a model that is not a string", chat("hi", { model: 4 }), "invalid_field", "model"],
  ])("refuses %s with 400, forwarding and holding nothing", async (_name, body, code, field) => {
    const { projectId, key } = await project(1);
    const res = await post("/openai/v1/chat/completions", key, body);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code, message: expect.stringContaining(`'${field}'`) });
    expect(simulator.requests).toEqual([]);
    expect((await ledger(projectId)).map((e) => e.type)).toEqual(["grant"]);
  });

  it("refuses a Gemini maxOutputTokens of zero", async () => {
    const { key } = await project(1);
    const res = await post("/gemini/v1beta/models/gemini-2.5-flash:generateContent", key, {
      contents: [{ parts: [{ text: "hi" }] }],
      generationConfig: { maxOutputTokens: 0 },
    });
    expect(res.status).toBe(400);
    expect((await res.json()).error.message).toContain("generationConfig.maxOutputTokens");
  });
});

describe("the critical path", () => {
  /** The store commands between a request's arrival and its vendor call, and their overlap. */
  async function storeWorkBeforeVendor(key: string, headers: Record<string, string>) {
    events.length = 0;
    recording = true;
    try {
      events.push("request");
      const res = await post("/openai/v1/chat/completions", key, chat(), headers);
      expect(res.status).toBe(200);
      await res.text();
    } finally {
      recording = false;
    }
    const window = events.slice(events.indexOf("request"), events.indexOf("vendor"));
    expect(window.length).toBeGreaterThan(0);
    expect(events).toContain("vendor");
    // The hold's confirmation runs in the background, started when t1 answered: the vendor waits for it not.
    const onPath = window.filter((e) => !e.endsWith("(hold confirmed)"));
    const starts = onPath.filter((e) => e.startsWith("start "));
    const firstEnd = onPath.findIndex((e) => e.startsWith("end "));
    // Every store command the call waits for started before any of them answered: one round trip.
    const sequential = firstEnd === -1 ? [] : onPath.slice(firstEnd).filter((e) => e.startsWith("start "));
    return { starts, sequential };
  }

  it("sends rate limit, hold and idempotency record side by side: one round trip before the vendor", async () => {
    const { projectId } = await project(1);
    // A bucket too small to lease tokens from: every call takes its token from the store.
    const { key } = await createKey(
      stack.store,
      { projectId, name: "small bucket", rateLimit: { rpm: 600, burst: 20 } },
      Date.now(),
    );
    // Warm: the key lookup, the vendor-key lookup and the last-used write happen on a first call.
    await (await post("/openai/v1/chat/completions", key, chat())).text();
    await stack.drain();

    const plain = await storeWorkBeforeVendor(key, {});
    expect(plain.starts).toEqual(["start UpdateItemCommand", "start UpdateItemCommand"]);
    expect(plain.sequential).toEqual([]);

    await stack.drain();
    const idempotent = await storeWorkBeforeVendor(key, { "x-request-id": "critical-1" });
    expect([...idempotent.starts].sort()).toEqual([
      "start PutItemCommand",
      "start UpdateItemCommand",
      "start UpdateItemCommand",
    ]);
    expect(idempotent.sequential).toEqual([]);
  });

  it("once warm, reaches the vendor without waiting for the store at all", async () => {
    const { key } = await project(1);
    // Warm: the caches, a credit lease and a batch of rate-limit tokens.
    for (let i = 0; i < 5; i++) await (await post("/openai/v1/chat/completions", key, chat())).text();
    storeGate = new Promise((resolve) => {
      openStoreGate = resolve;
    });
    try {
      const answered = post("/openai/v1/chat/completions", key, chat()).then((res) => res.status);
      const stuck = new Promise((resolve) => setTimeout(resolve, 5000, "waited for the store"));
      expect(await Promise.race([answered, stuck])).toBe(200);
    } finally {
      openStoreGate();
      storeGate = undefined;
    }
  });
});
