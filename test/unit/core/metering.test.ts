import { describe, expect, it } from "vitest";
import { activePriceCatalogue } from "../../../lambda/adapters/fs/price-catalogue";
import {
  abandonedStreamUsage,
  estimateInputTokens,
  holdMicros,
  imageVariant,
} from "../../../lambda/core/metering";
import type { ModelPrice } from "../../../lambda/core/pricing";
import { emptyUsage } from "../../../lambda/core/usage";

const prices = activePriceCatalogue({});
const at = new Date("2026-11-22T12:00:00Z");

function price(vendor: "openai" | "anthropic" | "gemini" | "groq", model: string): ModelPrice {
  const found = prices.priceFor(vendor, model, at);
  if (!found) throw new Error(`no price for ${vendor}/${model}`);
  return found;
}

describe("estimateInputTokens", () => {
  it("counts UTF-8 bytes of keys and strings at three a token, erring high", () => {
    expect(estimateInputTokens("abcdef")).toBe(2);
    expect(estimateInputTokens("abcdefg")).toBe(3);
    // Three bytes each in UTF-8: one token per character, as tokenizers spend on CJK.
    expect(estimateInputTokens("日本語")).toBe(3);
    expect(estimateInputTokens({ role: "user", content: "hello" })).toBe(2 + 2 + 3 + 2);
    expect(estimateInputTokens([1, true, null])).toBe(6);
  });

  it("holds inline media by size, with a floor, instead of as text", () => {
    const image = "A".repeat(64_000);
    expect(estimateInputTokens(image)).toBe(2_000);
    expect(estimateInputTokens(`data:image/png;base64,${"A".repeat(256_000)}`)).toBe(Math.ceil(256_022 / 64));
    // Long prose is text, not media.
    const prose = "word ".repeat(1000);
    expect(estimateInputTokens(prose)).toBe(Math.ceil(5000 / 3));
  });
});

describe("holdMicros", () => {
  // gpt-4o-mini: 0.15 input, 0.075 cached, 0.60 output USD per million tokens; output cap 16,384.
  const mini = price("openai", "gpt-4o-mini");

  it("holds the input at the dearest input rate and the output limit at the output rate", () => {
    const hold = holdMicros(mini, { inputTokens: 1000, maxOutputTokens: 500, outputs: 1 });
    expect(hold).toBe(Math.ceil((1000 * 150 + 500 * 600) / 1000));
  });

  it("falls back to the model's cap, caps a larger limit at it, and multiplies by the outputs", () => {
    const capped = Math.ceil((16_384 * 600) / 1000);
    expect(holdMicros(mini, { inputTokens: 0, maxOutputTokens: undefined, outputs: 1 })).toBe(capped);
    expect(holdMicros(mini, { inputTokens: 0, maxOutputTokens: 5_000_000, outputs: 1 })).toBe(capped);
    expect(holdMicros(mini, { inputTokens: 0, maxOutputTokens: 100, outputs: 3 })).toBe(
      Math.ceil((300 * 600) / 1000),
    );
  });

  it("holds per image, per audio second and per character", () => {
    // dall-e-3: the dearest variant, $0.12.
    expect(
      holdMicros(price("openai", "dall-e-3"), {
        inputTokens: 0,
        maxOutputTokens: undefined,
        outputs: 2,
        images: 2,
      }),
    ).toBe(240_000);
    // whisper-1: $0.006 a minute.
    expect(
      holdMicros(price("openai", "whisper-1"), {
        inputTokens: 0,
        maxOutputTokens: undefined,
        outputs: 1,
        audioSeconds: 60,
      }),
    ).toBe(6_000);
    // tts-1: $15 per million characters.
    expect(
      holdMicros(price("openai", "tts-1"), {
        inputTokens: 0,
        maxOutputTokens: undefined,
        outputs: 1,
        speechCharacters: 1000,
      }),
    ).toBe(15_000);
  });

  it("gives token-billed image models an output allowance per image", () => {
    // gpt-image-1: $40 per million output (image) tokens, no cap in the catalogue.
    const hold = holdMicros(price("openai", "gpt-image-1"), {
      inputTokens: 0,
      maxOutputTokens: undefined,
      outputs: 1,
      images: 1,
    });
    expect(hold).toBe(Math.ceil((8192 * 40_000) / 1000));
  });
});

describe("abandonedStreamUsage", () => {
  it("keeps what the vendor reported and estimates what it did not", () => {
    const observed = { ...emptyUsage(), complete: false };
    const usage = abandonedStreamUsage(observed, "x".repeat(400), "y".repeat(40));
    expect(usage).toMatchObject({ inputTokens: 100, outputTokens: 10, estimated: true, complete: false });
    const reported = { ...observed, inputTokens: 7, cachedInputTokens: 3, outputTokens: 50 };
    expect(abandonedStreamUsage(reported, "x".repeat(400), "y".repeat(40))).toMatchObject({
      inputTokens: 7,
      cachedInputTokens: 3,
      outputTokens: 50,
    });
  });
});

describe("imageVariant", () => {
  it("names the catalogue's variant for the quality and size asked, else the default quality", () => {
    const dalle3 = price("openai", "dall-e-3");
    expect(imageVariant(dalle3, "hd", "1024x1792")).toBe("hd/1024x1792");
    expect(imageVariant(dalle3, undefined, "1792x1024")).toBe("standard/1792x1024");
    expect(imageVariant(dalle3, undefined, undefined)).toBe("standard/1024x1024");
    expect(imageVariant(dalle3, "standard", "7x7")).toBeUndefined();
    expect(imageVariant(price("openai", "dall-e-2"), "hd", "512x512")).toBe("512x512");
    expect(imageVariant(price("openai", "gpt-4o-mini"), "hd", "512x512")).toBeUndefined();
  });
});
