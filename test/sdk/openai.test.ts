import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

let simulator: Simulator;
let stack: TestHost;
let openai: OpenAI;
let groq: OpenAI;

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost(simulatorEnv(simulator.origins));
  const { key } = await stack.newKey();
  openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
  groq = new OpenAI({ apiKey: key, baseURL: `${stack.url}/groq/v1`, maxRetries: 0 });
});
afterAll(async () => {
  await stack.stop();
  await simulator.close();
});
beforeEach(() => simulator.reset());

const messages = [{ role: "user" as const, content: "Say hello" }];

/** The JSON body the simulator received last. */
function forwardedBody(): Record<string, unknown> {
  const last = simulator.requests.at(-1);
  if (!last) throw new Error("nothing reached the simulator");
  return JSON.parse(last.body.toString());
}

describe.each([
  ["openai", () => openai, "gpt-4o-mini"],
  ["groq", () => groq, "llama-3.3-70b-versatile"],
] as const)("%s through the openai SDK", (vendor, client, model) => {
  it("creates a chat completion", async () => {
    const completion = await client().chat.completions.create({ model, messages });
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0]?.message.content).toEqual(expect.any(String));
    expect(completion.usage?.prompt_tokens).toBeGreaterThan(0);
    expect(simulator.requests.at(-1)).toMatchObject({ vendor, method: "POST", path: "/v1/chat/completions" });
  });

  it("streams a chat completion exactly as asked: no usage chunk the client did not ask for", async () => {
    const stream = await client().chat.completions.create({ model, messages, stream: true });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(2);
    expect(chunks.every((c) => c.choices.length > 0)).toBe(true);
    expect(chunks.some((c) => "usage" in c)).toBe(false);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).not.toBe("");
    // We asked the vendor for usage on the client's behalf.
    expect(forwardedBody().stream_options).toEqual({ include_usage: true });
  });

  it("passes the usage chunk through when the client asks for it", async () => {
    const stream = await client().chat.completions.create({
      model,
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it("creates a response, streamed and not", async () => {
    const response = await client().responses.create({ model, input: "Say hello" });
    expect(response.status).toBe("completed");
    expect(response.output_text).not.toBe("");
    const stream = await client().responses.create({ model, input: "Say hello", stream: true });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    expect(types.at(-1)).toBe("response.completed");
    expect(types).toContain("response.output_text.delta");
  });

  it("lists models", async () => {
    const page = await client().models.list();
    expect(page.data.length).toBeGreaterThan(0);
  });

  it("refuses a response made in the background, whose usage would come after the call, forwarding nothing", async () => {
    const refused = await client()
      .responses.create({ model, input: "Say hello", background: true })
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect((refused as InstanceType<typeof OpenAI.BadRequestError>).error).toMatchObject({
      code: "invalid_field",
      message: expect.stringContaining("'background'"),
    });
    expect(simulator.requests).toEqual([]);
  });

  it("retrieves one model; an unknown one is the vendor's 404", async () => {
    const found = await client().models.retrieve(model);
    expect(found).toMatchObject({ id: model, object: "model" });
    expect(simulator.requests.at(-1)).toMatchObject({ vendor, method: "GET", path: `/v1/models/${model}` });
    const missing = await client()
      .models.retrieve("no-such-model")
      .catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("openai-only endpoints through the openai SDK", () => {
  it("creates a text completion", async () => {
    const completion = await openai.completions.create({
      model: "gpt-3.5-turbo-instruct",
      prompt: "Say hello",
    });
    expect(completion.choices[0]?.text).toEqual(expect.any(String));
  });

  it("creates embeddings", async () => {
    const result = await openai.embeddings.create({ model: "text-embedding-3-small", input: ["a", "b"] });
    expect(result.data).toHaveLength(2);
    expect(result.data[0]?.embedding.length).toBeGreaterThan(0);
  });

  it("uploads audio for a transcription and a translation", async () => {
    const audio = Buffer.from("RIFF....WAVEfmt fake audio bytes");
    const transcription = await openai.audio.transcriptions.create({
      file: await toFile(audio, "speech.wav", { type: "audio/wav" }),
      model: "whisper-1",
    });
    expect(transcription.text).toEqual(expect.any(String));
    const forwarded = simulator.requests.at(-1);
    expect(forwarded?.headers["content-type"]).toMatch(/^multipart\/form-data; boundary=/);
    expect(forwarded?.body.includes(audio)).toBe(true);
    const translation = await openai.audio.translations.create({
      file: await toFile(audio, "speech.wav", { type: "audio/wav" }),
      model: "whisper-1",
    });
    expect(translation.text).toEqual(expect.any(String));
  });

  it("returns speech as bytes", async () => {
    const speech = await openai.audio.speech.create({ model: "tts-1", voice: "alloy", input: "Hello there" });
    expect(speech.headers.get("content-type")).toMatch(/^audio\//);
    expect((await speech.arrayBuffer()).byteLength).toBeGreaterThan(0);
  });

  it("generates, edits and varies images", async () => {
    const generated = await openai.images.generate({ model: "dall-e-3", prompt: "a cat" });
    expect(generated.data?.length).toBe(1);
    const png = Buffer.from("\x89PNG\r\n\x1a\nfake image", "latin1");
    const edited = await openai.images.edit({
      model: "dall-e-2",
      image: await toFile(png, "cat.png", { type: "image/png" }),
      prompt: "add a hat",
    });
    expect(edited.data?.length).toBeGreaterThan(0);
    const varied = await openai.images.createVariation({
      image: await toFile(png, "cat.png", { type: "image/png" }),
    });
    expect(varied.data?.length).toBeGreaterThan(0);
  });

  it("moderates", async () => {
    const result = await openai.moderations.create({ model: "omni-moderation-latest", input: "hello" });
    expect(result.results[0]?.flagged).toBe(false);
  });
});
