import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost, testVendorKey } from "../support/host";

let simulator: Simulator;
let stack: TestHost;
let client: Anthropic;
let serviceKey: string;

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost(simulatorEnv(simulator.origins));
  serviceKey = (await stack.newKey()).key;
  // The SDK sends its key as x-api-key, which the service accepts like a Bearer key.
  client = new Anthropic({ apiKey: serviceKey, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
});
afterAll(async () => {
  await stack.stop();
  await simulator.close();
});
beforeEach(() => simulator.reset());

const request = {
  model: "claude-sonnet-4-6",
  max_tokens: 64,
  messages: [{ role: "user" as const, content: "Say hello" }],
};

describe("@anthropic-ai/sdk through the proxy", () => {
  it("creates a message, with the managed key in place of the service key", async () => {
    const message = await client.messages.create(request);
    expect(message.type).toBe("message");
    expect(message.content[0]?.type).toBe("text");
    expect(message.usage.input_tokens).toBeGreaterThan(0);
    const forwarded = simulator.requests.at(-1);
    expect(forwarded?.headers["x-api-key"]).toBe(testVendorKey("anthropic"));
    expect(forwarded?.headers["anthropic-version"]).toEqual(expect.any(String));
    expect(JSON.stringify(forwarded)).not.toContain(serviceKey);
  });

  it("streams a message", async () => {
    const stream = client.messages.stream(request);
    const texts: string[] = [];
    stream.on("text", (text) => texts.push(text));
    const final = await stream.finalMessage();
    expect(texts.length).toBeGreaterThan(1);
    expect(final.content[0]?.type === "text" && final.content[0].text).toBe(texts.join(""));
    expect(final.usage.output_tokens).toBeGreaterThan(0);
  });

  it("counts tokens", async () => {
    const counted = await client.messages.countTokens({ model: request.model, messages: request.messages });
    expect(counted.input_tokens).toBeGreaterThan(0);
    expect(simulator.requests.at(-1)?.path).toBe("/v1/messages/count_tokens");
  });

  it("lists models", async () => {
    const page = await client.models.list();
    expect(page.data.length).toBeGreaterThan(0);
  });

  it("retrieves one model; an unknown one is Anthropic's 404", async () => {
    const model = await client.models.retrieve("claude-sonnet-4-6");
    expect(model).toMatchObject({ type: "model", id: "claude-sonnet-4-6" });
    expect(simulator.requests.at(-1)).toMatchObject({ method: "GET", path: "/v1/models/claude-sonnet-4-6" });
    const missing = await client.models.retrieve("claude-none").catch((err: unknown) => err);
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it("surfaces the vendor's error shape for a vendor error", async () => {
    simulator.inject({ vendor: "anthropic", fault: { kind: "status", status: 529 } });
    const error = await client.messages.create(request).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(Anthropic.APIError);
    expect((error as InstanceType<typeof Anthropic.APIError>).status).toBe(529);
  });
});
