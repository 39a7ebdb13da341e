import { describe, expect, it } from "vitest";
import { genAiCall, responseModelOf } from "../../../lambda/telemetry/gen-ai";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { RouteMatcher } from "../../../lambda/vendors/routes";
import { chatCall, outcomeOf } from "../../support/proxy-calls";

describe("a call in the GenAI conventions", () => {
  it("counts cache reads and writes in the input tokens, and each apart", () => {
    const call = chatCall({ projectId: "proj-a", keyId: "key0123456789abc" });
    call.billing = { mode: "managed", costMicros: 1234, priceVersion: "2026-11-01" };
    const gen = genAiCall(
      call,
      outcomeOf({ inputTokens: 1500, cachedInputTokens: 1000, cacheWriteTokens: 200, outputTokens: 40 }),
    );
    expect(gen.span).toMatchObject({
      "gen_ai.provider.name": "openai",
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.usage.input_tokens": 1500,
      "gen_ai.usage.output_tokens": 40,
      "gen_ai.usage.cache_read.input_tokens": 1000,
      "gen_ai.usage.cache_creation.input_tokens": 200,
      "dmt.billing_mode": "managed",
      "dmt.cost_usd": 0.001234,
      "dmt.price_version": "2026-11-01",
      "dmt.transaction_id": call.id,
      "dmt.project_id": "proj-a",
      "dmt.key_id": "key0123456789abc",
    });
    expect(gen.tokens).toEqual({ input: 1500, output: 40 });
    expect(gen.spanName).toBe("chat gpt-4o-mini");
  });

  it("never carries a body, a vendor key or a user id", () => {
    const call = chatCall({ userId: "alice@example.com", auth: { vendorKey: "sk-vendor-secret" } });
    const gen = genAiCall(call, outcomeOf({ inputTokens: 5, outputTokens: 1 }));
    const text = JSON.stringify(gen);
    for (const secret of ["sk-vendor-secret", "alice@example.com", "Say hello", "Hello"]) {
      expect(text).not.toContain(secret);
    }
  });

  it("leaves the token attributes and metric out when no token was used (a refusal)", () => {
    const gen = genAiCall(
      chatCall(),
      outcomeOf({}, { status: 429, error: { type: "rate_limit_error", code: "rate_limit_exceeded" } }),
    );
    expect(gen.span["gen_ai.usage.input_tokens"]).toBeUndefined();
    expect(gen.tokens).toBeUndefined();
    expect(gen.failed).toBe(true);
    expect(gen.span["error.type"]).toBe("rate_limit_exceeded");
    expect(gen.metric["error.type"]).toBe("rate_limit_exceeded");
    // An unpriced call has no cost attribute rather than a zero one.
    expect(gen.span["dmt.cost_usd"]).toBeUndefined();
  });

  it("names Gemini's provider and operation as the conventions do", () => {
    const { route } = new RouteMatcher(VENDOR_DEFINITIONS.gemini.routes).match(
      "POST",
      "/v1beta/models/gemini-2.5-flash:generateContent",
    );
    const call = { ...chatCall({ model: "gemini-2.5-flash" }), vendor: "gemini" as const, route };
    const gen = genAiCall(call, outcomeOf({ inputTokens: 3, outputTokens: 2 }));
    expect(gen.span["gen_ai.provider.name"]).toBe("gcp.gemini");
    expect(gen.span["gen_ai.operation.name"]).toBe("generate_content");
  });

  it("reads the response model from the body's members, never from inside a string", () => {
    expect(responseModelOf('{"id":"x","model":"gpt-4o-mini-2024-07-18","choices":[]}')).toBe(
      "gpt-4o-mini-2024-07-18",
    );
    expect(responseModelOf('{"candidates":[],"modelVersion":"gemini-2.5-flash-001"}')).toBe(
      "gemini-2.5-flash-001",
    );
    expect(
      responseModelOf('{"choices":[{"message":{"content":"say {\\"model\\":\\"fake\\"}"}}]}'),
    ).toBeUndefined();
  });
});
