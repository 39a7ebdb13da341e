import { readFileSync } from "node:fs";
import { PassThrough, Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { relayResponse } from "../../../../lambda/app/proxy/relay";
import { decimalUsd } from "../../../../lambda/core/money";
import type { Usage } from "../../../../lambda/core/usage";
import type { VendorName } from "../../../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../../../lambda/vendors";
import { JsonArrayReader } from "../../../../lambda/vendors/json-array";
import { parseSseEvent, withEventData } from "../../../../lambda/vendors/sse";

/**
 * The cost in the stream (`X-DMT-Include-Cost: 1`): the relay holds the last event with usage until the
 * stream ends, then sends it with `dmt_cost_usd` in its usage object, priced from the final usage; every
 * other event passes byte for byte. Where the usage sits is each vendor route's `usageInEvent`.
 */

const fixture = (name: string) => readFileSync(new URL(`../../../fixtures/${name}`, import.meta.url));

function chunks(bytes: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.subarray(at, at + size));
  return out;
}

/** A price that depends on every figure it is given, so a cost from other usage reads differently. */
const priceOf = (usage: Usage) =>
  decimalUsd(
    usage.inputTokens * 3 + usage.outputTokens * 15 + usage.cachedInputTokens + usage.reasoningTokens,
  );

function relay(
  vendor: VendorName,
  path: string,
  body: Readable,
  streamCost: ((usage: Usage) => string | undefined) | undefined,
  contentType = "text/event-stream",
) {
  const route = VENDOR_DEFINITIONS[vendor].routes.find((r) => r.method === "POST" && r.path === path);
  if (!route) throw new Error(`no route ${path}`);
  let usage: Promise<Usage> = Promise.reject(new Error("not done"));
  usage.catch(() => {});
  const relayed = relayResponse(
    { status: 200, headers: { "content-type": contentType }, body },
    {
      route,
      usage: VENDOR_DEFINITIONS[vendor].usage,
      usageContext: { operation: route.operation, request: undefined },
      stripUsage: false,
      captureLimit: 64 * 1024,
      arrived: performance.now(),
      extraHeaders: {},
      ...(streamCost ? { streamCost } : {}),
      done: (result) => {
        usage = Promise.resolve(result().usage);
      },
    },
  );
  return { relayed, usage: () => usage };
}

/** Its events, each with its blank line (Gemini ends them with CRLF). */
const blocksOf = (text: string) => text.split(/(?<=\r\n\r\n|\n\n)/);

const STREAMS: [string, VendorName, string, string, string][] = [
  ["OpenAI chat, usage asked for", "openai", "/v1/chat/completions", "openai-chat.sse", '"choices":[]'],
  ["OpenAI responses", "openai", "/v1/responses", "openai-responses.sse", "response.completed"],
  ["Anthropic messages", "anthropic", "/v1/messages", "anthropic-messages.sse", "message_delta"],
  [
    "Gemini over SSE",
    "gemini",
    "/v1beta/models/{model}:streamGenerateContent",
    "gemini-stream.sse",
    '"finishReason":"STOP"',
  ],
];

describe.each(STREAMS)("the cost in a stream: %s", (_name, vendor, path, file, lastUsageMark) => {
  const original = fixture(file).toString();
  const lastUsage = blocksOf(original).findLastIndex((block) => block.includes(lastUsageMark));

  it.each([1, 7, 100, 1 << 20])(
    "puts dmt_cost_usd in the last usage event only, priced from the final usage (chunks of %i bytes)",
    async (size) => {
      const { relayed, usage } = relay(
        vendor,
        path,
        Readable.from(chunks(Buffer.from(original), size)),
        priceOf,
      );
      const sent = blocksOf(await (await relayed).text());
      const expected = blocksOf(original);
      expect(sent).toHaveLength(expected.length);
      const cost = priceOf(await usage());
      expect(cost).toMatch(/^\d+\.\d+$/);
      for (const [i, block] of sent.entries()) {
        if (i !== lastUsage) {
          expect(block).toBe(expected[i]);
          continue;
        }
        const sentEvent = parseSseEvent(block);
        const event = parseSseEvent(expected[i] ?? "");
        expect(sentEvent?.event).toBe(event?.event);
        const json = JSON.parse(sentEvent?.data ?? "");
        const usageObject = VENDOR_DEFINITIONS[vendor].routes
          .find((r) => r.path === path)
          ?.usageInEvent?.(json, sentEvent?.event);
        expect(usageObject?.dmt_cost_usd).toBe(cost);
        delete usageObject?.dmt_cost_usd;
        expect(json).toEqual(JSON.parse(event?.data ?? ""));
      }
    },
  );

  it("passes the stream byte for byte without the header, or when the call has no price", async () => {
    for (const streamCost of [undefined, () => undefined]) {
      const { relayed } = relay(vendor, path, Readable.from(chunks(Buffer.from(original), 7)), streamCost);
      expect(await (await relayed).text()).toBe(original);
    }
  });
});

describe("holding the last usage event", () => {
  it("sends what comes before a usage event at once, and the held event only when the stream ends", async () => {
    const source = new PassThrough();
    const { relayed } = relay("anthropic", "/v1/messages", source, priceOf);
    const blocks = blocksOf(fixture("anthropic-messages.sse").toString());
    const delta = blocks.findIndex((block) => block.includes("message_delta"));
    source.write(blocks.slice(0, delta).join(""));
    const reader = (await relayed).body?.getReader();
    if (!reader) throw new Error("no body");
    const decoder = new TextDecoder();
    let received = "";
    while (received.length < blocks.slice(0, delta).join("").length) {
      received += decoder.decode((await reader.read()).value);
    }
    expect(received).toBe(blocks.slice(0, delta).join(""));
    // The usage event and what follows it wait for the end.
    source.write(blocks.slice(delta).join(""));
    source.end();
    let rest = "";
    for (let next = await reader.read(); !next.done; next = await reader.read()) {
      rest += decoder.decode(next.value);
    }
    expect(rest).toContain('"dmt_cost_usd":"');
    expect(rest.endsWith(blocks.at(-1) ?? "")).toBe(true);
  });

  it("lets an earlier usage event go unchanged when a later one comes (Gemini reports usage in each chunk)", async () => {
    const original = fixture("gemini-stream.sse").toString();
    const { relayed } = relay(
      "gemini",
      "/v1beta/models/{model}:streamGenerateContent",
      Readable.from(chunks(Buffer.from(original), 13)),
      priceOf,
    );
    const sent = await (await relayed).text();
    expect(sent.match(/"dmt_cost_usd"/g)).toHaveLength(1);
    const usageEvents = blocksOf(sent).filter((block) => block.includes("usageMetadata"));
    expect(usageEvents.length).toBeGreaterThan(1);
    expect(usageEvents.at(-1)).toContain('"dmt_cost_usd"');
  });

  it("leaves a stream with no usage event (Groq's usage only under x_groq) as it came", async () => {
    const original = fixture("groq-chat.sse").toString();
    const { relayed } = relay(
      "groq",
      "/v1/chat/completions",
      Readable.from(chunks(Buffer.from(original), 7)),
      priceOf,
    );
    expect(await (await relayed).text()).toBe(original);
  });

  it("reads OpenAI-style usage alike on Groq's chat and responses routes", () => {
    const openAi = VENDOR_DEFINITIONS.openai.routes.find((r) => r.path === "/v1/chat/completions");
    for (const path of ["/v1/chat/completions", "/v1/responses"]) {
      const route = VENDOR_DEFINITIONS.groq.routes.find((r) => r.path === path);
      expect(route?.usageInEvent).toBe(openAi?.usageInEvent);
    }
  });
});

describe("Gemini's JSON-array stream (without alt=sse)", () => {
  const original = fixture("gemini-stream.json").toString();
  const path = "/v1beta/models/{model}:streamGenerateContent";

  it.each([1, 7, 64, 1 << 20])(
    "puts dmt_cost_usd in the last element with usageMetadata only (chunks of %i bytes)",
    async (size) => {
      const { relayed, usage } = relay(
        "gemini",
        path,
        Readable.from(chunks(Buffer.from(original), size)),
        priceOf,
        "application/json; charset=UTF-8",
      );
      const sent = await (await relayed).text();
      const elements = JSON.parse(sent) as { usageMetadata?: Record<string, unknown> }[];
      const expected = JSON.parse(original) as typeof elements;
      const last = expected.findLastIndex((element) => element.usageMetadata !== undefined);
      expect(elements[last]?.usageMetadata?.dmt_cost_usd).toBe(priceOf(await usage()));
      delete elements[last]?.usageMetadata?.dmt_cost_usd;
      expect(elements).toEqual(expected);
      // Up to the held element, the bytes are the vendor's.
      const upTo = sent.lastIndexOf('{"candidates"');
      expect(original.startsWith(sent.slice(0, upTo))).toBe(true);
    },
  );

  it("passes byte for byte without the header", async () => {
    for (const streamCost of [undefined, () => undefined]) {
      const { relayed } = relay(
        "gemini",
        path,
        Readable.from(chunks(Buffer.from(original), 7)),
        streamCost,
        "application/json",
      );
      expect(await (await relayed).text()).toBe(original);
    }
  });
});

describe("JsonArrayReader.pieces", () => {
  it("hands on every character once, in order, whatever the chunks", () => {
    const text = '[{"a":"}{,"},\r\n {"b":[1,{"c":2}]} ,{"d":"\\""}]\n';
    for (const size of [1, 2, 5, 100]) {
      const reader = new JsonArrayReader();
      const pieces = chunks(Buffer.from(text), size).flatMap((chunk) => reader.pieces(chunk));
      expect(pieces.map((piece) => piece.text).join("") + reader.rest()).toBe(text);
      expect(pieces.filter((piece) => piece.element).map((piece) => piece.text)).toEqual([
        '{"a":"}{,"}',
        '{"b":[1,{"c":2}]}',
        '{"d":"\\""}',
      ]);
    }
  });
});

describe("withEventData", () => {
  it("replaces the data lines with one, keeping the other lines and the line breaks", () => {
    expect(withEventData("event: message_delta\ndata: {}\n\n", '{"a":1}')).toBe(
      'event: message_delta\ndata: {"a":1}\n\n',
    );
    expect(withEventData("id: 7\r\ndata: {\r\ndata: }\r\n: note\r\n\r\n", '{"a":1}')).toBe(
      'id: 7\r\ndata: {"a":1}\r\n: note\r\n\r\n',
    );
    expect(withEventData("data:{}\r\r", "[]")).toBe("data: []\r\r");
  });
});
