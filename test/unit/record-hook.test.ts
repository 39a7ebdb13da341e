import { describe, expect, it } from "vitest";
import type { ProxyCall, ProxyOutcome } from "../../lambda/core/call";
import { TIER_LIMITS } from "../../lambda/core/model";
import type { RecordQueue } from "../../lambda/core/queue";
import type { InteractionRecord } from "../../lambda/core/record";
import { parseRecord } from "../../lambda/core/record";
import { recordOf, warehouseHooks } from "../../lambda/warehouse/hooks";

const VENDOR_KEY = "sk-ant-VENDORHALFOFADUALKEY000";

function call(overrides: Partial<ProxyCall> = {}): ProxyCall {
  return {
    id: "txn_abc123",
    vendor: "anthropic",
    endpoint: "anthropic:/v1/messages",
    method: "POST",
    auth: { projectId: "proj-a", keyId: "abcdefghij012345", tier: "free", rateLimit: TIER_LIMITS.free },
    startedAt: Date.UTC(2026, 0, 2, 3, 4, 5, 6),
    requestId: "req-1",
    userHeader: undefined,
    userAgent: "Anthropic/JS 1.12.0",
    route: undefined,
    target: "/v1/messages",
    model: "claude-sonnet-4-5",
    stream: true,
    rawBody: undefined,
    body: { model: "claude-sonnet-4-5", metadata: { user_id: "u-42" } },
    form: undefined,
    responseHeaders: {},
    billing: { mode: "managed", costMicros: 1234, priceVersion: "2026-01" },
    ...overrides,
  };
}

const outcome: ProxyOutcome = {
  status: 200,
  usage: {
    inputTokens: 12,
    outputTokens: 7,
    cachedInputTokens: 2,
    cacheWriteTokens: 1,
    reasoningTokens: 3,
    estimated: false,
    complete: true,
  },
  streamed: true,
  ttftMs: 80,
  latencyMs: 400,
  request: { bytes: 60, text: '{"model":"claude-sonnet-4-5"}', truncated: false },
  response: { bytes: 900, text: '{"content":[{"type":"text","text":"hi"}]}', truncated: false },
  vendorRequestId: "req_vendor_9",
};

describe("the warehouse's proxy hook", () => {
  it("makes one schema-valid record of a call and its outcome", () => {
    const record = recordOf(call(), outcome);
    expect(parseRecord(JSON.parse(JSON.stringify(record)))).toEqual(record);
    expect(record).toMatchObject({
      transaction_id: "txn_abc123",
      request_id: "req-1",
      project_id: "proj-a",
      key_id: "abcdefghij012345",
      user_id: "u-42",
      vendor: "anthropic",
      endpoint: "/v1/messages",
      model: "claude-sonnet-4-5",
      billing_mode: "managed",
      status_code: 200,
      streamed: true,
      started_at: Date.UTC(2026, 0, 2, 3, 4, 5, 6),
      latency_ms: 400,
      ttft_ms: 80,
      input_tokens: 12,
      output_tokens: 7,
      cached_input_tokens: 2,
      cache_write_tokens: 1,
      reasoning_tokens: 3,
      cost_micros: 1234,
      price_version: "2026-01",
      response_body: '{"content":[{"type":"text","text":"hi"}]}',
      vendor_request_id: "req_vendor_9",
      user_agent: "Anthropic/JS 1.12.0",
    });
  });

  it("records a dual-key call without its vendor half, and an unpriced call as null cost", () => {
    const record = recordOf(call({ auth: { ...call().auth, vendorKey: VENDOR_KEY }, billing: undefined }), {
      ...outcome,
      status: 402,
      error: { type: "billing_error", code: "insufficient_credits" },
    });
    expect(record).toMatchObject({
      billing_mode: "dual",
      cost_micros: null,
      error_type: "billing_error",
      error_code: "insufficient_credits",
    });
    expect(JSON.stringify(record)).not.toContain("VENDORHALF");
  });

  it("sends the record to the queue after the call", async () => {
    const sent: InteractionRecord[] = [];
    const queue: RecordQueue = { send: async (r) => void sent.push(r), close: async () => {} };
    await warehouseHooks(queue).after?.(call(), outcome);
    expect(sent.map((r) => r.transaction_id)).toEqual(["txn_abc123"]);
  });
});
