import { describe, expect, it } from "vitest";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { context, observeSse, usage } from "../../support/vendor-usage";

describe("Anthropic usage", () => {
  it("adds cache reads and writes to the input total and takes output from message_delta", () => {
    const { usage: got, message } = observeSse("anthropic", context("messages"), "anthropic-messages.sse");
    expect(got).toEqual(
      usage({ inputTokens: 2572, cachedInputTokens: 2000, cacheWriteTokens: 100, outputTokens: 89 }),
    );
    expect(message).toMatchObject({
      id: "msg_01XFDUDYJgAACzvnptvVoYEL",
      stop_reason: "tool_use",
      content: [
        { type: "text", text: "Okay, let me check the weather." },
        { type: "tool_use", name: "get_weather", input: { location: "San Francisco, CA" } },
      ],
    });
  });

  it("keeps message_start's figures when the stream is cut before message_delta", () => {
    const { usage: got } = observeSse("anthropic", context("messages"), "anthropic-messages.sse", 5);
    expect(got).toEqual(
      usage({
        inputTokens: 2572,
        cachedInputTokens: 2000,
        cacheWriteTokens: 100,
        outputTokens: 2,
        complete: false,
      }),
    );
  });

  it("lets message_delta supersede input figures it repeats", () => {
    const observer = VENDOR_DEFINITIONS.anthropic.usage.stream(context("messages"));
    observer.event(
      JSON.stringify({
        type: "message_start",
        message: { id: "m", usage: { input_tokens: 10, output_tokens: 1 } },
      }),
      "message_start",
    );
    observer.event(
      JSON.stringify({
        type: "message_delta",
        delta: { stop_reason: "end_turn" },
        usage: { input_tokens: 12, output_tokens: 30 },
      }),
      "message_delta",
    );
    expect(observer.result(true).usage).toEqual(usage({ inputTokens: 12, outputTokens: 30 }));
  });

  it("reads a message's usage and estimates the legacy completion API, which reports none", () => {
    const { fromResponse } = VENDOR_DEFINITIONS.anthropic.usage;
    expect(
      fromResponse(context("messages"), {
        usage: { input_tokens: 5, cache_read_input_tokens: 7, output_tokens: 9 },
      }),
    ).toEqual(usage({ inputTokens: 12, cachedInputTokens: 7, outputTokens: 9 }));
    expect(
      fromResponse(context("complete", { prompt: "\n\nHuman: Hi there\n\nAssistant:" }), {
        completion: " Hello! How can I help?",
      }),
    ).toEqual(usage({ inputTokens: 8, outputTokens: 6, estimated: true }));
    expect(fromResponse(context("count_tokens"), { input_tokens: 14 })).toEqual(usage({}));
  });
});
