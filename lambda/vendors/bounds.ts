import { errors } from "../core/errors";
import { type CallBounds, estimateInputTokens } from "../core/metering";
import type { Operation } from "../core/vendor-model";
import { asObject } from "./json";

/**
 * What bounds a call's cost, read from its request the way each vendor spells it: the output limit
 * (`max_completion_tokens` / `max_tokens` for OpenAI-style chat, `max_output_tokens` for responses,
 * `max_tokens` for Anthropic messages, `max_tokens_to_sample` for its legacy completions,
 * `generationConfig.maxOutputTokens` for Gemini), how many outputs it applies to, and the units of
 * endpoints billed otherwise. Values a vendor could never accept are refused here (400), since they
 * cannot size a hold; the vendor judges everything else.
 */

/** No model writes more than this in one call: a larger limit is a mistake, not a request. */
export const MAX_OUTPUT_LIMIT = 10_000_000;
const MAX_OUTPUTS = 128;
/** An upload is held as audio at 16 kbit/s, below any common codec's rate: the longest it can last. */
const UPLOAD_BYTES_PER_SECOND = 2_000;
/** Audio tokens a second of speech costs at most for token-billed transcription (about 10 at OpenAI). */
const AUDIO_TOKENS_PER_SECOND = 25;

export interface BoundsRequest {
  operation: Operation;
  json: Record<string, unknown> | undefined;
  /** An upload's text fields (`n`, `size`...). */
  form: Map<string, string> | undefined;
  /** Size of an upload's body. */
  uploadBytes: number;
}

export function callBounds(request: BoundsRequest): CallBounds {
  const { json, form } = request;
  const inputTokens = json === undefined ? 0 : estimateInputTokens(json);
  const outputs = (name: string, value: unknown) =>
    value === undefined || value === null ? 1 : wholeNumber(name, value, MAX_OUTPUTS);
  switch (request.operation) {
    case "chat":
    case "completions":
      return {
        inputTokens,
        maxOutputTokens: firstLimit(json, ["max_completion_tokens", "max_tokens"]),
        outputs: outputs("n", json?.n),
      };
    case "responses":
      return { inputTokens, maxOutputTokens: firstLimit(json, ["max_output_tokens"]), outputs: 1 };
    case "messages":
      return { inputTokens, maxOutputTokens: firstLimit(json, ["max_tokens"]), outputs: 1 };
    case "complete":
      return { inputTokens, maxOutputTokens: firstLimit(json, ["max_tokens_to_sample"]), outputs: 1 };
    case "generate": {
      const config = asObject(json?.generationConfig);
      return {
        inputTokens,
        maxOutputTokens: limit("generationConfig.maxOutputTokens", config?.maxOutputTokens),
        outputs: outputs("generationConfig.candidateCount", config?.candidateCount),
      };
    }
    case "image": {
      const count = outputs("n", json?.n ?? numericField(form, "n"));
      return { inputTokens, maxOutputTokens: undefined, outputs: count, images: count };
    }
    case "speech":
      return {
        inputTokens,
        maxOutputTokens: undefined,
        outputs: 1,
        speechCharacters: typeof json?.input === "string" ? [...json.input].length : 0,
      };
    case "transcription":
    case "translation": {
      const audioSeconds = Math.ceil(request.uploadBytes / UPLOAD_BYTES_PER_SECOND);
      return {
        inputTokens: audioSeconds * AUDIO_TOKENS_PER_SECOND,
        maxOutputTokens: undefined,
        outputs: 1,
        audioSeconds,
      };
    }
    // Embeddings and cache creation bill their input alone.
    default:
      return { inputTokens, maxOutputTokens: 0, outputs: 1 };
  }
}

/** The first of `names` the body sets (they are one limit under several spellings). */
function firstLimit(json: Record<string, unknown> | undefined, names: string[]): number | undefined {
  for (const name of names) {
    const value = json?.[name];
    if (value !== undefined && value !== null) return limit(name, value);
  }
  return undefined;
}

function limit(name: string, value: unknown): number | undefined {
  return value === undefined || value === null ? undefined : wholeNumber(name, value, MAX_OUTPUT_LIMIT);
}

function wholeNumber(name: string, value: unknown, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) {
    throw errors.invalidField(name, `must be a whole number from 1 to ${max}`);
  }
  return value;
}

/** A number typed into a form field (`n=2`); anything else is left for the vendor to refuse. */
function numericField(form: Map<string, string> | undefined, name: string): number | undefined {
  const text = form?.get(name);
  return text !== undefined && /^\d{1,6}$/.test(text) ? Number(text) : undefined;
}
