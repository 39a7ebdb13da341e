/**
 * The normalized usage of one vendor call, what metering prices and the warehouse stores.
 * Token counts are totals with subsets: `inputTokens` counts every input token, of which
 * `cachedInputTokens` were read from a prompt cache and `cacheWriteTokens` were written to one;
 * `outputTokens` counts every output token, of which `reasoningTokens` were reasoning/thinking.
 * (Anthropic reports cache reads and writes apart from `input_tokens`, and Gemini reports thoughts
 * apart from candidates: vendor extractors add them in, so the totals mean the same everywhere.)
 */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cachedInputTokens: number;
  cacheWriteTokens: number;
  reasoningTokens: number;
  /** Non-token units, for endpoints billed otherwise. */
  images?: number;
  audioSeconds?: number;
  speechCharacters?: number;
  /** Some figure was observed or estimated by us rather than reported by the vendor. */
  estimated: boolean;
  /** False when the response ended early (client gone, upstream reset): the figures seen so far. */
  complete: boolean;
}

export function emptyUsage(): Usage {
  return {
    inputTokens: 0,
    outputTokens: 0,
    cachedInputTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0,
    estimated: false,
    complete: true,
  };
}
