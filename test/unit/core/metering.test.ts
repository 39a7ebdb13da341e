import { describe, expect, it } from "vitest";
import { activePriceCatalogue } from "../../../lambda/adapters/fs/price-catalogue";
import { combineHooks, PendingWork, type ProxyCall, type ProxyHooks } from "../../../lambda/core/call";
import { ApiError } from "../../../lambda/core/errors";
import { silentLogger } from "../../../lambda/core/logger";
import {
  abandonedStreamUsage,
  estimateInputTokens,
  holdMicros,
  imageVariant,
} from "../../../lambda/core/metering";
import { CachedVendorKeys } from "../../../lambda/core/metering-vendor-keys";
import type { ModelPrice } from "../../../lambda/core/pricing";
import { emptyUsage } from "../../../lambda/core/usage";
import { type BoundsRequest, callBounds } from "../../../lambda/vendors/bounds";

const prices = activePriceCatalogue({});
const at = new Date("2026-11-22T12:00:00Z");

function price(vendor: "openai" | "anthropic" | "gemini" | "groq", model: string): ModelPrice {
  const found = prices.priceFor(vendor, model, at);
  if (!found) throw new Error(`no price for ${vendor}/${model}`);
  return found;
}

const bounds = (request: Partial<BoundsRequest> & Pick<BoundsRequest, "operation">) =>
  callBounds({ json: undefined, form: undefined, uploadBytes: 0, ...request });

function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
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

describe("callBounds", () => {
  it("reads each vendor's output limit", () => {
    expect(bounds({ operation: "chat", json: { max_tokens: 10 } }).maxOutputTokens).toBe(10);
    expect(
      bounds({ operation: "chat", json: { max_completion_tokens: 20, max_tokens: 10 } }).maxOutputTokens,
    ).toBe(20);
    expect(bounds({ operation: "chat", json: { max_tokens: null } }).maxOutputTokens).toBeUndefined();
    expect(bounds({ operation: "responses", json: { max_output_tokens: 30 } }).maxOutputTokens).toBe(30);
    expect(bounds({ operation: "messages", json: { max_tokens: 40 } }).maxOutputTokens).toBe(40);
    expect(bounds({ operation: "complete", json: { max_tokens_to_sample: 50 } }).maxOutputTokens).toBe(50);
    expect(
      bounds({
        operation: "generate",
        json: { generationConfig: { maxOutputTokens: 60, candidateCount: 2 } },
      }),
    ).toMatchObject({ maxOutputTokens: 60, outputs: 2 });
    expect(bounds({ operation: "chat", json: { n: 3 } }).outputs).toBe(3);
    expect(bounds({ operation: "embeddings", json: { input: "x" } }).maxOutputTokens).toBe(0);
    expect(bounds({ operation: "cached_content", json: {} }).maxOutputTokens).toBe(0);
  });

  it("reads the units of endpoints billed otherwise", () => {
    expect(bounds({ operation: "image", json: { n: 2 } })).toMatchObject({ images: 2, outputs: 2 });
    expect(bounds({ operation: "image", form: new Map([["n", "4"]]) })).toMatchObject({ images: 4 });
    expect(bounds({ operation: "speech", json: { input: "héllo 👋" } }).speechCharacters).toBe(7);
    expect(bounds({ operation: "transcription", uploadBytes: 20_001 })).toMatchObject({
      audioSeconds: 11,
      inputTokens: 11 * 25,
    });
  });

  it.each([
    ["chat", { max_tokens: -1 }, "max_tokens"],
    ["chat", { max_tokens: 0 }, "max_tokens"],
    ["chat", { max_tokens: 10_000_001 }, "max_tokens"],
    ["chat", { max_tokens: 2.5 }, "max_tokens"],
    ["chat", { max_completion_tokens: "5" }, "max_completion_tokens"],
    ["chat", { n: 0 }, "n"],
    ["chat", { n: 1000 }, "n"],
    ["messages", { max_tokens: Number.POSITIVE_INFINITY }, "max_tokens"],
    ["generate", { generationConfig: { maxOutputTokens: -5 } }, "generationConfig.maxOutputTokens"],
  ] as const)("refuses %s %j with 400 naming %s", (operation, json, field) => {
    const err = refusal(() => bounds({ operation, json: json as Record<string, unknown> }));
    expect(err).toMatchObject({ status: 400, code: "invalid_field" });
    expect(err.message).toContain(`'${field}'`);
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

describe("CachedVendorKeys", () => {
  function counting(answer: () => Promise<string | undefined>) {
    const reads: string[] = [];
    const store = {
      reveal: (projectId: string, vendor: string) => {
        reads.push(`${projectId}/${vendor}`);
        return answer();
      },
    };
    return { store, reads };
  }

  it("caches keys and their absence for the ttl, one read per key in flight", async () => {
    let now = 0;
    const { store, reads } = counting(async () => "sk-stored-key-0123456789");
    const cache = new CachedVendorKeys(store, 1000, 10, () => now);
    const [a, b] = await Promise.all([cache.lookup("p", "openai"), cache.lookup("p", "openai")]);
    expect([a, b]).toEqual(["sk-stored-key-0123456789", "sk-stored-key-0123456789"]);
    await cache.lookup("p", "gemini");
    expect(reads).toEqual(["p/openai", "p/gemini"]);
    now = 999;
    await cache.lookup("p", "openai");
    expect(reads).toHaveLength(2);
    now = 1000;
    await cache.lookup("p", "openai");
    expect(reads).toHaveLength(3);
  });

  it("does not cache a failed read", async () => {
    let fail = true;
    const { store, reads } = counting(async () => {
      if (fail) throw new Error("store down");
      return undefined;
    });
    const cache = new CachedVendorKeys(store, 60_000);
    await expect(cache.lookup("p", "groq")).rejects.toThrow("store down");
    fail = false;
    expect(await cache.lookup("p", "groq")).toBeUndefined();
    expect(reads).toHaveLength(2);
  });
});

describe("combineHooks", () => {
  const call = {} as ProxyCall;

  it("merges befores in order, stops at a replay, and runs every after even when one fails", async () => {
    const seen: string[] = [];
    const first: ProxyHooks = {
      async before() {
        seen.push("before 1");
        return { vendorKey: "sk-a", keepResponseBytes: 10 };
      },
      after() {
        seen.push("after 1");
        throw new Error("boom");
      },
    };
    const second: ProxyHooks = {
      async before() {
        seen.push("before 2");
        return { keepResponseBytes: 5 };
      },
      async after() {
        seen.push("after 2");
      },
    };
    const hooks = combineHooks([first, second], silentLogger);
    expect(await hooks.before?.(call)).toEqual({ vendorKey: "sk-a", keepResponseBytes: 10 });
    await hooks.after?.(call, {} as never);
    expect(seen).toEqual(["before 1", "before 2", "after 1", "after 2"]);

    const replay = { status: 200, headers: [], chunks: [] };
    const replaying = combineHooks([{ before: async () => ({ replay }) }, second], silentLogger);
    seen.length = 0;
    expect(await replaying.before?.(call)).toEqual({ replay });
    expect(seen).toEqual([]);
  });
});

describe("PendingWork", () => {
  it("drains work added while draining", async () => {
    const pending = new PendingWork();
    const done: string[] = [];
    let release: () => void = () => {};
    pending.add(
      new Promise<void>((resolve) => {
        release = resolve;
      }).then(() => {
        done.push("first");
        pending.add(Promise.resolve().then(() => void done.push("second")));
      }),
    );
    const drained = pending.drain().then(() => done.push("drained"));
    release();
    await drained;
    expect(done).toEqual(["first", "second", "drained"]);
  });
});
