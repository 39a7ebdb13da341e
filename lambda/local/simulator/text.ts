/**
 * Deterministic content and token figures for the simulator: the same input always gives the same
 * answer, so tests (and the proxy's usage extraction) can predict what a vendor would report.
 */

/** Prompt tokens: a quarter of the characters, rounded up, per text part. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

export function sumTokens(parts: readonly string[]): number {
  let total = 0;
  for (const part of parts) total += estimateTokens(part);
  return total;
}

/** Bounds of a reply when nothing limits it: the seed's words, cycled to at least 8 and at most 64. */
export const MIN_REPLY_WORDS = 8;
export const MAX_REPLY_WORDS = 64;
/** Reasoning tokens a reasoning model spends before answering (at most half of a token limit). */
export const REASONING_TOKENS = 16;

export interface Generation {
  /** The reply split as it is streamed: one word per piece, a leading space on every piece but the first. */
  pieces: string[];
  text: string;
  /** One token per word. */
  textTokens: number;
  reasoningTokens: number;
  /** The output limit cut the reply short. */
  truncated: boolean;
}

/**
 * The reply to `seed` (the last user text): its words echoed, cycled to the natural length, cut to
 * `limit` output tokens (which, as at the vendors, also pays for the reasoning tokens).
 */
export function generate(seed: string, limit: number | undefined, reasoning: number): Generation {
  const source = seed.split(/\s+/).filter((word) => word !== "");
  if (source.length === 0) source.push("simulated");
  const natural = Math.min(MAX_REPLY_WORDS, Math.max(MIN_REPLY_WORDS, source.length));
  const reasoningTokens = limit === undefined ? reasoning : Math.min(reasoning, Math.floor(limit / 2));
  const wordCount = limit === undefined ? natural : Math.min(natural, limit - reasoningTokens);
  const pieces: string[] = [];
  for (let i = 0; i < wordCount; i++) {
    const word = source[i % source.length] as string;
    pieces.push(i === 0 ? word : ` ${word}`);
  }
  return {
    pieces,
    text: pieces.join(""),
    textTokens: wordCount,
    reasoningTokens,
    truncated: wordCount < natural,
  };
}

/** A unit vector derived from the text (FNV-1a seed, xorshift stream), the same for the same text. */
export function embeddingVector(text: string, dimensions: number): number[] {
  let seed = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    seed ^= text.charCodeAt(i);
    seed = Math.imul(seed, 0x01000193);
  }
  seed ||= 1;
  const values = new Array<number>(dimensions);
  let norm = 0;
  for (let i = 0; i < dimensions; i++) {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    const value = (seed >>> 0) / 0xffffffff - 0.5;
    values[i] = value;
    norm += value * value;
  }
  const scale = norm === 0 ? 0 : 1 / Math.sqrt(norm);
  // Rounded to float32 so that base64 and float answers carry the same numbers.
  for (let i = 0; i < dimensions; i++) values[i] = Math.fround((values[i] as number) * scale);
  return values;
}

export function float32Base64(values: readonly number[]): string {
  return Buffer.from(new Float32Array(values).buffer).toString("base64");
}

/** The text of a content value in any vendor's shape: a string, or parts/blocks carrying `text`. */
export function textsOf(content: unknown): string[] {
  if (typeof content === "string") return [content];
  if (Array.isArray(content)) return content.flatMap(textsOf);
  if (content && typeof content === "object") {
    const record = content as Record<string, unknown>;
    if (typeof record.text === "string") return [record.text];
    if (record.content !== undefined) return textsOf(record.content);
    if (record.parts !== undefined) return textsOf(record.parts);
  }
  return [];
}
