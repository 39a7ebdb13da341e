import { GoogleGenAI } from "@google/genai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost, testVendorKey } from "../support/host";

let simulator: Simulator;
let stack: TestHost;
let ai: GoogleGenAI;
let serviceKey: string;

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost(simulatorEnv(simulator.origins));
  serviceKey = (await stack.newKey()).key;
  // The SDK sends its key as x-goog-api-key, accepted on the Gemini family.
  ai = new GoogleGenAI({ apiKey: serviceKey, httpOptions: { baseUrl: `${stack.url}/gemini` } });
});
afterAll(async () => {
  await stack.stop();
  await simulator.close();
});
beforeEach(() => simulator.reset());

const model = "gemini-2.5-flash";

describe("@google/genai through the proxy", () => {
  it("generates content on v1beta, with the managed key in place of the service key", async () => {
    const response = await ai.models.generateContent({ model, contents: "Say hello" });
    expect(response.text).toEqual(expect.any(String));
    expect(response.usageMetadata?.promptTokenCount).toBeGreaterThan(0);
    const forwarded = simulator.requests.at(-1);
    expect(forwarded?.path).toBe(`/v1beta/models/${model}:generateContent`);
    expect(forwarded?.headers["x-goog-api-key"]).toBe(testVendorKey("gemini"));
    expect(JSON.stringify(forwarded)).not.toContain(serviceKey);
  });

  it("streams content over SSE", async () => {
    const stream = await ai.models.generateContentStream({ model, contents: "Say hello" });
    const texts: string[] = [];
    for await (const chunk of stream) texts.push(chunk.text ?? "");
    expect(texts.length).toBeGreaterThan(1);
    expect(simulator.requests.at(-1)?.query).toBe("alt=sse");
  });

  it("embeds content", async () => {
    const result = await ai.models.embedContent({ model: "gemini-embedding-001", contents: "hello" });
    expect(result.embeddings?.[0]?.values?.length).toBeGreaterThan(0);
  });

  it("gets one model; an unknown one is Google's 404", async () => {
    const found = await ai.models.get({ model });
    expect(found.name).toBe(`models/${model}`);
    expect(simulator.requests.at(-1)).toMatchObject({ method: "GET", path: `/v1beta/models/${model}` });
    await expect(ai.models.get({ model: "gemini-none" })).rejects.toMatchObject({ status: 404 });
  });

  it("counts tokens", async () => {
    const result = await ai.models.countTokens({ model, contents: "hello world" });
    expect(result.totalTokens).toBeGreaterThan(0);
  });
});
