import { describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../bench/warehouse-records";
import {
  buildRecord,
  glueColumns,
  gluePartitionKeys,
  glueProjectionParameters,
  type InteractionInput,
  parseRecord,
  RECORD_BODY_LIMIT_BYTES,
  RECORD_COLUMNS,
  RecordError,
  resolveUserId,
} from "../../../lambda/core/record";
import { emptyUsage } from "../../../lambda/core/usage";

const SERVICE_KEY = "dmt_abcdefghij012345_ZmFrZXNlY3JldGZha2VzZWNyZXRmYWtlc2VjcmV0MDEy";
const VENDOR_KEY = "sk-proj-VENDORSECRET0123456789";

function input(overrides: Partial<InteractionInput> = {}): InteractionInput {
  return {
    transactionId: "txn_1",
    projectId: "proj-a",
    keyId: "abcdefghij012345",
    vendor: "openai",
    endpoint: "/v1/chat/completions",
    billingMode: "managed",
    statusCode: 200,
    streamed: false,
    startedAt: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
    latencyMs: 120.4,
    usage: emptyUsage(),
    costMicros: 42,
    request: { text: '{"model":"gpt-4o"}', bytes: 18, truncated: false },
    response: { text: "{}", bytes: 2, truncated: false },
    store: "full",
    ...overrides,
  };
}

describe("buildRecord", () => {
  it("fills every column, nulls for what the call did not have", () => {
    const record = buildRecord(input());
    expect(Object.keys(record)).toEqual(RECORD_COLUMNS.map((c) => c.name));
    expect(record).toMatchObject({
      schema_version: 2,
      transaction_id: "txn_1",
      request_id: null,
      user_id: null,
      endpoint: "/v1/chat/completions",
      latency_ms: 120,
      ttft_ms: null,
      error_type: null,
      started_at: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
      truncated: false,
    });
  });

  it("stores the path only: the proxy's endpoint form and any query string (api_key, key) are dropped", () => {
    const record = buildRecord(
      input({
        vendor: "gemini",
        endpoint: `gemini:/v1beta/models/x:generateContent?key=${VENDOR_KEY}&alt=sse`,
      }),
    );
    expect(record.endpoint).toBe("/v1beta/models/x:generateContent");
    const other = buildRecord(input({ endpoint: `/v1/models?api_key=${SERVICE_KEY}` }));
    expect(other.endpoint).toBe("/v1/models");
    expect(JSON.stringify([record, other])).not.toMatch(/VENDORSECRET|dmt_abcdefghij/);
  });

  it("takes the user from X-User-ID, else the body's user (OpenAI), else metadata.user_id (Anthropic)", () => {
    const openai = '{"user":"u-openai","metadata":{"user_id":"u-meta"}}';
    const anthropic = '{"metadata":{"user_id":"u-anthropic"}}';
    const body = (text: string) => ({ text, bytes: text.length, truncated: false });
    expect(buildRecord(input({ userIdHeader: "u-header", request: body(openai) })).user_id).toBe("u-header");
    expect(buildRecord(input({ userIdHeader: "", request: body(openai) })).user_id).toBe("u-openai");
    expect(buildRecord(input({ request: body(anthropic) })).user_id).toBe("u-anthropic");
    expect(buildRecord(input({ request: body("not json") })).user_id).toBeNull();
    expect(buildRecord(input({ requestJson: { user: "u-parsed" } })).user_id).toBe("u-parsed");
    expect(resolveUserId(undefined, { user: "", metadata: { user_id: 7 } })).toBeNull();
  });

  it("cuts a body to the record limit on a character boundary and says so", () => {
    // 3-byte characters, so the limit falls inside one of them.
    const text = "€".repeat(RECORD_BODY_LIMIT_BYTES / 3 + 10);
    const record = buildRecord(input({ response: { text, bytes: text.length * 3, truncated: false } }));
    const stored = record.response_body as string;
    expect(Buffer.byteLength(stored)).toBeLessThanOrEqual(RECORD_BODY_LIMIT_BYTES);
    expect(stored).toBe("€".repeat(stored.length));
    expect(stored.length).toBe(Math.floor(RECORD_BODY_LIMIT_BYTES / 3));
    expect(record.truncated).toBe(true);
    expect(record.response_bytes).toBe(text.length * 3);
  });

  it("keeps no text of binary bodies, and carries the proxy's own truncation", () => {
    const record = buildRecord(input({ response: { bytes: 5000, truncated: false } }));
    expect(record.response_body).toBeNull();
    expect(record.response_bytes).toBe(5000);
    expect(buildRecord(input({ request: { text: "{", bytes: 9000, truncated: true } })).truncated).toBe(true);
  });
});

describe("the record explains its charge", () => {
  it("keeps the service tier, the usage beyond the token columns and the cost breakdown with its price version", () => {
    const usage = {
      ...emptyUsage(),
      inputTokens: 4000,
      cacheWriteTokens: 4000,
      cacheWrite1hTokens: 3000,
      serviceTier: "priority",
      toolCalls: { web_search: 2 },
      unpriced: { "server_tool_use.code_execution_requests": 1 },
    };
    const breakdown = {
      micros: 21750,
      items: [
        {
          dimension: "cache_write",
          quantity: 1000,
          unit: "tokens",
          rate_usd: "3.75",
          per: 1e6,
          amount_micros: "3750",
        },
      ],
      markup: "1",
    };
    const record = buildRecord(input({ usage, costBreakdown: breakdown, priceVersion: "2026-11-26" }));
    expect(record.service_tier).toBe("priority");
    expect(JSON.parse(record.usage_details ?? "null")).toEqual({
      cache_write_1h_tokens: 3000,
      tool_calls: { web_search: 2 },
      unpriced: { "server_tool_use.code_execution_requests": 1 },
    });
    expect(JSON.parse(record.cost_breakdown ?? "null")).toEqual({
      price_version: "2026-11-26",
      ...breakdown,
    });
    expect(parseRecord(JSON.parse(JSON.stringify(record)))).toEqual(record);
  });

  it("leaves them null when there is nothing to say", () => {
    expect(buildRecord(input())).toMatchObject({
      service_tier: null,
      usage_details: null,
      cost_breakdown: null,
    });
  });
});

describe("parseRecord (the consumer's check of a queued record)", () => {
  const valid = () => JSON.parse(JSON.stringify(syntheticRecord(3))) as Record<string, unknown>;

  it("accepts a record that went through JSON, and fills absent nullable fields", () => {
    const json = valid();
    delete json.user_agent;
    expect(parseRecord(json)).toEqual({ ...syntheticRecord(3), user_agent: null });
  });

  it("still reads a schema 1 record: the columns 2 added are null", () => {
    const json = valid();
    for (const name of ["service_tier", "usage_details", "cost_breakdown"]) delete json[name];
    expect(parseRecord({ ...json, schema_version: 1 })).toMatchObject({
      schema_version: 1,
      service_tier: null,
      usage_details: null,
      cost_breakdown: null,
    });
  });

  it("takes a nullable field set to undefined as absent, not as an unknown field", () => {
    const fields = { ...valid(), ttft_ms: undefined, model: null };
    expect(parseRecord(fields)).toMatchObject({ ttft_ms: null, model: null });
  });

  it("checks every column by its kind", () => {
    // One wrong value per kind, each in a record otherwise valid.
    const wrong: Record<string, unknown> = {
      string: 42,
      int32: 2 ** 31,
      int64: 2 ** 53,
      double: -0.5,
      boolean: 1,
      timestamp: "2026-01-01",
    };
    for (const column of RECORD_COLUMNS.filter((c) => c.name !== "schema_version")) {
      const make = () => parseRecord({ ...valid(), [column.name]: wrong[column.kind] });
      expect(make, column.name).toThrow(RecordError);
      expect(make, column.name).toThrow(`'${column.name}' must be`);
    }
  });

  it.each([
    ["not an object", () => [1], "not a JSON object"],
    ["another schema version", () => ({ ...valid(), schema_version: 3 }), "unsupported schema_version 3"],
    ["a missing required field", () => ({ ...valid(), status_code: undefined }), "'status_code' is required"],
    ["a wrong type", () => ({ ...valid(), streamed: "yes" }), "'streamed' must be a boolean"],
    ["a negative count", () => ({ ...valid(), input_tokens: -1 }), "'input_tokens' must be an integer"],
    ["a fractional cost", () => ({ ...valid(), cost_micros: 1.5 }), "'cost_micros' must be a non-negative"],
    ["an unknown vendor", () => ({ ...valid(), vendor: "acme" }), "'vendor' must be one of"],
    [
      "an unknown billing mode",
      () => ({ ...valid(), billing_mode: "free" }),
      "'billing_mode' must be one of",
    ],
    ["an unknown field", () => ({ ...valid(), api_key: "x" }), "unknown field 'api_key'"],
    ["a project id that is a path", () => ({ ...valid(), project_id: "../etc" }), "'project_id' is not"],
    [
      "a transaction id with a newline",
      () => ({ ...valid(), transaction_id: "a\nb" }),
      "'transaction_id' must",
    ],
  ])("refuses %s as a RecordError", (_, make, message) => {
    expect(() => parseRecord(make())).toThrow(RecordError);
    expect(() => parseRecord(make())).toThrow(message);
  });
});

describe("schema declarations", () => {
  it("gives Glue one typed column per record column, and the partition keys", () => {
    const glue = glueColumns();
    expect(glue.map((c) => c.name)).toEqual(RECORD_COLUMNS.map((c) => c.name));
    expect(glue.find((c) => c.name === "started_at")?.type).toBe("timestamp");
    expect(glue.find((c) => c.name === "cost_micros")?.type).toBe("bigint");
    expect(glue.find((c) => c.name === "status_code")?.type).toBe("int");
    expect(gluePartitionKeys().map((p) => `${p.name}:${p.type}`)).toEqual(["project:string", "dt:string"]);
  });

  it("projects partitions onto the folder layout", () => {
    const params = glueProjectionParameters("s3://bucket/interactions");
    expect(params["storage.location.template"]).toBe(
      // Athena's placeholders, literally.
      `s3://bucket/interactions/project=$\{project}/dt=$\{dt}/`,
    );
    expect(params["projection.project.type"]).toBe("injected");
  });
});
