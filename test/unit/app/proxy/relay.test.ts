import { readFileSync } from "node:fs";
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { relayResponse } from "../../../../lambda/app/proxy/relay";
import type { RelayResult } from "../../../../lambda/core/call";
import type { UpstreamResponse } from "../../../../lambda/core/upstream";
import type { StreamUsageRequest, VendorName } from "../../../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../../../lambda/vendors";

const fixture = (name: string) => readFileSync(new URL(`../../../fixtures/${name}`, import.meta.url));

function upstream(status: number, headers: Record<string, string>, body: Readable): UpstreamResponse {
  return { status, headers, body };
}

/** Chunks of `bytes` of at most `size` bytes: a vendor's stream as the network cuts it. */
function chunks(bytes: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.subarray(at, at + size));
  return out;
}

function relay(
  vendor: VendorName,
  method: string,
  path: string,
  response: UpstreamResponse,
  extra: { stripUsage?: boolean; request?: Record<string, unknown> } = {},
) {
  const route = VENDOR_DEFINITIONS[vendor].routes.find((r) => r.method === method && r.path === path);
  if (!route) throw new Error(`no route ${method} ${path}`);
  let resolveResult: (result: RelayResult) => void = () => {};
  const result = new Promise<RelayResult>((resolve) => {
    resolveResult = resolve;
  });
  let calls = 0;
  const relayed = relayResponse(response, {
    route,
    usage: VENDOR_DEFINITIONS[vendor].usage,
    usageContext: { operation: route.operation, request: extra.request },
    stripUsage: extra.stripUsage ?? false,
    captureLimit: 64 * 1024,
    arrived: performance.now(),
    extraHeaders: { "x-ratelimit-limit": "60" },
    done: (compute) => {
      calls++;
      resolveResult(compute());
    },
  });
  return { relayed, result, calls: () => calls };
}

describe("relayResponse", () => {
  it("hides the usage chunk it asked for, so the client gets the stream it would have got", async () => {
    const { relayed, result } = relay(
      "openai",
      "POST",
      "/v1/chat/completions",
      upstream(
        200,
        { "content-type": "text/event-stream", "content-length": "1772" },
        Readable.from(chunks(fixture("openai-chat.sse"), 7)),
      ),
      { stripUsage: true },
    );
    const response = await relayed;
    expect(response.headers.get("content-length")).toBeNull();
    expect(response.headers.get("x-ratelimit-limit")).toBe("60");
    expect(await response.text()).toBe(fixture("openai-chat.client.sse").toString());
    const outcome = await result;
    expect(outcome).toMatchObject({
      status: 200,
      streamed: true,
      usage: { inputTokens: 19, outputTokens: 4, cachedInputTokens: 8, complete: true },
    });
    expect(outcome.response.bytes).toBe(fixture("openai-chat.client.sse").length);
    expect(JSON.parse(outcome.response.text ?? "")).toMatchObject({ object: "chat.completion" });
  });

  it("hides only what the route's own streamUsage says the asking added, whatever the vendor", async () => {
    // The relay knows no vendor: a route of any vendor that declares how its usage is asked for gets
    // the same treatment. Here the declaration drops Anthropic's ping events and renames a field.
    const base = VENDOR_DEFINITIONS.anthropic.routes.find((r) => r.path === "/v1/messages");
    if (!base) throw new Error("no messages route");
    const streamUsage: StreamUsageRequest = {
      ask: () => undefined,
      added: (data) => data.includes('"ping"'),
      withoutAdded: (block) => block.replaceAll('"stop_reason"', '"stop_cause"'),
    };
    const sse = fixture("anthropic-messages.sse").toString();
    const run = async (stripUsage: boolean) => {
      const response = await relayResponse(
        upstream(200, { "content-type": "text/event-stream" }, Readable.from(chunks(Buffer.from(sse), 9))),
        {
          route: { ...base, streamUsage },
          usage: VENDOR_DEFINITIONS.anthropic.usage,
          usageContext: { operation: "messages", request: undefined },
          stripUsage,
          captureLimit: 64 * 1024,
          arrived: performance.now(),
          extraHeaders: {},
          done: () => {},
        },
      );
      return response.text();
    };
    const hidden = await run(true);
    expect(hidden).not.toContain("ping");
    expect(hidden).toContain('"stop_cause"');
    expect(hidden).toBe(
      sse
        .split(/(?<=\n\n)/)
        .filter((block) => !block.includes('"ping"'))
        .join("")
        .replaceAll('"stop_reason"', '"stop_cause"'),
    );
    // Nothing asked on the client's behalf: the stream passes byte for byte.
    expect(await run(false)).toBe(sse);
  });

  it("forwards each chunk as it arrives, before the next one exists", async () => {
    const source = new PassThrough();
    const { relayed, result } = relay(
      "anthropic",
      "POST",
      "/v1/messages",
      upstream(200, { "content-type": "text/event-stream" }, source),
    );
    const parts = chunks(fixture("anthropic-messages.sse"), 100);
    source.write(parts[0]);
    const reader = (await relayed).body?.getReader();
    if (!reader) throw new Error("no body");
    for (const [i, part] of parts.entries()) {
      if (i > 0) source.write(part);
      const { value } = await reader.read();
      expect(Buffer.from(value ?? [])).toEqual(part);
    }
    source.end();
    expect((await reader.read()).done).toBe(true);
    expect((await result).usage).toMatchObject({ inputTokens: 2572, outputTokens: 89, complete: true });
  });

  it("breaks the client's stream when the vendor's breaks, and keeps the usage seen so far", async () => {
    const source = new PassThrough();
    const { relayed, result } = relay(
      "anthropic",
      "POST",
      "/v1/messages",
      upstream(200, { "content-type": "text/event-stream" }, source),
    );
    source.write(fixture("anthropic-messages.sse").subarray(0, 700));
    const reader = (await relayed).body?.getReader();
    await reader?.read();
    const failure = Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" });
    source.destroy(failure);
    await expect(reader?.read()).rejects.toThrow("upstream_reset");
    expect(await result).toMatchObject({
      status: 200,
      error: { type: "upstream_error", code: "upstream_reset" },
      usage: { inputTokens: 2572, outputTokens: 2, complete: false },
    });
  });

  it("stops reading the vendor when the client goes away, and records it once", async () => {
    const source = new PassThrough();
    const { relayed, result, calls } = relay(
      "groq",
      "POST",
      "/v1/chat/completions",
      upstream(200, { "content-type": "text/event-stream" }, source),
    );
    source.write(fixture("groq-chat.sse").subarray(0, 300));
    const body = (await relayed).body;
    await body?.cancel();
    expect(source.destroyed).toBe(true);
    expect(await result).toMatchObject({ error: { type: "client_error", code: "client_closed_request" } });
    expect((await result).usage.complete).toBe(false);
    expect(calls()).toBe(1);
  });

  it("relays Gemini's JSON-array stream untouched and reads its usage", async () => {
    const bytes = fixture("gemini-stream.json");
    const { relayed, result } = relay(
      "gemini",
      "POST",
      "/v1beta/models/{model}:streamGenerateContent",
      upstream(200, { "content-type": "application/json; charset=UTF-8" }, Readable.from(chunks(bytes, 64))),
    );
    expect(Buffer.from(await (await relayed).arrayBuffer())).toEqual(bytes);
    expect((await result).usage).toMatchObject({ inputTokens: 12, outputTokens: 47, reasoningTokens: 40 });
  });

  it("sends a JSON answer whole and reads its usage after", async () => {
    const body = JSON.stringify({ id: "x", usage: { prompt_tokens: 3, completion_tokens: 2 } });
    const { relayed, result } = relay(
      "openai",
      "POST",
      "/v1/chat/completions",
      upstream(
        200,
        { "content-type": "application/json", "x-request-id": "req_9" },
        Readable.from([Buffer.from(body)]),
      ),
    );
    const response = await relayed;
    expect(await response.text()).toBe(body);
    expect(await result).toMatchObject({
      streamed: false,
      usage: { inputTokens: 3, outputTokens: 2 },
      vendorRequestId: "req_9",
      response: { text: body, truncated: false },
    });
  });

  it("passes a vendor error through with its status, body and retry hints", async () => {
    const body = JSON.stringify({
      error: { message: "Rate limit reached", type: "requests", code: "rate_limit_exceeded" },
    });
    const { relayed, result } = relay(
      "openai",
      "POST",
      "/v1/chat/completions",
      upstream(
        429,
        { "content-type": "application/json", "retry-after": "2", "set-cookie": "a=b" },
        Readable.from([Buffer.from(body)]),
      ),
    );
    const response = await relayed;
    expect(response.status).toBe(429);
    expect(response.headers.get("retry-after")).toBe("2");
    expect(response.headers.get("set-cookie")).toBeNull();
    expect(await response.text()).toBe(body);
    expect(await result).toMatchObject({
      status: 429,
      error: { type: "vendor_error", code: "429" },
      usage: { inputTokens: 0 },
    });
  });

  it("streams binary audio through and records only its size and the characters sent", async () => {
    const audio = Buffer.alloc(5000, 7);
    const { relayed, result } = relay(
      "openai",
      "POST",
      "/v1/audio/speech",
      upstream(200, { "content-type": "audio/mpeg" }, Readable.from(chunks(audio, 1024))),
      { request: { input: "Hello" } },
    );
    expect(Buffer.from(await (await relayed).arrayBuffer())).toEqual(audio);
    expect(await result).toMatchObject({
      streamed: true,
      usage: { speechCharacters: 5, estimated: true },
      response: { bytes: 5000, contentType: "audio/mpeg", truncated: false },
    });
    expect((await result).response.text).toBeUndefined();
  });

  it("rejects when the body fails before its first byte (the caller answers 502/504)", async () => {
    const source = new PassThrough();
    const { relayed } = relay("openai", "POST", "/v1/chat/completions", upstream(200, {}, source));
    source.destroy(Object.assign(new Error("Body Timeout Error"), { code: "UND_ERR_BODY_TIMEOUT" }));
    await expect(relayed).rejects.toMatchObject({ code: "UND_ERR_BODY_TIMEOUT" });
  });
});
