import { type ModelPrice, maxCostMicros } from "./pricing";
import { estimateTokens } from "./token-estimate";
import type { Usage } from "./usage";

/**
 * Pure pieces of metering: what a call may cost at most (its credit hold), and what a call that ended
 * early is charged. The protocol around them is in metering/hooks.ts and docs/metering.md.
 */

/** What bounds the cost of one call, read from its request before it is forwarded. */
export interface CallBounds {
  /** Input tokens, estimated from the request (see estimateInputTokens). */
  inputTokens: number;
  /** The output limit the request set, per output; undefined: as many as the model allows. */
  maxOutputTokens: number | undefined;
  /** How many outputs the limit applies to: choices (`n`, `candidateCount`) or images. */
  outputs: number;
  images?: number;
  audioSeconds?: number;
  speechCharacters?: number;
}

/** UTF-8 bytes per token a hold assumes: fewer than tokenizers average on any script, so it errs high. */
const HOLD_BYTES_PER_TOKEN = 3;
/**
 * An inline base64 blob or data URL (image, document, audio) is held at one token per this many bytes
 * of its text, and at least MEDIA_MIN_TOKENS: above the vendors' per-image figures (~1,600 at most).
 */
const MEDIA_BYTES_PER_TOKEN = 64;
const MEDIA_MIN_TOKENS = 2_000;
const MEDIA_MIN_LENGTH = 1024;
const BASE64_TEXT = /^[A-Za-z0-9+/=\r\n]+$/;
/** Output tokens a token-billed image model may spend per image when its catalogue entry sets no cap. */
const IMAGE_OUTPUT_TOKENS = 8_192;

const utf8 = new TextEncoder();

/**
 * A bound of the input tokens of a JSON request: every key and string counted, media as blobs. Walked
 * with a stack of its own: a body nested deeper than the call stack is sized, not a crash.
 */
export function estimateInputTokens(value: unknown): number {
  let sum = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === "string") sum += stringTokens(item);
    else if (Array.isArray(item)) for (const element of item) pending.push(element);
    else if (typeof item === "object" && item !== null) {
      for (const [key, element] of Object.entries(item)) {
        sum += stringTokens(key);
        pending.push(element);
      }
    }
    // Numbers, booleans and null: a token or two each.
    else if (item !== undefined) sum += 2;
  }
  return sum;
}

function stringTokens(text: string): number {
  if (text.length >= MEDIA_MIN_LENGTH && (text.startsWith("data:") || BASE64_TEXT.test(text))) {
    return Math.max(MEDIA_MIN_TOKENS, Math.ceil(text.length / MEDIA_BYTES_PER_TOKEN));
  }
  // ASCII needs no encoding to be counted.
  const bytes = isAscii(text) ? text.length : utf8.encode(text).byteLength;
  return Math.ceil(bytes / HOLD_BYTES_PER_TOKEN);
}

function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

/**
 * The credit hold for a call: its most expensive outcome at this price. The output limit is capped at
 * the model's own (the vendor refuses more), and falls back to it when the request set none.
 */
export function holdMicros(price: ModelPrice, bounds: CallBounds): number {
  const cap = price.maxOutputTokens ?? (price.kind === "image" ? IMAGE_OUTPUT_TOKENS : undefined);
  const requested = bounds.maxOutputTokens;
  const perOutput =
    requested === undefined ? (cap ?? 0) : cap === undefined ? requested : Math.min(requested, cap);
  return maxCostMicros(price, bounds.inputTokens, perOutput * bounds.outputs, {
    ...(bounds.images !== undefined ? { images: bounds.images } : {}),
    ...(bounds.audioSeconds !== undefined ? { audioSeconds: bounds.audioSeconds } : {}),
    ...(bounds.speechCharacters !== undefined ? { speechCharacters: bounds.speechCharacters } : {}),
  });
}

/**
 * What to charge for a stream the client abandoned, which the vendor produced in part: its figures
 * where it reported any, else estimates (four characters a token) of the request's text and of the
 * text the client received (content and tool-call arguments, not the JSON around them). OpenAI-style
 * streams report usage only at their end, so leaving early is not free.
 */
export function abandonedStreamUsage(observed: Usage, request: unknown, deliveredText: string): Usage {
  const inputTokens = observed.inputTokens > 0 ? observed.inputTokens : estimateTokens(textOf(request));
  const outputTokens = Math.max(observed.outputTokens, estimateTokens(deliveredText));
  return {
    ...observed,
    inputTokens,
    outputTokens,
    // Estimated totals keep the vendor's subsets only where they still fit inside them.
    cachedInputTokens: Math.min(observed.cachedInputTokens, inputTokens),
    cacheWriteTokens: Math.min(
      observed.cacheWriteTokens,
      inputTokens - Math.min(observed.cachedInputTokens, inputTokens),
    ),
    reasoningTokens: Math.min(observed.reasoningTokens, outputTokens),
    estimated: true,
  };
}

/** The strings of a JSON request (messages, prompts, tool definitions' text), without keys or syntax. */
function textOf(value: unknown): string {
  const parts: string[] = [];
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === "string") parts.push(item);
    else if (typeof item === "object" && item !== null) pending.push(...Object.values(item));
  }
  return parts.join("");
}

/**
 * The per-image price variant a request asked for (`hd/1024x1792`, `512x512`): its quality and size as
 * the catalogue names them, or the default quality (`standard`) at that size; undefined prices the
 * dearest variant.
 */
export function imageVariant(
  price: ModelPrice,
  quality: string | undefined,
  size: string | undefined,
): string | undefined {
  const variants = price.perImage;
  if (!variants) return undefined;
  const at = size ?? "1024x1024";
  const candidates = [quality === undefined ? undefined : `${quality}/${at}`, at, `standard/${at}`];
  return candidates.find((candidate) => candidate !== undefined && variants.has(candidate));
}
