import type { StreamUsageRequest, UsageInEvent } from "../../core/vendor-model";
import { asObject, parseJson } from "../json";

const INCLUDE_USAGE_MEMBER = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * The body with `stream_options.include_usage` set, or undefined when the client asked for usage itself
 * (or sent a `stream_options` the vendor will judge). When the client sent no `stream_options`, the
 * member is spliced in after the opening brace, so the rest of its bytes pass unchanged.
 */
export function withIncludeUsage(body: Uint8Array, json: Record<string, unknown>): Uint8Array | undefined {
  const options = json.stream_options;
  if (options === undefined) {
    const brace = body.indexOf(0x7b) + 1;
    return Buffer.concat([body.subarray(0, brace), INCLUDE_USAGE_MEMBER, body.subarray(brace)]);
  }
  const given = asObject(options);
  if (!given || given.include_usage === true) return undefined;
  return Buffer.from(JSON.stringify({ ...json, stream_options: { ...given, include_usage: true } }));
}

const EMPTY_CHOICES = /"choices"\s*:\s*\[\s*\]/;

/** The chunk `stream_options.include_usage` adds: usage and no choices. */
export function isUsageOnlyChunk(data: string): boolean {
  if (!EMPTY_CHOICES.test(data)) return false;
  return asObject(asObject(parseJson(data))?.usage) !== undefined;
}

const NULL_USAGE = /,\s*"usage"\s*:\s*null/g;

/**
 * With `include_usage`, every other chunk carries `"usage":null`; removed so the client sees the chunks it
 * would have seen without the option. (An unescaped `"usage"` cannot occur inside a JSON string.)
 */
export function withoutNullUsage(data: string): string {
  return data.includes('"usage"') ? data.replace(NULL_USAGE, "") : data;
}

/** OpenAI-style chat streams (OpenAI, Groq): usage asked for with `stream_options.include_usage`. */
export const includeUsage: StreamUsageRequest = {
  ask: withIncludeUsage,
  added: isUsageOnlyChunk,
  withoutAdded: withoutNullUsage,
};

/**
 * Where OpenAI-style streams report usage: a chat or completion chunk's `usage` (null but in the last
 * chunk), or the Responses API's final event's `response.usage`.
 */
export const openAiUsageInEvent: UsageInEvent = (event) =>
  asObject(event.usage) ?? asObject(asObject(event.response)?.usage);
