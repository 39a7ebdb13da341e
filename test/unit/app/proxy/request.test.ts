import { describe, expect, it } from "vitest";
import { forwardedQuery } from "../../../../lambda/app/proxy/request";
import { ApiError } from "../../../../lambda/core/errors";
import { VENDOR_DEFINITIONS } from "../../../../lambda/vendors";

function refusal(run: () => unknown): { status: number; code: string; headers: Record<string, string> } {
  try {
    run();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code, headers: err.headers };
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("forwarded query", () => {
  it("drops the parameters that carry service keys and keeps the rest", () => {
    expect(
      forwardedQuery("http://h/openai/v1/models?api_key=dmt_x&limit=2&key=k", VENDOR_DEFINITIONS.openai),
    ).toBe("?limit=2");
    expect(forwardedQuery("http://h/openai/v1/models?api_key=dmt_x", VENDOR_DEFINITIONS.openai)).toBe("");
    expect(forwardedQuery("http://h/openai/v1/models?", VENDOR_DEFINITIONS.openai)).toBe("");
  });

  it("lets Gemini streams ask for SSE and nothing else", () => {
    expect(
      forwardedQuery(
        "http://h/gemini/v1beta/models/m:streamGenerateContent?alt=sse&key=k",
        VENDOR_DEFINITIONS.gemini,
      ),
    ).toBe("?alt=sse");
    for (const query of ["alt=json", "alt=proto", "%24alt=media", "alt=sse&alt=json", "alt="]) {
      expect(
        refusal(() => forwardedQuery(`http://h/x?${query}`, VENDOR_DEFINITIONS.gemini)),
        query,
      ).toMatchObject({
        status: 400,
        code: "invalid_field",
      });
    }
  });
});
