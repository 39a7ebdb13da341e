import { describe, expect, it } from "vitest";
import { context, observeSse, usage } from "../../support/vendor-usage";

describe("Groq usage", () => {
  it("reads x_groq.usage from the last chunk", () => {
    const { usage: got, message } = observeSse("groq", context("chat"), "groq-chat.sse");
    expect(got).toEqual(usage({ inputTokens: 18, outputTokens: 3 }));
    expect((message as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe(
      "Fast inference.",
    );
  });
});
