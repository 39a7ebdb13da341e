import Groq, { toFile } from "groq-sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { parseUsd } from "../../lambda/core/credits";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { startMeteredHost, type TestHost, testVendorKey } from "../support/host";
import { recordedCall } from "../support/http";

/**
 * Groq's own SDK (`groq-sdk`): its base URL is the host, `https://api.groq.com`, and it puts `/openai`
 * before every path. Through dmt its base URL is `<dmt>/groq`, and each call is the same endpoint, with
 * the same charge, as the OpenAI SDK's at `<dmt>/groq/v1`.
 */

const model = "llama-3.3-70b-versatile";
const messages = [{ role: "user" as const, content: "Say hello" }];

let simulator: Simulator;
let stack: TestHost;
let owner: { key: string; projectId: string };
let groq: Groq;
let credits: DynamoCredits;

beforeAll(async () => {
  simulator = await startSimulator();
  ({ stack, owner, credits } = await startMeteredHost(simulator.origins, "10"));
  groq = new Groq({ apiKey: owner.key, baseURL: `${stack.url}/groq`, maxRetries: 0 });
});
afterAll(async () => {
  await stack?.stop();
  await simulator?.close();
});
beforeEach(() => simulator.reset());

const recorded = (transactionId: string | null) => recordedCall(stack, owner.key, transactionId);

describe("groq-sdk through the proxy", () => {
  it("creates a chat completion at Groq's own path, with the managed key, charged and recorded as the chat endpoint", async () => {
    const { data: completion, response } = await groq.chat.completions
      .create({ model, messages })
      .withResponse();
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0]?.message.content).toEqual(expect.any(String));
    expect(completion.usage?.prompt_tokens).toBeGreaterThan(0);
    const forwarded = simulator.requests.at(-1);
    expect(forwarded).toMatchObject({ vendor: "groq", method: "POST", path: "/v1/chat/completions" });
    expect(forwarded?.headers.authorization).toBe(`Bearer ${testVendorKey("groq")}`);
    expect(JSON.stringify(forwarded)).not.toContain(owner.key);

    const cost = response.headers.get("x-dmt-cost-usd");
    expect(parseUsd(String(cost))).toBeGreaterThan(0);
    const record = await recorded(response.headers.get("x-dmt-transaction-id"));
    // The same endpoint as the OpenAI SDK's `/groq/v1/chat/completions`, not `/openai/v1/...`.
    expect(record).toMatchObject({ vendor: "groq", endpoint: "/v1/chat/completions", model, cost_usd: cost });
  });

  it("streams, charged for the tokens the stream reported", async () => {
    const { data: stream, response } = await groq.chat.completions
      .create({ model, messages, stream: true })
      .withResponse();
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).not.toBe("");
    expect(simulator.requests.at(-1)?.path).toBe("/v1/chat/completions");
    const record = await recorded(response.headers.get("x-dmt-transaction-id"));
    // Read from the stream's last chunk, not estimated.
    expect(record.usage).toMatchObject({
      output_tokens: expect.any(Number),
      estimated: false,
      complete: true,
    });
    expect((record.usage as { output_tokens: number }).output_tokens).toBeGreaterThan(0);
    expect(parseUsd(String(record.cost_usd))).toBeGreaterThan(0);
  });

  it("lists the models, free of charge", async () => {
    // The earlier calls' charges settled first, so that only this call could move the balance.
    await stack.drain();
    const before = await credits.balance(owner.projectId);
    const models = await groq.models.list();
    await stack.drain();
    expect(models.data.length).toBeGreaterThan(0);
    expect(simulator.requests.at(-1)).toMatchObject({ method: "GET", path: "/v1/models" });
    const after = await credits.balance(owner.projectId);
    expect(after.availableMicros + after.heldMicros).toBe(before.availableMicros + before.heldMicros);
  });

  it("is held to a key's endpoint restriction exactly as the OpenAI SDK at /groq/v1 is", async () => {
    const restricted = await stack.newKey({
      projectId: owner.projectId,
      allow: ["groq:/v1/chat/completions"],
    });
    const viaGroq = new Groq({ apiKey: restricted.key, baseURL: `${stack.url}/groq`, maxRetries: 0 });
    const viaOpenAi = new OpenAI({ apiKey: restricted.key, baseURL: `${stack.url}/groq/v1`, maxRetries: 0 });
    expect((await viaGroq.chat.completions.create({ model, messages })).object).toBe("chat.completion");
    expect((await viaOpenAi.chat.completions.create({ model, messages })).object).toBe("chat.completion");
    for (const list of [() => viaGroq.models.list(), () => viaOpenAi.models.list()]) {
      const refused = await list().then(
        () => undefined,
        (err: { status?: number; error?: unknown }) => err,
      );
      // Each SDK keeps the body its own way; both carry our refusal of the one endpoint.
      expect(refused?.status).toBe(403);
      expect(JSON.stringify(refused?.error)).toContain("insufficient_permissions");
      expect(JSON.stringify(refused?.error)).toContain("groq:/v1/models");
    }
  });
});

describe("groq-sdk's audio through the proxy", () => {
  /** `seconds` of audio as the simulator measures it (16,000 bytes a second). */
  const audio = (seconds: number) =>
    toFile(Buffer.alloc(16_000 * seconds), "speech.mp3", { type: "audio/mpeg" });

  it("transcribes, charged the seconds Groq bills (its 10-second minimum too), answering the json Groq would", async () => {
    // whisper-large-v3: $0.111 an hour. 36 s: $0.00111; 3 s is billed as 10 s: $0.000308333..., rounded up.
    for (const [seconds, cost] of [
      [36, "0.00111"],
      [3, "0.000309"],
    ] as const) {
      const { data, response } = await groq.audio.transcriptions
        .create({ model: "whisper-large-v3", file: await audio(seconds) })
        .withResponse();
      // Groq's json answer names no seconds: the proxy asked for verbose_json, and answers json.
      expect(Object.keys(data).sort()).toEqual(["text", "x_groq"]);
      expect(data.text).toEqual(expect.any(String));
      expect(response.headers.get("x-dmt-cost-usd"), `${seconds} s`).toBe(cost);
      expect(simulator.requests.at(-1)?.path).toBe("/v1/audio/transcriptions");
      expect(simulator.requests.at(-1)?.body.toString()).toContain(
        'name="response_format"\r\n\r\nverbose_json\r\n',
      );
    }
  });

  it("translates to text, charged its seconds", async () => {
    const { data, response } = await groq.audio.translations
      .create({ model: "whisper-large-v3", file: await audio(36), response_format: "text" })
      .withResponse();
    expect(data).toMatch(/^[^\n]+\n$/);
    expect(response.headers.get("x-dmt-cost-usd")).toBe("0.00111");
  });

  it("refuses audio fetched from a url, whose length nothing bounds, forwarding nothing", async () => {
    const refused = await groq.audio.transcriptions
      .create({ model: "whisper-large-v3", url: "https://example.com/a.mp3" })
      .then(
        () => undefined,
        (err: { status?: number; error?: unknown }) => err,
      );
    expect(refused?.status).toBe(400);
    expect(JSON.stringify(refused?.error)).toContain('"code":"invalid_field"');
    expect(JSON.stringify(refused?.error)).toContain("Invalid field 'url'");
    expect(simulator.requests).toEqual([]);
  });

  it("passes Groq's own refusal of a format it has not (subtitles), charging nothing", async () => {
    // The earlier calls' charges settled first, so that only this call could move the balance.
    await stack.drain();
    const before = await credits.balance(owner.projectId);
    const refused = await groq.audio.transcriptions
      .create({ model: "whisper-large-v3", file: await audio(3), response_format: "srt" as "text" })
      .then(
        () => undefined,
        (err: { status?: number; error?: unknown }) => err,
      );
    expect(refused?.status).toBe(400);
    expect(JSON.stringify(refused?.error)).toContain("response_format must be one of");
    // Sent as asked: the proxy fetches no other format for one Groq does not serve.
    expect(simulator.requests.at(-1)?.body.toString()).toContain('name="response_format"\r\n\r\nsrt\r\n');
    await stack.drain();
    const after = await credits.balance(owner.projectId);
    expect(after.availableMicros + after.heldMicros).toBe(before.availableMicros + before.heldMicros);
  });
});

describe("Groq's path prefix: bad input", () => {
  it.each([
    ["/groq/openai", "GET"],
    ["/groq/openai/v1/nothing-here", "POST"],
    ["/groq/openai/openai/v1/chat/completions", "POST"],
  ])("answers %s with 404 in the service's shape, forwarding nothing", async (path, method) => {
    const res = await fetch(`${stack.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${owner.key}`, "content-type": "application/json" },
      ...(method === "POST" && { body: JSON.stringify({ model, messages }) }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: { type: "not_found_error", code: "not_found" } });
    expect(simulator.requests).toEqual([]);
  });
});
