import { describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import { idempotencyError, requestFingerprint, validateRequestId } from "../../../lambda/core/idempotency";

function refusal(value: string): ApiError {
  try {
    validateRequestId(value);
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected an ApiError");
}

describe("validateRequestId", () => {
  it("accepts printable ASCII up to 200 characters", () => {
    expect(validateRequestId("req_123")).toBe("req_123");
    expect(validateRequestId("550e8400-e29b-41d4-a716-446655440000")).toBe(
      "550e8400-e29b-41d4-a716-446655440000",
    );
    expect(validateRequestId("a".repeat(200))).toBe("a".repeat(200));
    expect(validateRequestId("!~{}:/")).toBe("!~{}:/");
  });

  it.each([
    ["10 KB", "x".repeat(10 * 1024), "1 to 200 characters"],
    ["201 characters", "a".repeat(201), "1 to 200 characters"],
    ["empty", "", "1 to 200 characters"],
    ["a control character", "abc\u0001def", "printable ASCII"],
    ["a tab", "abc\tdef", "printable ASCII"],
    ["DEL", "abc\u007f", "printable ASCII"],
    ["a space", "abc def", "printable ASCII"],
    ["non-ASCII", "réquest", "printable ASCII"],
  ])("refuses %s with 400 invalid_header", (_label, value, why) => {
    const err = refusal(value);
    expect(err.status).toBe(400);
    expect(err.toBody().error).toMatchObject({ type: "invalid_request_error", code: "invalid_header" });
    expect(err.message).toContain("X-Request-ID");
    expect(err.message).toContain(why);
  });
});

describe("requestFingerprint", () => {
  const body = new TextEncoder().encode('{"model":"m"}');
  it("is the same for the same request and differs by method, target or body", () => {
    const base = requestFingerprint("POST", "/openai/v1/chat/completions", body);
    expect(requestFingerprint("POST", "/openai/v1/chat/completions", body)).toBe(base);
    expect(requestFingerprint("PUT", "/openai/v1/chat/completions", body)).not.toBe(base);
    expect(requestFingerprint("POST", "/openai/v1/embeddings", body)).not.toBe(base);
    expect(
      requestFingerprint("POST", "/openai/v1/chat/completions", new TextEncoder().encode('{"model":"n"}')),
    ).not.toBe(base);
  });

  it("cannot be confused by moving bytes between target and body", () => {
    const a = requestFingerprint("POST", "/a\nb", new TextEncoder().encode("c"));
    const b = requestFingerprint("POST", "/a", new TextEncoder().encode("b\nc"));
    expect(a).not.toBe(b);
  });
});

describe("idempotencyError", () => {
  it("is 409 in progress, 422 for another request, 409 for a response too large to replay", () => {
    expect(idempotencyError({ kind: "in_progress" }).status).toBe(409);
    expect(idempotencyError({ kind: "in_progress" }).toBody().error).toMatchObject({
      type: "idempotency_error",
      code: "request_in_progress",
    });
    const mismatch = idempotencyError({ kind: "mismatch" });
    expect(mismatch.status).toBe(422);
    expect(mismatch.message).toContain("different request");
    expect(idempotencyError({ kind: "completed" }).toBody().error.code).toBe("response_not_replayable");
  });
});
