import { describe, expect, it } from "vitest";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { JsonArrayReader } from "../../../lambda/vendors/json-array";
import { context, fixture, observeSse, usage } from "../../support/vendor-usage";

describe("Gemini usage", () => {
  const expected = usage({ inputTokens: 12, cachedInputTokens: 4, outputTokens: 47, reasoningTokens: 40 });

  it("takes the last usageMetadata of an SSE stream and merges the text parts", () => {
    const { usage: got, message } = observeSse("gemini", context("generate"), "gemini-stream.sse");
    expect(got).toEqual(expected);
    expect(message).toMatchObject({
      candidates: [
        {
          content: { role: "model", parts: [{ text: 'The  quick {brown} "fox" \\jumps.' }] },
          finishReason: "STOP",
          index: 0,
        },
      ],
      modelVersion: "gemini-2.5-flash",
    });
  });

  it("reads the same figures from the JSON-array stream", () => {
    const observer = VENDOR_DEFINITIONS.gemini.usage.stream(context("generate"));
    for (const element of new JsonArrayReader().elements(fixture("gemini-stream.json")))
      observer.event(element, undefined);
    expect(observer.result(true).usage).toEqual(expected);
  });

  it("reads generateContent, estimates embeddings and counts a cache write", () => {
    const { fromResponse } = VENDOR_DEFINITIONS.gemini.usage;
    expect(
      fromResponse(context("generate"), {
        usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 5, toolUsePromptTokenCount: 2 },
      }),
    ).toEqual(usage({ inputTokens: 5, outputTokens: 5 }));
    expect(
      fromResponse(context("embed", { content: { parts: [{ text: "twelve chars" }] } }), {
        embedding: { values: [0.1] },
      }),
    ).toEqual(usage({ inputTokens: 3, estimated: true }));
    const batch = {
      requests: [{ content: { parts: [{ text: "abcd" }] } }, { content: { parts: [{ text: "efgh" }] } }],
    };
    expect(fromResponse(context("embed", batch), { embeddings: [] })).toEqual(
      usage({ inputTokens: 2, estimated: true }),
    );
    expect(
      fromResponse(context("cached_content"), {
        name: "cachedContents/x",
        usageMetadata: { totalTokenCount: 4096 },
      }),
    ).toEqual(usage({ inputTokens: 4096, cacheWriteTokens: 4096 }));
  });
});
