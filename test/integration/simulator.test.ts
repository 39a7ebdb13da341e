import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";

let sim: Simulator;
beforeAll(async () => {
  sim = await startSimulator();
});
afterAll(() => sim.close());
beforeEach(() => {
  sim.reset();
  sim.setChunkDelay(0);
});

const openai = () => new OpenAI({ apiKey: "sk-test", baseURL: `${sim.origins.openai}/v1`, maxRetries: 0 });
const groq = () => new OpenAI({ apiKey: "gsk-test", baseURL: `${sim.origins.groq}/v1`, maxRetries: 0 });
const anthropic = () =>
  new Anthropic({ apiKey: "sk-ant-test", baseURL: sim.origins.anthropic, maxRetries: 0 });
const gemini = () => new GoogleGenAI({ apiKey: "gm-test", httpOptions: { baseUrl: sim.origins.gemini } });

// "Be brief." is 3 tokens and "one two three" 4 (a quarter of the characters, rounded up, per part);
// the reply echoes the last user words, cycled to at least 8 words, one token per word.
const MESSAGES = [
  { role: "system" as const, content: "Be brief." },
  { role: "user" as const, content: "one two three" },
];
const REPLY = "one two three one two three one two";
const LONG_PROMPT = "cache me ".repeat(600); // 5400 characters: 1350 tokens

describe("OpenAI wire format through the openai SDK", () => {
  it("answers a chat completion with usage and the vendor request id", async () => {
    const completion = await openai().chat.completions.create({ model: "gpt-4o-mini", messages: MESSAGES });
    expect(completion.choices[0]?.message.content).toBe(REPLY);
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.usage).toMatchObject({
      prompt_tokens: 7,
      completion_tokens: 8,
      total_tokens: 15,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
    expect(completion._request_id).toMatch(/^req_/);
  });

  it("honours max_completion_tokens and reports reasoning tokens for reasoning models", async () => {
    const completion = await openai().chat.completions.create({
      model: "gpt-5",
      messages: MESSAGES,
      max_completion_tokens: 20,
    });
    // 16 reasoning tokens fit in 20 only at half the limit: 10 reasoning, 8 words.
    expect(completion.usage?.completion_tokens_details?.reasoning_tokens).toBe(10);
    expect(completion.usage?.completion_tokens).toBe(18);
    const cut = await openai().chat.completions.create({
      model: "gpt-4o",
      messages: MESSAGES,
      max_tokens: 3,
    });
    expect(cut.choices[0]?.message.content).toBe("one two three");
    expect(cut.choices[0]?.finish_reason).toBe("length");
  });

  it("reports cached prompt tokens when a long prompt comes again", async () => {
    const ask = () =>
      openai().chat.completions.create({
        model: "gpt-4o",
        messages: [{ role: "user", content: LONG_PROMPT }],
      });
    expect((await ask()).usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    const again = await ask();
    expect(again.usage?.prompt_tokens).toBe(1350);
    expect(again.usage?.prompt_tokens_details?.cached_tokens).toBe(1280);
  });

  it("streams chat chunks and, with include_usage, a usage-only chunk before [DONE]", async () => {
    const stream = await openai().chat.completions.create({
      model: "gpt-4o-mini",
      messages: MESSAGES,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const usageChunk = chunks.at(-1);
    expect(usageChunk?.choices).toEqual([]);
    expect(usageChunk?.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 8, total_tokens: 15 });
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    expect(chunks[0]?.choices[0]?.delta.role).toBe("assistant");
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(REPLY);
    expect(chunks.at(-2)?.choices[0]?.finish_reason).toBe("stop");
  });

  it("streams without any usage when include_usage is not asked", async () => {
    const stream = await openai().chat.completions.create({
      model: "gpt-4o",
      messages: MESSAGES,
      stream: true,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBe(10); // role, 8 words, finish
    expect(chunks.some((c) => "usage" in c)).toBe(false);
  });

  it("answers legacy completions, streamed or not", async () => {
    const completion = await openai().completions.create({
      model: "gpt-3.5-turbo-instruct",
      prompt: "alpha beta",
    });
    expect(completion.choices[0]?.text).toBe("alpha beta alpha beta alpha beta alpha beta");
    expect(completion.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 8 });
    const stream = await openai().completions.create({
      model: "gpt-3.5-turbo-instruct",
      prompt: "alpha beta",
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    const texts: string[] = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      texts.push(chunk.choices[0]?.text ?? "");
      usage = chunk.usage ?? usage;
    }
    expect(texts.join("")).toBe("alpha beta");
    expect(usage?.completion_tokens).toBe(2);
  });

  it("streams a response with typed events and usage on response.completed", async () => {
    const input = [{ role: "user" as const, content: LONG_PROMPT }];
    await openai().responses.create({ model: "o4-mini", input }); // primes the prompt cache
    const stream = openai().responses.stream({ model: "o4-mini", input, max_output_tokens: 100 });
    const types: string[] = [];
    stream.on("event", (event) => types.push(event.type));
    const final = await stream.finalResponse();
    expect(types[0]).toBe("response.created");
    expect(types[1]).toBe("response.in_progress");
    expect(types).toContain("response.output_text.delta");
    expect(types.slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    // The reply is capped at 64 words; the reasoning tokens come on top.
    expect(final.output_text).toBe("cache me ".repeat(32).trim());
    expect(final.usage).toMatchObject({
      input_tokens: 1350,
      input_tokens_details: { cached_tokens: 1280 },
      output_tokens: 80,
      output_tokens_details: { reasoning_tokens: 16 },
      total_tokens: 1430,
    });
  });

  it("answers a response without streaming, incomplete when max_output_tokens cuts it", async () => {
    const response = await openai().responses.create({
      model: "gpt-4o",
      input: "red green",
      max_output_tokens: 3,
    });
    expect(response.output_text).toBe("red green red");
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details?.reason).toBe("max_output_tokens");
    expect(response.usage?.output_tokens).toBe(3);
  });

  it("returns embeddings as floats or as base64 (the SDK's default, decoded by it)", async () => {
    const decoded = await openai().embeddings.create({
      model: "text-embedding-3-small",
      input: ["a b", "c"],
    });
    expect(JSON.parse(sim.requests[0]?.body.toString() ?? "{}").encoding_format).toBe("base64");
    const floats = await openai().embeddings.create({
      model: "text-embedding-3-small",
      input: ["a b", "c"],
      encoding_format: "float",
    });
    expect(decoded.data).toHaveLength(2);
    expect(decoded.data[0]?.embedding).toHaveLength(1536);
    expect(decoded.data[0]?.embedding).toEqual(floats.data[0]?.embedding);
    expect(decoded.usage).toEqual({ prompt_tokens: 2, total_tokens: 2 });
    const small = await openai().embeddings.create({
      model: "text-embedding-3-large",
      input: "x",
      dimensions: 8,
    });
    expect(small.data[0]?.embedding).toHaveLength(8);
  });

  it("transcribes and translates a multipart upload, billing by its size", async () => {
    const audio = () => toFile(Buffer.alloc(48_000, 1), "speech.mp3", { type: "audio/mpeg" });
    const transcription = await openai().audio.transcriptions.create({
      model: "whisper-1",
      file: await audio(),
    });
    expect(transcription.text.split(" ")).toHaveLength(6); // 3 seconds at 16 kB/s, 2 words a second
    expect(transcription.usage).toEqual({ type: "duration", seconds: 3 });
    const tokens = await openai().audio.transcriptions.create({
      model: "gpt-4o-transcribe",
      file: await audio(),
    });
    expect(tokens.usage).toMatchObject({ type: "tokens", input_tokens: 30, output_tokens: 6 });
    const text = await openai().audio.transcriptions.create({
      model: "whisper-1",
      file: await audio(),
      response_format: "text",
    });
    expect(text).toBe(`${transcription.text}\n`);
    const translation = await openai().audio.translations.create({ model: "whisper-1", file: await audio() });
    expect(translation.text).toBe(transcription.text);
    const recorded = sim.requests[0];
    expect(recorded?.headers["content-type"]).toMatch(/^multipart\/form-data; boundary=/);
    expect(recorded?.body.length).toBeGreaterThan(48_000);
  });

  it("speaks: binary audio proportional to the input", async () => {
    const speech = await openai().audio.speech.create({
      model: "tts-1",
      voice: "alloy",
      input: "hello world",
    });
    expect(speech.headers.get("content-type")).toBe("audio/mpeg");
    expect(speech.headers.get("x-dmt-simulated")).toBe("true");
    expect((await speech.arrayBuffer()).byteLength).toBe(11 * 256);
  });

  it("generates, edits and varies images", async () => {
    const generated = await openai().images.generate({
      model: "gpt-image-1",
      prompt: "a red cat",
      quality: "low",
    });
    expect(
      Buffer.from(generated.data?.[0]?.b64_json ?? "", "base64")
        .subarray(1, 4)
        .toString(),
    ).toBe("PNG");
    expect(generated.usage).toMatchObject({ input_tokens: 3, output_tokens: 272 });
    const urls = await openai().images.generate({ model: "dall-e-3", prompt: "a red cat", n: 1 });
    expect(urls.data?.[0]?.url).toMatch(/^data:image\/png;base64,/);
    const image = await toFile(Buffer.alloc(1000, 7), "cat.png", { type: "image/png" });
    const edited = await openai().images.edit({ model: "gpt-image-1", image, prompt: "make it blue", n: 2 });
    expect(edited.data).toHaveLength(2);
    expect(edited.usage?.input_tokens_details).toEqual({ text_tokens: 3, image_tokens: 258 });
    const varied = await openai().images.createVariation({ image: await toFile(Buffer.alloc(10), "c.png") });
    expect(varied.data).toHaveLength(1);
  });

  it("moderates and lists models", async () => {
    const moderation = await openai().moderations.create({ input: ["fine", "also fine"] });
    expect(moderation.results).toHaveLength(2);
    expect(moderation.results[0]?.flagged).toBe(false);
    const models = [];
    for await (const model of openai().models.list()) models.push(model.id);
    expect(models).toContain("gpt-4o");
  });
});

describe("Groq wire format through the openai SDK", () => {
  it("answers chat with Groq's usage and x_groq id", async () => {
    const completion = await groq().chat.completions.create({
      model: "llama-3.1-8b-instant",
      messages: MESSAGES,
    });
    expect(completion.choices[0]?.message.content).toBe(REPLY);
    expect(completion.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 8, total_tokens: 15 });
    expect(completion.usage).toHaveProperty("queue_time");
    expect((completion as unknown as { x_groq: { id: string } }).x_groq.id).toBe(completion._request_id);
  });

  it("streams with usage in the final chunk's x_groq, plus the include_usage chunk when asked", async () => {
    type GroqChunk = OpenAI.ChatCompletionChunk & { x_groq?: { id: string; usage?: OpenAI.CompletionUsage } };
    const plain: GroqChunk[] = [];
    for await (const chunk of await groq().chat.completions.create({
      model: "llama-3.1-8b-instant",
      messages: MESSAGES,
      stream: true,
    })) {
      plain.push(chunk);
    }
    expect(plain.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    expect(plain.at(-1)?.x_groq?.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 8 });
    expect(plain.slice(0, -1).every((c) => c.x_groq?.usage === undefined)).toBe(true);
    const withUsage: GroqChunk[] = [];
    for await (const chunk of await groq().chat.completions.create({
      model: "llama-3.1-8b-instant",
      messages: MESSAGES,
      stream: true,
      stream_options: { include_usage: true },
    })) {
      withUsage.push(chunk);
    }
    expect(withUsage.at(-1)?.choices).toEqual([]);
    expect(withUsage.at(-1)?.usage?.total_tokens).toBe(15);
  });

  it("answers responses and models", async () => {
    const response = await groq().responses.create({ model: "openai/gpt-oss-20b", input: "hi there" });
    expect(response.output_text).toBe("hi there hi there hi there hi there");
    expect(response.usage?.output_tokens_details.reasoning_tokens).toBe(16);
    const models = [];
    for await (const model of groq().models.list()) models.push(model.id);
    expect(models).toContain("llama-3.1-8b-instant");
  });
});

describe("Anthropic wire format through @anthropic-ai/sdk", () => {
  const params = {
    model: "claude-sonnet-4-6",
    max_tokens: 100,
    system: "Be brief.",
    messages: [{ role: "user" as const, content: "one two three" }],
  };

  it("answers messages with usage and request-id", async () => {
    const message = await anthropic().messages.create(params);
    expect(message.content).toEqual([{ type: "text", text: REPLY }]);
    expect(message.stop_reason).toBe("end_turn");
    expect(message.usage).toMatchObject({
      input_tokens: 7,
      output_tokens: 8,
      cache_read_input_tokens: 0,
      cache_creation_input_tokens: 0,
    });
    expect(message._request_id).toMatch(/^req_/);
  });

  it("streams the documented events, usage in message_start and cumulative in message_delta", async () => {
    const stream = anthropic().messages.stream({ ...params, max_tokens: 5 });
    const types: string[] = [];
    stream.on("streamEvent", (event) => types.push(event.type));
    const final = await stream.finalMessage();
    expect(types).toEqual([
      "message_start",
      "content_block_start",
      ...Array(5).fill("content_block_delta"),
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(final.content).toEqual([{ type: "text", text: "one two three one two" }]);
    expect(final.stop_reason).toBe("max_tokens");
    expect(final.usage).toMatchObject({ input_tokens: 7, output_tokens: 5 });
  });

  it("writes then reads the prompt cache at a cache_control breakpoint", async () => {
    const cached = {
      ...params,
      system: [{ type: "text" as const, text: LONG_PROMPT, cache_control: { type: "ephemeral" as const } }],
    };
    const first = await anthropic().messages.create(cached);
    expect(first.usage).toMatchObject({
      input_tokens: 4,
      cache_creation_input_tokens: 1350,
      cache_read_input_tokens: 0,
    });
    const second = await anthropic().messages.create(cached);
    expect(second.usage).toMatchObject({
      input_tokens: 4,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 1350,
    });
  });

  it("counts tokens and lists models", async () => {
    expect(await anthropic().messages.countTokens(params)).toMatchObject({ input_tokens: 7 });
    const models = [];
    for await (const model of anthropic().models.list()) models.push(model.id);
    expect(models).toContain("claude-sonnet-4-6");
  });

  it("answers the legacy complete API and /v1/count_tokens", async () => {
    const headers = {
      "x-api-key": "k",
      "anthropic-version": "2023-06-01",
      "content-type": "application/json",
    };
    const res = await fetch(`${sim.origins.anthropic}/v1/complete`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        model: "claude-2.1",
        prompt: "\n\nHuman: hello\n\nAssistant:",
        max_tokens_to_sample: 2,
      }),
    });
    expect(await res.json()).toMatchObject({
      type: "completion",
      completion: " hello hello",
      stop_reason: "max_tokens",
    });
    const count = await fetch(`${sim.origins.anthropic}/v1/count_tokens`, {
      method: "POST",
      headers,
      body: JSON.stringify({ model: "claude-sonnet-4-6", messages: params.messages }),
    });
    expect(await count.json()).toEqual({ input_tokens: 4 });
  });
});

describe("Gemini wire format through @google/genai", () => {
  it("generates content with usageMetadata", async () => {
    const response = await gemini().models.generateContent({
      model: "gemini-2.0-flash",
      contents: "one two three",
      config: { systemInstruction: "Be brief." },
    });
    expect(response.text).toBe(REPLY);
    expect(response.usageMetadata).toMatchObject({
      promptTokenCount: 7,
      candidatesTokenCount: 8,
      totalTokenCount: 15,
    });
    expect(response.candidates?.[0]?.finishReason).toBe("STOP");
    expect(sim.requests[0]?.path).toBe("/v1beta/models/gemini-2.0-flash:generateContent");
    expect(sim.requests[0]?.headers["x-goog-api-key"]).toBe("gm-test");
  });

  it("streams with thoughts counted in the final usageMetadata", async () => {
    const stream = await gemini().models.generateContentStream({
      model: "gemini-2.5-flash",
      contents: "one two three",
      config: { maxOutputTokens: 40 },
    });
    const texts: string[] = [];
    let last: Awaited<ReturnType<ReturnType<typeof gemini>["models"]["generateContent"]>> | undefined;
    for await (const chunk of stream) {
      texts.push(chunk.text ?? "");
      last = chunk;
    }
    expect(texts.join("")).toBe(REPLY);
    expect(texts).toHaveLength(8);
    expect(last?.usageMetadata).toMatchObject({
      promptTokenCount: 4,
      candidatesTokenCount: 8,
      thoughtsTokenCount: 16,
      totalTokenCount: 28,
    });
    expect(sim.requests[0]?.query).toBe("alt=sse");
  });

  it("streams a JSON array without alt=sse", async () => {
    const res = await fetch(`${sim.origins.gemini}/v1/models/gemini-2.0-flash:streamGenerateContent?key=k`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "a b" }] }] }),
    });
    const body = await res.text();
    expect(body.startsWith("[{")).toBe(true);
    expect(body).toContain("},\r\n{");
    const answers = JSON.parse(body) as { usageMetadata: { candidatesTokenCount: number } }[];
    expect(answers).toHaveLength(8);
    expect(answers.at(-1)?.usageMetadata.candidatesTokenCount).toBe(8);
  });

  it("embeds (the SDK calls batchEmbedContents) and counts tokens", async () => {
    const embedded = await gemini().models.embedContent({
      model: "text-embedding-004",
      contents: ["a", "b"],
    });
    expect(embedded.embeddings).toHaveLength(2);
    expect(embedded.embeddings?.[0]?.values).toHaveLength(768);
    expect(sim.requests[0]?.path).toBe("/v1beta/models/text-embedding-004:batchEmbedContents");
    const single = await fetch(`${sim.origins.gemini}/v1/models/gemini-embedding-001:embedContent`, {
      method: "POST",
      headers: { "x-goog-api-key": "k" },
      body: JSON.stringify({ content: { parts: [{ text: "a" }] }, outputDimensionality: 4 }),
    });
    expect(((await single.json()) as { embedding: { values: number[] } }).embedding.values).toHaveLength(4);
    const counted = await gemini().models.countTokens({
      model: "gemini-2.0-flash",
      contents: "one two three",
    });
    expect(counted.totalTokens).toBe(4);
  });

  it("creates cached content and reports cachedContentTokenCount when it is used", async () => {
    const cache = await gemini().caches.create({
      model: "gemini-2.0-flash",
      config: { contents: LONG_PROMPT },
    });
    expect(cache.name).toMatch(/^cachedContents\//);
    const response = await gemini().models.generateContent({
      model: "gemini-2.0-flash",
      contents: "one two three",
      config: { cachedContent: cache.name },
    });
    expect(response.usageMetadata).toMatchObject({ promptTokenCount: 1354, cachedContentTokenCount: 1350 });
  });

  it("lists models", async () => {
    const pager = await gemini().models.list();
    expect(pager.page.map((m) => m.name)).toContain("models/gemini-2.5-flash");
  });
});

describe("vendor errors", () => {
  it("answers an unknown path with each vendor's 404", async () => {
    const auth = {
      groq: { authorization: "Bearer k" },
      openai: { authorization: "Bearer k" },
      anthropic: { "x-api-key": "k", "anthropic-version": "2023-06-01" },
      gemini: { "x-goog-api-key": "k" },
    };
    const get = async (vendor: keyof typeof auth) => {
      const res = await fetch(`${sim.origins[vendor]}/v1/nope`, { headers: auth[vendor] });
      expect(res.status).toBe(404);
      expect(res.headers.get("x-dmt-simulated")).toBe("true");
      return res.json();
    };
    expect(await get("openai")).toEqual({
      error: {
        message: "Invalid URL (GET /v1/nope)",
        type: "invalid_request_error",
        param: null,
        code: null,
      },
    });
    expect(await get("groq")).toMatchObject({
      error: { type: "invalid_request_error", code: "unknown_url" },
    });
    expect(await get("anthropic")).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    expect(await get("gemini")).toMatchObject({ error: { code: 404, status: "NOT_FOUND" } });
  });

  it("refuses a request without the vendor's auth header in the vendor's 401 shape", async () => {
    const refused = async (url: string) => {
      const res = await fetch(url, { method: "POST", body: "{}" });
      expect(res.status).toBe(401);
      return res.json();
    };
    expect(await refused(`${sim.origins.openai}/v1/chat/completions`)).toMatchObject({
      error: { type: "invalid_request_error" },
    });
    expect(await refused(`${sim.origins.groq}/v1/chat/completions`)).toMatchObject({
      error: { code: "invalid_api_key" },
    });
    expect(await refused(`${sim.origins.anthropic}/v1/messages`)).toMatchObject({
      error: { type: "authentication_error" },
    });
    expect(await refused(`${sim.origins.gemini}/v1beta/models/g:generateContent`)).toMatchObject({
      error: { code: 401, status: "UNAUTHENTICATED" },
    });
  });

  it("answers invalid JSON with the vendor's 400", async () => {
    const res = await fetch(`${sim.origins.openai}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer k" },
      body: "{nope",
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { type: "invalid_request_error" } });
  });
});

describe("faults", () => {
  it("passes an injected status with the vendor's body to each SDK, for `times` requests", async () => {
    sim.inject({ fault: { kind: "status", status: 429 }, vendor: "openai", times: 2 });
    for (let i = 0; i < 2; i++) {
      const error = await openai()
        .chat.completions.create({ model: "gpt-4o", messages: MESSAGES })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OpenAI.RateLimitError);
      expect((error as InstanceType<typeof OpenAI.RateLimitError>).code).toBe("rate_limit_exceeded");
    }
    await expect(
      openai().chat.completions.create({ model: "gpt-4o", messages: MESSAGES }),
    ).resolves.toBeTruthy();

    sim.inject({ fault: { kind: "status", status: 529 }, vendor: "anthropic" });
    const overloaded = await anthropic()
      .messages.create({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(overloaded).toBeInstanceOf(Anthropic.APIError);
    expect((overloaded as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
    expect((overloaded as InstanceType<typeof Anthropic.APIError>).error).toMatchObject({
      type: "error",
      error: { type: "overloaded_error" },
    });

    sim.inject({
      fault: {
        kind: "status",
        status: 500,
        body: { error: { code: 500, message: "boom", status: "INTERNAL" } },
      },
      pathIncludes: ":generateContent",
    });
    await expect(
      gemini().models.generateContent({ model: "gemini-2.0-flash", contents: "x" }),
    ).rejects.toThrow(/boom/);
  });

  it("resets a stream after some chunks: the client sees them, then an error", async () => {
    sim.inject({ fault: { kind: "resetMidStream", afterChunks: 3 }, vendor: "openai" });
    const stream = await openai().chat.completions.create({
      model: "gpt-4o",
      messages: MESSAGES,
      stream: true,
    });
    const seen: string[] = [];
    const failure = await (async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? "");
    })().catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(Error);
    expect(seen).toEqual(["", "one", " two"]);

    sim.inject({ fault: { kind: "resetMidStream", afterChunks: 2 }, vendor: "anthropic" });
    const events: string[] = [];
    const broken = anthropic().messages.stream({
      model: "m",
      max_tokens: 5,
      messages: [{ role: "user", content: "x" }],
    });
    broken.on("streamEvent", (event) => events.push(event.type));
    await expect(broken.finalMessage()).rejects.toThrow();
    expect(events).toEqual(["message_start", "content_block_start"]);
  });

  it("resets a stream right after its headers when afterChunks is 0", async () => {
    sim.inject({ fault: { kind: "resetMidStream", afterChunks: 0 } });
    const res = await fetch(`${sim.origins.openai}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer k" },
      body: JSON.stringify({ model: "gpt-4o", messages: MESSAGES, stream: true }),
    });
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
  });

  it("cuts a whole answer in the middle of its body", async () => {
    sim.inject({ fault: { kind: "resetMidStream", afterChunks: 0 }, pathIncludes: "/v1/models" });
    await expect(openai().models.list()).rejects.toThrow();
  });

  it("delays the first byte of a slow answer behind a later fast one", async () => {
    sim.inject({ fault: { kind: "slowFirstByte", ms: 300 }, pathIncludes: "/openai/v1/models" });
    const order: string[] = [];
    const slow = openai()
      .models.list()
      .then(() => order.push("slow"));
    // Only once the slow request has arrived is the fast one sent.
    while (sim.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const fast = groq()
      .models.list()
      .then(() => order.push("fast"));
    await Promise.all([slow, fast]);
    expect(order).toEqual(["fast", "slow"]);
  });

  it("hangs until the client gives up", async () => {
    sim.inject({ fault: { kind: "hang" } });
    const controller = new AbortController();
    const hanging = fetch(`${sim.origins.openai}/v1/models`, {
      headers: { authorization: "Bearer k" },
      signal: controller.signal,
    });
    while (sim.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const state = await Promise.race([
      hanging.then(() => "answered"),
      new Promise((r) => setTimeout(r, 50, "waiting")),
    ]);
    expect(state).toBe("waiting");
    controller.abort();
    await expect(hanging).rejects.toThrow();
    // The simulator still serves other requests.
    await expect(openai().models.list()).resolves.toBeTruthy();
  });

  it("close() ends hanging and streaming connections", async () => {
    const own = await startSimulator({ chunkDelayMs: 60_000 });
    own.inject({ fault: { kind: "hang" }, pathIncludes: "/v1/models" });
    const hanging = fetch(`${own.origins.openai}/v1/models`, { headers: { authorization: "Bearer k" } }).then(
      () => "answered",
      (error: unknown) => error,
    );
    const streaming = await fetch(`${own.origins.openai}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer k" },
      body: JSON.stringify({ model: "gpt-4o", messages: MESSAGES, stream: true }),
    });
    const reader = streaming.body?.getReader();
    expect((await reader?.read())?.done).toBe(false);
    while (own.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await own.close();
    expect(await hanging).toBeInstanceOf(Error);
    await expect(reader?.read()).rejects.toThrow();
  });
});

describe("recording and timing", () => {
  it("records every request with its headers, path, query and body", async () => {
    await openai().chat.completions.create({ model: "gpt-4o", messages: MESSAGES });
    await fetch(`${sim.origins.gemini}/v1beta/models?key=abc&pageSize=5`);
    const [chat, models] = sim.requests;
    expect(chat).toMatchObject({ vendor: "openai", method: "POST", path: "/v1/chat/completions", query: "" });
    expect(chat?.headers.authorization).toBe("Bearer sk-test");
    expect(JSON.parse(chat?.body.toString() ?? "{}")).toMatchObject({ model: "gpt-4o", messages: MESSAGES });
    expect(models).toMatchObject({
      vendor: "gemini",
      method: "GET",
      path: "/v1beta/models",
      query: "key=abc&pageSize=5",
    });
  });

  it("records nothing when recording is off", async () => {
    const quiet = await startSimulator({ record: false });
    try {
      await fetch(`${quiet.origins.openai}/v1/models`, { headers: { authorization: "Bearer k" } });
      expect(quiet.requests).toEqual([]);
    } finally {
      await quiet.close();
    }
  });

  it("spaces stream chunks by the chunk delay, each flushed on its own", async () => {
    const delay = 80;
    sim.setChunkDelay(delay);
    const res = await fetch(`${sim.origins.openai}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: "Bearer k" },
      body: JSON.stringify({ model: "gpt-4o", messages: MESSAGES, max_tokens: 2, stream: true }),
    });
    const reader = res.body?.getReader();
    const decoder = new TextDecoder();
    const reads: { at: number; text: string }[] = [];
    for (let read = await reader?.read(); read && !read.done; read = await reader?.read()) {
      reads.push({ at: performance.now(), text: decoder.decode(read.value) });
    }
    // role, 2 words, finish, [DONE]: five events, five reads.
    expect(reads.map((r) => r.text.match(/^data: /gm)?.length)).toEqual([1, 1, 1, 1, 1]);
    for (let i = 1; i < reads.length; i++) {
      expect((reads[i]?.at ?? 0) - (reads[i - 1]?.at ?? 0)).toBeGreaterThanOrEqual(delay / 2);
    }
  });
});
