import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type CostBreakdown, costBreakdown, loadPriceCatalogue } from "../../../../lambda/core/pricing";
import type { Usage } from "../../../../lambda/core/usage";
import type { Operation, VendorName } from "../../../../lambda/core/vendor-model";
import { VENDOR_DEFINITIONS } from "../../../../lambda/vendors";

/**
 * Golden costs: for each dimension the vendors bill, a fixture answer as the vendor sends it, whole and
 * streamed, through the vendor's own usage extractor and the shipped catalogue, to an exact micro-USD
 * figure worked out by hand from the published price. Each case names its price's source and the day
 * it was read (prices/catalogue.json keeps the same under `sources`).
 */

const catalogue = loadPriceCatalogue(
  JSON.parse(readFileSync(new URL("../../../../prices/catalogue.json", import.meta.url), "utf8")),
);
const AT = new Date("2026-11-26T12:00:00Z");

function priced(vendor: VendorName, model: string, usage: Usage): CostBreakdown {
  const price = catalogue.priceFor(vendor, model, AT);
  if (!price) throw new Error(`no price for ${vendor}/${model}`);
  return costBreakdown(usage, price);
}

function whole(
  vendor: VendorName,
  operation: Operation,
  body: unknown,
  request: Record<string, unknown> = {},
) {
  return VENDOR_DEFINITIONS[vendor].usage.fromResponse({ operation, request }, body);
}

/** Feeds events (the `data` of each SSE event or JSON-array element) to the vendor's stream observer. */
function streamed(
  vendor: VendorName,
  operation: Operation,
  events: unknown[],
  request: Record<string, unknown> = {},
) {
  const observer = VENDOR_DEFINITIONS[vendor].usage.stream({ operation, request });
  for (const event of events) observer.event(JSON.stringify(event), undefined);
  return observer.result(true).usage;
}

/**
 * Recomputes a breakdown from its own lines, as a reader of the record would: the exact sum of
 * quantity × rate_usd / per, times the markup, rounded up to a whole micro-USD.
 */
function recomputed(breakdown: CostBreakdown): number {
  const nanos = (usd: string) => {
    const [whole = "0", fraction = ""] = usd.split(".");
    return BigInt(whole) * 1_000_000_000n + BigInt(fraction.padEnd(9, "0"));
  };
  // Sum in nano-USD × 3600 (a common multiple of every `per` used: 1, 60, 3600, 1000, 1e6).
  const scale = 3_600_000_000n;
  let sum = 0n;
  for (const item of breakdown.items)
    sum += (BigInt(item.quantity) * nanos(item.rate_usd) * scale) / BigInt(item.per);
  const markup = nanos(breakdown.markup);
  const den = scale * 1000n * 1_000_000_000n;
  return Number((sum * markup + den - 1n) / den);
}

function expectCost(breakdown: CostBreakdown, micros: number): void {
  expect(breakdown.micros).toBe(micros);
  expect(recomputed(breakdown)).toBe(micros);
}

const line = (breakdown: CostBreakdown, dimension: string) =>
  breakdown.items.find((item) => item.dimension === dimension);

describe("Anthropic: cache writes by TTL", () => {
  // claude-sonnet-4-6: input $3, 5-minute cache write $3.75 (1.25x), 1-hour cache write $6 (2x),
  // cache read $0.30, output $15 per MTok — https://platform.claude.com/docs/en/about-claude/pricing,
  // read 2026-11-26.
  // 1,000 × 3 + 2,000 × 0.30 + 1,000 × 3.75 + 3,000 × 6 + 500 × 15 = 32,850 micro-USD.
  const usage = {
    input_tokens: 1000,
    cache_read_input_tokens: 2000,
    cache_creation_input_tokens: 4000,
    cache_creation: { ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 3000 },
    output_tokens: 500,
  };

  it("prices 1-hour writes at 2x input, whole", () => {
    const got = whole("anthropic", "messages", { type: "message", usage });
    expect(got.cacheWrite1hTokens).toBe(3000);
    const breakdown = priced("anthropic", "claude-sonnet-4-6", got);
    expectCost(breakdown, 32_850);
    expect(line(breakdown, "cache_write_1h")).toMatchObject({
      quantity: 3000,
      rate_usd: "6",
      amount_micros: "18000",
    });
    expect(line(breakdown, "cache_write")).toMatchObject({ quantity: 1000, rate_usd: "3.75" });
  });

  it("prices 1-hour writes at 2x input, streamed", () => {
    const got = streamed("anthropic", "messages", [
      {
        type: "message_start",
        message: { id: "msg_1", type: "message", usage: { ...usage, output_tokens: 1 } },
      },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hello" } },
      { type: "content_block_stop", index: 0 },
      { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 500 } },
      { type: "message_stop" },
    ]);
    expectCost(priced("anthropic", "claude-sonnet-4-6", got), 32_850);
  });

  it("keeps the long-context tier for 1-hour writes", () => {
    // claude-sonnet-4-5 above 200k input: input $6, 1-hour write $12, output $22.50 per MTok (same source).
    // 240,000 × 6 + 10,000 × 12 + 1,000 × 22.5 = 1,582,500 micro-USD.
    const long = {
      input_tokens: 240_000,
      cache_creation_input_tokens: 10_000,
      cache_creation: { ephemeral_1h_input_tokens: 10_000 },
      output_tokens: 1000,
    };
    const wholeCost = priced(
      "anthropic",
      "claude-sonnet-4-5",
      whole("anthropic", "messages", { usage: long }),
    );
    expectCost(wholeCost, 1_582_500);
    expect(wholeCost.long_context).toBe(true);
    const got = streamed("anthropic", "messages", [
      { type: "message_start", message: { id: "msg_2", usage: { ...long, output_tokens: 1 } } },
      { type: "message_delta", delta: {}, usage: { output_tokens: 1000 } },
    ]);
    expectCost(priced("anthropic", "claude-sonnet-4-5", got), 1_582_500);
  });
});

describe("Anthropic: server-side tools", () => {
  // Web search $10 per 1,000 searches (https://platform.claude.com/docs/en/about-claude/pricing, read
  // 2026-11-26); web fetch has no charge beyond its tokens
  // (https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-fetch-tool, read 2026-11-26).
  // claude-sonnet-4-6: 5,000 × 3 + 800 × 15 = 27,000 micro-USD of tokens, + 3 searches × 10,000 = 57,000.
  const tools = { web_search_requests: 3, web_fetch_requests: 2 };

  it("bills web searches per search and web fetches at zero, whole", () => {
    const got = whole("anthropic", "messages", {
      usage: { input_tokens: 5000, output_tokens: 800, server_tool_use: tools },
    });
    expect(got.toolCalls).toEqual({ web_search: 3, web_fetch: 2 });
    const breakdown = priced("anthropic", "claude-sonnet-4-6", got);
    expectCost(breakdown, 57_000);
    expect(line(breakdown, "tool_calls.web_search")).toMatchObject({
      quantity: 3,
      per: 1000,
      amount_micros: "30000",
    });
    expect(line(breakdown, "tool_calls.web_fetch")).toMatchObject({
      quantity: 2,
      rate_usd: "0",
      amount_micros: "0",
    });
    expect(breakdown.unpriced).toBeUndefined();
  });

  it("bills web searches reported in the stream's final usage", () => {
    const got = streamed("anthropic", "messages", [
      { type: "message_start", message: { id: "msg_3", usage: { input_tokens: 5000, output_tokens: 1 } } },
      { type: "message_delta", delta: {}, usage: { output_tokens: 800, server_tool_use: tools } },
    ]);
    expectCost(priced("anthropic", "claude-sonnet-4-6", got), 57_000);
  });
});

describe("OpenAI: service tiers", () => {
  // gpt-5 standard: input $1.25, cached $0.125, output $10 per MTok
  // (https://developers.openai.com/api/docs/pricing, read 2026-11-22). Flex at Batch rates, half of them
  // (https://developers.openai.com/api/docs/guides/flex-processing, read 2026-11-26); priority ("fast"
  // since 2026-07-30) $2.50 / $0.25 / $20 (https://openai.com/api-fast-mode/, read 2026-11-26).
  const usage = {
    prompt_tokens: 10_000,
    completion_tokens: 2000,
    total_tokens: 12_000,
    prompt_tokens_details: { cached_tokens: 4000 },
    completion_tokens_details: { reasoning_tokens: 1500 },
  };
  const chunks = (tier: string) => [
    {
      id: "c1",
      object: "chat.completion.chunk",
      model: "gpt-5",
      service_tier: tier,
      choices: [{ index: 0, delta: { role: "assistant", content: "Hi" } }],
    },
    {
      id: "c1",
      object: "chat.completion.chunk",
      model: "gpt-5",
      service_tier: tier,
      choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
    },
    { id: "c1", object: "chat.completion.chunk", model: "gpt-5", service_tier: tier, choices: [], usage },
  ];

  // Flex: 6,000 × 0.625 + 4,000 × 0.0625 + 2,000 × 5 = 14,000 micro-USD (standard would be 28,000).
  it("bills flex at the flex rates, whole and streamed", () => {
    const wholeCost = priced("openai", "gpt-5", whole("openai", "chat", { service_tier: "flex", usage }));
    expectCost(wholeCost, 14_000);
    expect(wholeCost.service_tier).toBe("flex");
    expectCost(priced("openai", "gpt-5", streamed("openai", "chat", chunks("flex"))), 14_000);
  });

  // Priority: 6,000 × 2.50 + 4,000 × 0.25 + 2,000 × 20 = 56,000 micro-USD.
  it("bills priority (and its new name, fast) at the priority rates, whole and streamed", () => {
    expectCost(
      priced("openai", "gpt-5", whole("openai", "chat", { service_tier: "priority", usage })),
      56_000,
    );
    expectCost(priced("openai", "gpt-5", whole("openai", "chat", { service_tier: "fast", usage })), 56_000);
    expectCost(priced("openai", "gpt-5", streamed("openai", "chat", chunks("priority"))), 56_000);
  });

  it("bills the default tier at the standard rates", () => {
    const breakdown = priced("openai", "gpt-5", whole("openai", "chat", { service_tier: "default", usage }));
    expectCost(breakdown, 28_000);
    expect(breakdown.service_tier).toBeUndefined();
  });

  it("names a tier the model has no price for, and bills it at the standard rates", () => {
    // gpt-4o has no flex price in the catalogue.
    const breakdown = priced("openai", "gpt-4o", whole("openai", "chat", { service_tier: "flex", usage }));
    expect(breakdown.unpriced).toEqual(["service_tier.flex"]);
    expect(breakdown.micros).toBeGreaterThan(0);
  });
});

describe("OpenAI: web search in Responses", () => {
  // Web search tool calls $10 per 1,000 (web_search on all models), $25 per 1,000 for
  // web_search_preview on non-reasoning models (https://developers.openai.com/api/docs/pricing, built-in
  // tools, read 2026-11-26).
  const usage = {
    input_tokens: 3000,
    output_tokens: 400,
    total_tokens: 3400,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens_details: { reasoning_tokens: 0 },
  };
  const response = {
    id: "resp_1",
    object: "response",
    status: "completed",
    service_tier: "default",
    output: [
      { type: "web_search_call", id: "ws_1", status: "completed" },
      { type: "web_search_call", id: "ws_2", status: "completed" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Found it." }] },
    ],
    usage,
  };
  const events = [
    { type: "response.created", response: { ...response, status: "in_progress", output: [], usage: null } },
    { type: "response.output_text.delta", delta: "Found it." },
    { type: "response.completed", response },
  ];

  // gpt-5: 3,000 × 1.25 + 400 × 10 = 7,750 micro-USD of tokens, + 2 calls × 10,000 = 27,750.
  it("bills each web_search_call, whole and streamed", () => {
    const request = { model: "gpt-5", tools: [{ type: "web_search" }] };
    const got = whole("openai", "responses", response, request);
    expect(got.toolCalls).toEqual({ web_search: 2 });
    expectCost(priced("openai", "gpt-5", got), 27_750);
    expectCost(priced("openai", "gpt-5", streamed("openai", "responses", events, request)), 27_750);
  });

  // gpt-4o with web_search_preview: 3,000 × 2.50 + 400 × 10 = 11,500, + 2 calls × 25,000 = 61,500.
  it("bills web_search_preview on a non-reasoning model at its own rate", () => {
    const request = { model: "gpt-4o", tools: [{ type: "web_search_preview" }] };
    expectCost(priced("openai", "gpt-4o", whole("openai", "responses", response, request)), 61_500);
    expectCost(priced("openai", "gpt-4o", streamed("openai", "responses", events, request)), 61_500);
  });
});

describe("OpenAI: image input tokens", () => {
  // gpt-image-1: text input $5, image input $10, output (image) $40 per MTok
  // (https://developers.openai.com/api/docs/pricing, read 2026-11-22).
  // 50 × 5 + 250 × 10 + 4,160 × 40 = 169,150 micro-USD.
  const usage = {
    input_tokens: 300,
    output_tokens: 4160,
    total_tokens: 4460,
    input_tokens_details: { text_tokens: 50, image_tokens: 250 },
  };

  it("bills an edit's image input at the image rate, whole and streamed", () => {
    const got = whole("openai", "image", { created: 1, data: [{ b64_json: "AAAA" }], usage });
    expect(got.imageInputTokens).toBe(250);
    expectCost(priced("openai", "gpt-image-1", got), 169_150);
    const events = [
      { type: "image_edit.partial_image", b64_json: "AAAA", partial_image_index: 0 },
      { type: "image_edit.completed", b64_json: "AAAA", usage },
    ];
    const fromStream = streamed("openai", "image", events);
    expect(fromStream.images).toBe(1);
    expectCost(priced("openai", "gpt-image-1", fromStream), 169_150);
  });
});

describe("what nobody prices is kept and named, never billed at zero", () => {
  it("bills audio tokens of a model without an audio rate at the text rate, and names them", () => {
    // gpt-4o: input $2.50, output $10 per MTok. 1,000 × 2.5 + 100 × 10 = 3,500 micro-USD.
    const got = whole("openai", "chat", {
      usage: {
        prompt_tokens: 1000,
        completion_tokens: 100,
        prompt_tokens_details: { audio_tokens: 600 },
        surprise_tokens: 7,
      },
    });
    expect(got.unpriced).toEqual({ surprise_tokens: 7 });
    const breakdown = priced("openai", "gpt-4o", got);
    expectCost(breakdown, 3_500);
    expect(breakdown.unpriced).toEqual(["audio_input"]);
  });

  it("keeps an unknown Anthropic server-tool count", () => {
    const got = whole("anthropic", "messages", {
      usage: { input_tokens: 10, output_tokens: 5, server_tool_use: { code_execution_requests: 2 } },
    });
    expect(got.unpriced).toEqual({ "server_tool_use.code_execution_requests": 2 });
  });
});

describe("Gemini: grounding with Google Search", () => {
  // Gemini 2.x: $35 per 1,000 grounded prompts; Gemini 3.x: $14 per 1,000 search queries
  // (https://ai.google.dev/gemini-api/docs/pricing, read 2026-11-26).
  const usageMetadata = { promptTokenCount: 1000, candidatesTokenCount: 200, totalTokenCount: 1200 };
  const grounding = { webSearchQueries: ["a", "b", "c"], groundingChunks: [{ web: { uri: "https://x" } }] };
  const answer = {
    candidates: [
      { index: 0, content: { role: "model", parts: [{ text: "Hello" }] }, groundingMetadata: grounding },
    ],
    usageMetadata,
  };
  const chunks = [
    { candidates: [{ index: 0, content: { role: "model", parts: [{ text: "Hel" }] } }] },
    {
      candidates: [
        {
          index: 0,
          content: { parts: [{ text: "lo" }] },
          finishReason: "STOP",
          groundingMetadata: grounding,
        },
      ],
      usageMetadata,
    },
  ];

  // gemini-2.5-flash ($0.30 in, $2.50 out): 1,000 × 0.3 + 200 × 2.5 = 800, + one grounded prompt 35,000.
  it("bills Gemini 2.x once per grounded request, whole and streamed", () => {
    const breakdown = priced("gemini", "gemini-2.5-flash", whole("gemini", "generate", answer));
    expectCost(breakdown, 35_800);
    expect(line(breakdown, "tool_requests.google_search")).toMatchObject({ quantity: 1, unit: "requests" });
    expectCost(priced("gemini", "gemini-2.5-flash", streamed("gemini", "generate", chunks)), 35_800);
  });

  // gemini-3.1-pro-preview ($2 in, $12 out): 1,000 × 2 + 200 × 12 = 4,400, + 3 queries × 14,000 = 46,400.
  it("bills Gemini 3.x per search query, whole and streamed", () => {
    expectCost(priced("gemini", "gemini-3.1-pro-preview", whole("gemini", "generate", answer)), 46_400);
    expectCost(priced("gemini", "gemini-3.1-pro-preview", streamed("gemini", "generate", chunks)), 46_400);
  });
});

describe("Groq: service tiers", () => {
  // Groq bills its flex tier at on-demand rates (https://console.groq.com/docs/flex-processing, read
  // 2026-11-26). llama-3.3-70b-versatile: $0.59 in, $0.79 out (https://groq.com/pricing, read 2026-11-22).
  // 1,000 × 0.59 + 100 × 0.79 = 669 micro-USD.
  it("bills flex at the on-demand rates, whole and streamed, without calling it unpriced", () => {
    const usage = { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100, queue_time: 0.01 };
    const breakdown = priced(
      "groq",
      "llama-3.3-70b-versatile",
      whole("groq", "chat", { service_tier: "flex", usage }),
    );
    expectCost(breakdown, 669);
    expect(breakdown.unpriced).toBeUndefined();
    const got = streamed("groq", "chat", [
      { id: "g1", service_tier: "flex", choices: [{ index: 0, delta: { content: "Hi" } }] },
      {
        id: "g1",
        service_tier: "flex",
        choices: [{ index: 0, delta: {}, finish_reason: "stop" }],
        x_groq: { usage },
      },
    ]);
    expectCost(priced("groq", "llama-3.3-70b-versatile", got), 669);
  });
});
