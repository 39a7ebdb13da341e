import type { loadPriceCatalogue, ModelPrice } from "../../lambda/core/pricing";
import { emptyUsage, type Usage } from "../../lambda/core/usage";

/** A small catalogue of its own, so these cases do not move when the shipped prices do. */
export function testCatalogue() {
  return {
    version: "test-1",
    currency: "USD",
    sources: [{ vendor: "openai", url: "https://example.com/pricing", read_on: "2026-11-22" }],
    models: [
      {
        vendor: "openai",
        model: "chat-a",
        kind: "chat",
        aliases: ["chat-a-latest"],
        max_output_tokens: 16384,
        prices: [
          { effective_from: "2026-01-01", input: "0.15", cached_input: 0.075, output: 0.6 },
          { effective_from: "2026-06-01", input: 0.1, cached_input: 0.05, output: 0.4 },
        ],
      },
      {
        vendor: "openai",
        model: "thinker",
        kind: "chat",
        max_output_tokens: 100000,
        prices: [{ effective_from: "2026-01-01", input: 1, output: 4, reasoning: 8 }],
      },
      {
        vendor: "anthropic",
        model: "claude-x-1",
        kind: "chat",
        max_output_tokens: 64000,
        prices: [
          {
            effective_from: "2026-01-01",
            input: 3,
            cached_input: 0.3,
            cache_write: 3.75,
            output: 15,
            long_context: {
              above_input_tokens: 200000,
              input: 6,
              cached_input: 0.6,
              cache_write: 7.5,
              output: 22.5,
            },
          },
        ],
      },
      {
        vendor: "groq",
        model: "whisper-x",
        kind: "transcription",
        prices: [{ effective_from: "2026-01-01", audio: { per: "hour", usd: 0.111, minimum_seconds: 10 } }],
      },
    ],
  };
}

export const AT = new Date("2026-11-22T12:00:00Z");

export function usage(figures: Partial<Usage>): Usage {
  return { ...emptyUsage(), ...figures };
}

export function priced(
  catalogue: ReturnType<typeof loadPriceCatalogue>,
  vendor: "openai" | "anthropic" | "groq" | "gemini",
  model: string,
  at = AT,
): ModelPrice {
  const price = catalogue.priceFor(vendor, model, at);
  if (!price) throw new Error(`no price for ${vendor}/${model}`);
  return price;
}
