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
  /** Of `cacheWriteTokens`, those written with a 1-hour TTL (Anthropic); the rest are 5-minute writes. */
  cacheWrite1hTokens?: number;
  /** Of the uncached input, tokens of audio and of images, where the vendor reports them apart. */
  audioInputTokens?: number;
  imageInputTokens?: number;
  /** Of the visible output (output less reasoning), tokens of audio. */
  audioOutputTokens?: number;
  /** The service tier the vendor says served the call (`flex`, `priority`, `standard`...). */
  serviceTier?: string;
  /** Server-side tool calls the vendor ran and bills per call, by tool (`web_search`, `google_search`). */
  toolCalls?: Record<string, number>;
  /**
   * Usage fields the vendor reported that no dimension of ours reads, by their path in the vendor's
   * usage object: kept so a record shows them, and so they are logged instead of priced at zero.
   */
  unpriced?: Record<string, number>;
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

/**
 * The numeric fields of a vendor's usage object that `known` does not name, flattened to dotted paths
 * (`server_tool_use.code_execution_requests`); zeros and non-numbers are left out. A vendor that adds a
 * billed figure shows up here rather than vanishing.
 */
export function unknownUsageFields(raw: unknown, known: ReadonlySet<string>): Record<string, number> {
  const found: Record<string, number> = {};
  const walk = (value: unknown, path: string) => {
    if (typeof value === "number") {
      if (value > 0 && !known.has(path)) found[path] = value;
    } else if (typeof value === "object" && value !== null && !Array.isArray(value)) {
      for (const [key, child] of Object.entries(value)) walk(child, path ? `${path}.${key}` : key);
    }
  };
  walk(raw, "");
  return found;
}

/** `usage.unpriced` with more fields, leaving it absent while there are none. */
export function addUnpriced(usage: Usage, fields: Record<string, number>): void {
  if (Object.keys(fields).length === 0) return;
  usage.unpriced = { ...usage.unpriced, ...fields };
}
