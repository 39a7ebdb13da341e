import { describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import { type BoundsRequest, callBounds } from "../../../lambda/vendors/bounds";

const bounds = (request: Partial<BoundsRequest> & Pick<BoundsRequest, "operation">) =>
  callBounds({ json: undefined, form: undefined, uploadBytes: 0, ...request });

function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("callBounds", () => {
  it("reads each vendor's output limit", () => {
    expect(bounds({ operation: "chat", json: { max_tokens: 10 } }).maxOutputTokens).toBe(10);
    expect(
      bounds({ operation: "chat", json: { max_completion_tokens: 20, max_tokens: 10 } }).maxOutputTokens,
    ).toBe(20);
    expect(bounds({ operation: "chat", json: { max_tokens: null } }).maxOutputTokens).toBeUndefined();
    expect(bounds({ operation: "responses", json: { max_output_tokens: 30 } }).maxOutputTokens).toBe(30);
    expect(bounds({ operation: "messages", json: { max_tokens: 40 } }).maxOutputTokens).toBe(40);
    expect(bounds({ operation: "complete", json: { max_tokens_to_sample: 50 } }).maxOutputTokens).toBe(50);
    expect(
      bounds({
        operation: "generate",
        json: { generationConfig: { maxOutputTokens: 60, candidateCount: 2 } },
      }),
    ).toMatchObject({ maxOutputTokens: 60, outputs: 2 });
    expect(bounds({ operation: "chat", json: { n: 3 } }).outputs).toBe(3);
    expect(bounds({ operation: "embeddings", json: { input: "x" } }).maxOutputTokens).toBe(0);
    expect(bounds({ operation: "cached_content", json: {} }).maxOutputTokens).toBe(0);
  });

  it("reads the units of endpoints billed otherwise", () => {
    expect(bounds({ operation: "image", json: { n: 2 } })).toMatchObject({ images: 2, outputs: 2 });
    expect(bounds({ operation: "image", form: new Map([["n", "4"]]) })).toMatchObject({ images: 4 });
    expect(bounds({ operation: "speech", json: { input: "héllo 👋" } }).speechCharacters).toBe(7);
    expect(bounds({ operation: "transcription", uploadBytes: 20_001 })).toMatchObject({
      audioSeconds: 11,
      inputTokens: 11 * 25,
    });
  });

  it.each([
    ["chat", { max_tokens: -1 }, "max_tokens"],
    ["chat", { max_tokens: 0 }, "max_tokens"],
    ["chat", { max_tokens: 10_000_001 }, "max_tokens"],
    ["chat", { max_tokens: 2.5 }, "max_tokens"],
    ["chat", { max_completion_tokens: "5" }, "max_completion_tokens"],
    ["chat", { n: 0 }, "n"],
    ["chat", { n: 1000 }, "n"],
    ["messages", { max_tokens: Number.POSITIVE_INFINITY }, "max_tokens"],
    ["generate", { generationConfig: { maxOutputTokens: -5 } }, "generationConfig.maxOutputTokens"],
  ] as const)("refuses %s %j with 400 naming %s", (operation, json, field) => {
    const err = refusal(() => bounds({ operation, json: json as Record<string, unknown> }));
    expect(err).toMatchObject({ status: 400, code: "invalid_field" });
    expect(err.message).toContain(`'${field}'`);
  });
});
