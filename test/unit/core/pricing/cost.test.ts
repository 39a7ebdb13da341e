import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { costMicros, loadPriceCatalogue, maxCostMicros } from "../../../../lambda/core/pricing";
import { priced, testCatalogue, usage } from "../../../support/price-catalogue";

describe("costMicros", () => {
  const catalogue = loadPriceCatalogue(testCatalogue());

  it("bills uncached, cached, cache-write and output tokens at their own rates", () => {
    const price = priced(catalogue, "anthropic", "claude-x-1");
    // 1000 uncached at 3 + 20000 cached at 0.3 + 5000 written at 3.75 + 800 out at 15 (USD per M).
    const figures = usage({
      inputTokens: 26000,
      cachedInputTokens: 20000,
      cacheWriteTokens: 5000,
      outputTokens: 800,
    });
    expect(costMicros(figures, price)).toBe(3000 + 6000 + 18750 + 12000);
  });

  it("bills reasoning at its own rate when priced apart, and the rest of the output at the output rate", () => {
    const price = priced(catalogue, "openai", "thinker");
    const figures = usage({ inputTokens: 1000, outputTokens: 5000, reasoningTokens: 4000 });
    // 1000 at 1 + 1000 visible at 4 + 4000 reasoning at 8.
    expect(costMicros(figures, price)).toBe(1000 + 4000 + 32000);
  });

  it("bills reasoning at the output rate when not priced apart", () => {
    const price = priced(catalogue, "openai", "chat-a");
    const figures = usage({
      inputTokens: 10000,
      cachedInputTokens: 4000,
      outputTokens: 2000,
      reasoningTokens: 1500,
    });
    // 6000 at 0.10 + 4000 at 0.05 + 2000 at 0.40.
    expect(costMicros(figures, price)).toBe(600 + 200 + 800);
  });

  it("moves the whole request to the long-context rates only above the threshold", () => {
    const price = priced(catalogue, "anthropic", "claude-x-1");
    expect(costMicros(usage({ inputTokens: 200000, outputTokens: 1000 }), price)).toBe(600000 + 15000);
    expect(
      costMicros(usage({ inputTokens: 250000, cachedInputTokens: 50000, outputTokens: 1000 }), price),
    ).toBe(1_200_000 + 30000 + 22500);
  });

  it("bills audio in whole seconds, rounded up, with the per-request minimum", () => {
    const price = priced(catalogue, "groq", "whisper-x");
    // 10 s minimum at 0.111 USD/hour = 308.33 micro-USD, rounded up.
    expect(costMicros(usage({ audioSeconds: 3.2 }), price)).toBe(309);
    // 125.5 s -> 126 s = 0.003885 USD exactly.
    expect(costMicros(usage({ audioSeconds: 125.5 }), price)).toBe(3885);
    expect(costMicros(usage({ audioSeconds: 0 }), price)).toBe(0);
  });

  it("rounds once, up, to a whole micro-USD", () => {
    const price = priced(catalogue, "openai", "chat-a");
    expect(costMicros(usage({}), price)).toBe(0);
    // One token at 0.10 USD/M is 0.1 micro-USD.
    expect(costMicros(usage({ inputTokens: 1 }), price)).toBe(1);
    // 7 at 0.10 + 3 cached at 0.05 = 0.85 micro-USD: one rounding, not one per part.
    expect(costMicros(usage({ inputTokens: 10, cachedInputTokens: 3 }), price)).toBe(1);
  });

  it("stays exact where floating point would not", () => {
    const price = priced(catalogue, "openai", "chat-a", new Date("2026-02-01T00:00:00Z"));
    // 0.1 + 0.2 style sums: 3 × 0.15 USD/M over a billion tokens is exactly 450 USD.
    expect(costMicros(usage({ inputTokens: 3_000_000_000 }), price)).toBe(450_000_000);
  });

  it("rejects impossible usage", () => {
    const price = priced(catalogue, "openai", "chat-a");
    expect(() =>
      costMicros(usage({ inputTokens: 10, cachedInputTokens: 8, cacheWriteTokens: 3 }), price),
    ).toThrow(/exceed inputTokens/);
    expect(() => costMicros(usage({ outputTokens: 1, reasoningTokens: 2 }), price)).toThrow(
      /reasoningTokens/,
    );
    expect(() => costMicros(usage({ inputTokens: -1 }), price)).toThrow(
      /inputTokens must be a non-negative integer/,
    );
    expect(() => costMicros(usage({ outputTokens: 1.5 }), price)).toThrow(/outputTokens/);
    expect(() => costMicros(usage({ audioSeconds: Number.NaN }), price)).toThrow(/audioSeconds/);
  });
});

describe("markup", () => {
  it("multiplies the exact cost before the single rounding", () => {
    const plain = loadPriceCatalogue(testCatalogue());
    const marked = loadPriceCatalogue(testCatalogue(), undefined, 1.1);
    const figures = usage({ inputTokens: 10000, cachedInputTokens: 4000, outputTokens: 2000 });
    expect(costMicros(figures, priced(plain, "openai", "chat-a"))).toBe(1600);
    expect(costMicros(figures, priced(marked, "openai", "chat-a"))).toBe(1760);
    // 0.1 + 0.05×3 = 0.85 micro-USD × 1.1 = 0.935: still one micro-USD.
    expect(
      costMicros(usage({ inputTokens: 10, cachedInputTokens: 3 }), priced(marked, "openai", "chat-a")),
    ).toBe(1);
    // Rounding before the markup would give 2 here: ceil(0.85) × 1.1 = 1.1.
    // 3885 × 1.1 = 4273.5 micro-USD.
    expect(costMicros(usage({ audioSeconds: 125.5 }), priced(marked, "groq", "whisper-x"))).toBe(4274);
  });

  it("is left out of list-price costs", () => {
    const marked = loadPriceCatalogue(testCatalogue(), undefined, 1.1);
    const figures = usage({ inputTokens: 10000, outputTokens: 2000 });
    expect(costMicros(figures, priced(marked, "openai", "chat-a"), { applyMarkup: false })).toBe(1800);
  });

  it("comes from the override file unless set explicitly", () => {
    const override = { markup: 1.25 };
    const figures = usage({ inputTokens: 10000 });
    expect(
      costMicros(figures, priced(loadPriceCatalogue(testCatalogue(), override), "openai", "chat-a")),
    ).toBe(1250);
    expect(
      costMicros(figures, priced(loadPriceCatalogue(testCatalogue(), override, 2), "openai", "chat-a")),
    ).toBe(2000);
  });

  it.each([0, -1, 11, Number.NaN, Number.POSITIVE_INFINITY, 1.0000000001])(
    "rejects a markup of %s",
    (markup) => {
      expect(() => loadPriceCatalogue(testCatalogue(), undefined, markup)).toThrow(/Invalid price markup/);
    },
  );
});

describe("maxCostMicros", () => {
  const catalogue = loadPriceCatalogue(testCatalogue());

  it("holds every input token at the dearest input rate and falls back to the output cap", () => {
    const chat = priced(catalogue, "openai", "chat-a");
    // 1000 at 0.10 + 16384 at 0.40.
    expect(maxCostMicros(chat, 1000)).toBe(100 + 6554);
    const claude = priced(catalogue, "anthropic", "claude-x-1");
    // 1000 at the cache-write rate 3.75 + 1000 at 15.
    expect(maxCostMicros(claude, 1000, 1000)).toBe(3750 + 15000);
    // The estimate decides the tier.
    expect(maxCostMicros(claude, 300000, 0)).toBe(2_250_000);
    const thinker = priced(catalogue, "openai", "thinker");
    expect(maxCostMicros(thinker, 0, 1000)).toBe(8000);
  });

  it("holds audio by its expected duration", () => {
    expect(maxCostMicros(priced(catalogue, "groq", "whisper-x"), 0, undefined, { audioSeconds: 3600 })).toBe(
      111000,
    );
  });

  it("is never below the cost of a call that stays within the estimate and the output cap", () => {
    const prices = ["chat-a", "thinker"].map((model) => priced(catalogue, "openai", model));
    prices.push(priced(catalogue, "anthropic", "claude-x-1"));
    fc.assert(
      fc.property(
        fc.constantFrom(...prices),
        fc.integer({ min: 0, max: 199_999 }),
        fc.integer({ min: 0, max: 16384 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (price, input, output, cachedShare, writeShare, reasoningShare) => {
          const cached = Math.floor(input * cachedShare);
          const written = Math.floor((input - cached) * writeShare);
          const figures = usage({
            inputTokens: input,
            cachedInputTokens: cached,
            cacheWriteTokens: written,
            outputTokens: output,
            reasoningTokens: Math.floor(output * reasoningShare),
          });
          expect(costMicros(figures, price)).toBeLessThanOrEqual(maxCostMicros(price, input, output));
        },
      ),
    );
  });

  it("rejects impossible estimates", () => {
    const chat = priced(catalogue, "openai", "chat-a");
    expect(() => maxCostMicros(chat, -1)).toThrow(/estimatedInputTokens/);
    expect(() => maxCostMicros(chat, 1, 2.5)).toThrow(/maxOutputTokens/);
  });
});
