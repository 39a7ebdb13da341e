import { describe, expect, it } from "vitest";
import { VENDOR_DEFINITIONS } from "../../../lambda/vendors";
import { includeUsage, isUsageOnlyChunk, withoutNullUsage } from "../../../lambda/vendors/openai";
import { parseSseEvent, SseReader } from "../../../lambda/vendors/sse";
import { context, fixture, observeSse, usage } from "../../support/vendor-usage";

describe("OpenAI usage", () => {
  it("reads a chat stream's usage chunk and assembles the message", () => {
    const { usage: got, message } = observeSse("openai", context("chat"), "openai-chat.sse");
    expect(got).toEqual(usage({ inputTokens: 19, outputTokens: 4, cachedInputTokens: 8 }));
    expect(message).toEqual({
      id: "chatcmpl-AB1cDeF",
      created: 1732000000,
      model: "gpt-4o-mini-2024-07-18",
      system_fingerprint: "fp_0ba0d124f1",
      object: "chat.completion",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: 'Hello, wörld ✓ ,"usage":null!' },
          finish_reason: "stop",
        },
      ],
    });
  });

  it("marks a cut chat stream incomplete, with the text so far and no usage reported", () => {
    const { usage: got, message } = observeSse("openai", context("chat"), "openai-chat.sse", 2);
    expect(got).toEqual(usage({ estimated: true, complete: false }));
    expect((message as { choices: { message: { content: string } }[] }).choices[0]?.message.content).toBe(
      "Hello",
    );
  });

  it("assembles tool calls from their fragments", () => {
    const observer = VENDOR_DEFINITIONS.openai.usage.stream(context("chat"));
    const chunks = [
      {
        choices: [
          {
            index: 0,
            delta: {
              role: "assistant",
              tool_calls: [
                {
                  index: 0,
                  id: "call_1",
                  type: "function",
                  function: { name: "get_weather", arguments: "" },
                },
              ],
            },
          },
        ],
      },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] } }] },
      { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
    ];
    for (const chunk of chunks) observer.event(JSON.stringify(chunk), undefined);
    const { message } = observer.result(true);
    expect((message as { choices: unknown[] }).choices).toEqual([
      {
        index: 0,
        message: {
          role: "assistant",
          content: "",
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Paris"}' },
            },
          ],
        },
        finish_reason: "tool_calls",
      },
    ]);
  });

  it("reads the responses stream's response.completed, reasoning and cached tokens included", () => {
    const { usage: got, message } = observeSse("openai", context("responses"), "openai-responses.sse");
    expect(got).toEqual(
      usage({ inputTokens: 37, cachedInputTokens: 5, outputTokens: 11, reasoningTokens: 4 }),
    );
    expect((message as { status: string; id: string }).status).toBe("completed");
    const cut = observeSse("openai", context("responses"), "openai-responses.sse", 5);
    expect(cut.usage.complete).toBe(false);
    expect((cut.message as { output_text: string }).output_text).toBe("Hi there!");
  });

  it("reads non-streamed usage for chat, embeddings, transcriptions, images and speech", () => {
    const { fromResponse } = VENDOR_DEFINITIONS.openai.usage;
    expect(
      fromResponse(context("chat"), {
        usage: {
          prompt_tokens: 100,
          completion_tokens: 50,
          prompt_tokens_details: { cached_tokens: 64 },
          completion_tokens_details: { reasoning_tokens: 20 },
        },
      }),
    ).toEqual(usage({ inputTokens: 100, outputTokens: 50, cachedInputTokens: 64, reasoningTokens: 20 }));
    expect(fromResponse(context("embeddings"), { usage: { prompt_tokens: 8, total_tokens: 8 } })).toEqual(
      usage({ inputTokens: 8 }),
    );
    expect(
      fromResponse(context("transcription"), { text: "hi", usage: { type: "duration", seconds: 7 } }),
    ).toEqual(usage({ audioSeconds: 7 }));
    expect(fromResponse(context("transcription"), { text: "hi", duration: 3.5 })).toEqual(
      usage({ audioSeconds: 3.5 }),
    );
    expect(fromResponse(context("transcription"), undefined)).toEqual(usage({ estimated: true }));
    expect(
      fromResponse(context("image"), {
        data: [{ b64_json: "x" }, { b64_json: "y" }],
        usage: { input_tokens: 10, output_tokens: 4160 },
      }),
    ).toEqual(usage({ inputTokens: 10, outputTokens: 4160, images: 2 }));
    expect(fromResponse(context("speech", { input: "héllo ✓" }), undefined)).toEqual(
      usage({ speechCharacters: 7, estimated: true }),
    );
    expect(fromResponse(context("models"), { data: [] })).toEqual(usage({}));
  });

  it("asks for a stream's usage by splicing include_usage in, leaving the client's bytes as sent", () => {
    const ask = (text: string) => {
      const asked = includeUsage.ask(Buffer.from(text), JSON.parse(text));
      return asked && Buffer.from(asked).toString();
    };
    expect(ask('{ "model":"m",\n"stream":true}')).toBe(
      '{"stream_options":{"include_usage":true}, "model":"m",\n"stream":true}',
    );
    // The client's own options are kept, with include_usage added.
    expect(JSON.parse(ask('{"stream":true,"stream_options":{"include_usage":false,"x":1}}') ?? "")).toEqual({
      stream: true,
      stream_options: { include_usage: true, x: 1 },
    });
    // Asked by the client itself, or options the vendor must judge: nothing to ask, nothing to hide.
    expect(ask('{"stream":true,"stream_options":{"include_usage":true}}')).toBeUndefined();
    expect(ask('{"stream":true,"stream_options":"yes"}')).toBeUndefined();
  });

  it("recognises the usage-only chunk and removes the null usage of the others", () => {
    const events = new SseReader()
      .blocks(fixture("openai-chat.sse"))
      .map((block) => parseSseEvent(block)?.data ?? "");
    expect(events.map(isUsageOnlyChunk)).toEqual([false, false, false, false, false, true, false]);
    expect(withoutNullUsage('{"choices":[{"delta":{"content":",\\"usage\\":null"}}],"usage":null}')).toBe(
      '{"choices":[{"delta":{"content":",\\"usage\\":null"}}]}',
    );
  });
});
