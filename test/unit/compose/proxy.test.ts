import { describe, expect, it } from "vitest";
import { recordOf, warehouseHooks } from "../../../lambda/compose/proxy";
import { combineHooks, type ProxyCall, type ProxyOutcome } from "../../../lambda/core/call";
import { buildEvent, type NewEvent } from "../../../lambda/core/cloudevent";
import { ApiError } from "../../../lambda/core/errors";
import { loggerOver, silentLogger } from "../../../lambda/core/logger";
import { TIER_LIMITS } from "../../../lambda/core/model";
import { hmacUserIdHasher, type StoreLevel } from "../../../lambda/core/privacy";
import type { RecordQueue } from "../../../lambda/core/queue";
import type { InteractionRecord } from "../../../lambda/core/record";
import { parseRecord } from "../../../lambda/core/record";
import { eventHooks } from "../../../lambda/events/hooks";

const VENDOR_KEY = "sk-ant-VENDORHALFOFADUALKEY000";
const hasher = hmacUserIdHasher(() => Buffer.from("test user-id key"));

function call(overrides: Partial<ProxyCall> = {}): ProxyCall {
  return {
    id: "txn_abc123",
    vendor: "anthropic",
    endpoint: "anthropic:/v1/messages",
    method: "POST",
    auth: {
      projectId: "proj-a",
      keyId: "abcdefghij012345",
      tier: "free",
      rateLimit: TIER_LIMITS.free,
      store: "full",
    },
    startedAt: Date.UTC(2026, 0, 2, 3, 4, 5, 6),
    requestId: "req-1",
    userHeader: undefined,
    userAgent: "Anthropic/JS 1.12.0",
    storeHeader: undefined,
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
    const record = recordOf(call(), outcome, "full");
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
    const record = recordOf(
      call({ auth: { ...call().auth, vendorKey: VENDOR_KEY }, billing: undefined }),
      { ...outcome, status: 402, error: { type: "billing_error", code: "insufficient_credits" } },
      "full",
    );
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
    await warehouseHooks(queue, hasher).after?.(call(), outcome);
    expect(sent.map((r) => r.transaction_id)).toEqual(["txn_abc123"]);
  });

  describe("store levels", () => {
    const sentBy = async (c: ProxyCall) => {
      const sent: InteractionRecord[] = [];
      const queue: RecordQueue = { send: async (r) => void sent.push(r), close: async () => {} };
      const hooks = warehouseHooks(queue, hasher);
      const refused = await hooks.admit?.(c).then(
        () => undefined,
        (err: unknown) => err,
      );
      await hooks.after?.(c, outcome);
      return { record: sent[0] as InteractionRecord, refused };
    };
    const at = (store: StoreLevel, storeHeader?: string) =>
      call({ auth: { ...call().auth, store }, storeHeader });

    it("keeps bodies at full, none at metadata, and at none the user only as a keyed hash", async () => {
      const full = (await sentBy(at("full"))).record;
      expect(full).toMatchObject({ store_level: "full", user_id: "u-42" });
      expect(full.request_body).not.toBeNull();

      const metadata = (await sentBy(at("metadata"))).record;
      expect(metadata).toMatchObject({
        store_level: "metadata",
        request_body: null,
        response_body: null,
        truncated: false,
        user_id: "u-42",
        input_tokens: 12,
        cost_micros: 1234,
        request_bytes: 60,
        response_bytes: 900,
      });

      const none = (await sentBy(at("none"))).record;
      expect(none).toMatchObject({ store_level: "none", request_body: null, response_body: null });
      expect(none.user_id).toBe(await hasher.keyed("proj-a", "u-42"));
      expect(none.user_id).toMatch(/^hmac:[0-9a-f]{64}$/);
      // Keyed: another deployment's key gives another stand-in, and the project is part of it.
      expect(await hmacUserIdHasher(() => Buffer.from("other")).keyed("proj-a", "u-42")).not.toBe(
        none.user_id,
      );
      expect(await hasher.keyed("proj-b", "u-42")).not.toBe(none.user_id);
      expect(parseRecord(JSON.parse(JSON.stringify(none)))).toEqual(none);
    });

    it("leaves the call's record on the call for the hooks after it, unchanged by what it sends", async () => {
      const c = at("none");
      expect(c.record).toBeUndefined();
      const { record } = await sentBy(c);
      const shared = c.record;
      expect(shared).toEqual(recordOf(c, outcome, "none"));
      expect(record.user_id).toBe(await hasher.keyed("proj-a", "u-42"));
      // The events' hook reads the same record after the warehouse's: its user is the caller's still.
      expect(shared?.user_id).toBe("u-42");
      expect(record).toEqual({ ...shared, user_id: record.user_id });
    });

    it("lets X-DMT-Store ask for less, in any case", async () => {
      const { record, refused } = await sentBy(at("full", " Metadata "));
      expect(refused).toBeUndefined();
      expect(record).toMatchObject({ store_level: "metadata", request_body: null });
      expect((await sentBy(at("metadata", "none"))).record.store_level).toBe("none");
      expect((await sentBy(at("metadata", "metadata"))).record.store_level).toBe("metadata");
    });

    it("refuses X-DMT-Store asking for more than the key stores, or naming no level, and keeps no body of it", async () => {
      for (const [store, header, says] of [
        ["metadata", "full", "asks for 'full', but this key stores at most 'metadata'"],
        ["none", "metadata", "asks for 'metadata', but this key stores at most 'none'"],
        ["full", "nothing", "must be one of none, metadata, full"],
        ["full", "", "must be one of none, metadata, full"],
      ] as const) {
        const { record, refused } = await sentBy(at(store, header));
        expect(refused).toBeInstanceOf(ApiError);
        expect((refused as ApiError).toBody()).toEqual({
          error: {
            type: "invalid_request_error",
            code: "invalid_header",
            message: expect.stringContaining(says),
          },
        });
        expect((refused as ApiError).status).toBe(400);
        expect(record.request_body).toBeNull();
        expect(record.response_body).toBeNull();
        expect(record.store_level).toBe(store === "none" ? "none" : "metadata");
      }
    });
  });

  describe("the hooks after it, in the order composeProxy combines them", () => {
    const queue: RecordQueue = { send: async () => {}, close: async () => {} };
    const events = (logger = silentLogger) => {
      const published: NewEvent[] = [];
      const checked: string[] = [];
      const hooks = eventHooks(
        {
          publish: async (event) => {
            published.push(event);
            return buildEvent(event, 0);
          },
        },
        { check: async (projectId) => void checked.push(projectId) },
        logger,
      );
      return { hooks, published, checked };
    };

    it("hands the events' hook the warehouse's record: its figures, at none without the user", async () => {
      const { hooks, published, checked } = events();
      const c = call({ auth: { ...call().auth, store: "none" } });
      await combineHooks([warehouseHooks(queue, hasher), hooks], silentLogger).after?.(c, outcome);
      expect(published).toEqual([
        {
          type: "usage.recorded",
          projectId: "proj-a",
          subject: "txn_abc123",
          data: expect.objectContaining({
            transaction_id: "txn_abc123",
            user_id: null,
            billing_mode: "managed",
            input_tokens: 12,
            cost_usd: "0.001234",
            price_version: "2026-01",
          }),
        },
      ]);
      expect(checked).toEqual(["proj-a"]);
    });

    it("says so, and publishes nothing, when the events' hook runs before the warehouse's", async () => {
      const errors: unknown[] = [];
      const logger = loggerOver((level, message, fields) => {
        if (level === "error") errors.push({ message, ...fields });
      });
      const { hooks, published } = events();
      await combineHooks([hooks, warehouseHooks(queue, hasher)], logger).after?.(call(), outcome);
      expect(published).toEqual([]);
      expect(errors).toEqual([
        expect.objectContaining({
          message: "proxy after hook failed",
          detail: expect.stringContaining("the warehouse's hook must run first"),
        }),
      ]);
    });
  });
});
