import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  costMicros,
  formatPriceTable,
  loadPriceCatalogue,
  type ModelPrice,
} from "../../../../lambda/core/pricing";
import { emptyUsage, type Usage } from "../../../../lambda/core/usage";
import { VENDOR_NAMES, type VendorName } from "../../../../lambda/core/vendor-names";

/** The shipped catalogue. Costs are checked at a fixed date: rows are only ever added, so they stay put. */
const shipped: unknown = JSON.parse(
  readFileSync(new URL("../../../../prices/catalogue.json", import.meta.url), "utf8"),
);
const catalogue = loadPriceCatalogue(shipped);
const AT = new Date("2026-11-22T00:00:00Z");

function priced(vendor: VendorName, model: string, at = AT): ModelPrice {
  const price = catalogue.priceFor(vendor, model, at);
  if (!price) throw new Error(`no price for ${vendor}/${model}`);
  return price;
}

const usage = (figures: Partial<Usage>): Usage => ({ ...emptyUsage(), ...figures });

describe("the shipped catalogue", () => {
  it("loads, with its version as the price version", () => {
    expect(catalogue.version).toBe("2026-11-26");
    expect(catalogue.priceVersion).toBe("2026-11-26");
  });

  it("prices the models the vendors' SDK examples use", () => {
    const models: [VendorName, string][] = [
      ["openai", "gpt-4o-mini"],
      ["openai", "gpt-4o"],
      ["openai", "gpt-4.1"],
      ["openai", "gpt-5"],
      ["openai", "gpt-5.5"],
      ["openai", "gpt-6-sol"],
      ["openai", "o4-mini"],
      ["openai", "text-embedding-3-small"],
      ["openai", "whisper-1"],
      ["openai", "tts-1"],
      ["openai", "gpt-image-1"],
      ["openai", "dall-e-3"],
      ["openai", "omni-moderation-latest"],
      ["anthropic", "claude-sonnet-4-20250514"],
      ["anthropic", "claude-sonnet-4-5-20250929"],
      ["anthropic", "claude-sonnet-4-6"],
      ["anthropic", "claude-opus-4-1-20250805"],
      ["anthropic", "claude-haiku-4-5-20251001"],
      ["anthropic", "claude-3-5-haiku-latest"],
      ["anthropic", "claude-sonnet-5-5"],
      ["gemini", "gemini-2.5-flash"],
      ["gemini", "models/gemini-2.5-pro"],
      ["gemini", "gemini-2.0-flash-001"],
      ["gemini", "gemini-3.8-flash"],
      ["gemini", "gemini-embedding-001"],
      ["groq", "llama-3.3-70b-versatile"],
      ["groq", "llama-3.1-8b-instant"],
      ["groq", "openai/gpt-oss-120b"],
      ["groq", "whisper-large-v3-turbo"],
    ];
    for (const [vendor, model] of models)
      expect(catalogue.priceFor(vendor, model, AT), `${vendor}/${model}`).toBeDefined();
  });

  it("gives every chat model an output cap for holds", () => {
    for (const vendor of VENDOR_NAMES) {
      const rows = catalogue.list({ vendor, at: AT });
      expect(rows.length, vendor).toBeGreaterThan(3);
      for (const row of rows.filter((r) => r.kind === "chat"))
        expect(row.maxOutputTokens, row.model).toBeGreaterThan(0);
    }
  });

  it("costs an OpenAI call with cached input exactly", () => {
    // gpt-4o-mini: 6000 uncached at 0.15 + 4000 cached at 0.075 + 2000 out at 0.60 (USD per M).
    const figures = usage({
      inputTokens: 10000,
      cachedInputTokens: 4000,
      outputTokens: 2000,
      reasoningTokens: 0,
    });
    expect(costMicros(figures, priced("openai", "gpt-4o-mini-2024-07-18"))).toBe(900 + 300 + 1200);
    // gpt-5-mini reasoning bills as output: 1000 at 0.25 + 5000 at 2.
    expect(
      costMicros(
        usage({ inputTokens: 1000, outputTokens: 5000, reasoningTokens: 4000 }),
        priced("openai", "gpt-5-mini"),
      ),
    ).toBe(10250);
  });

  it("costs an Anthropic call with cache reads and 5-minute cache writes exactly", () => {
    // claude-sonnet-4-5: 1000 at 3 + 20000 read at 0.30 + 5000 written at 3.75 + 800 out at 15.
    const figures = usage({
      inputTokens: 26000,
      cachedInputTokens: 20000,
      cacheWriteTokens: 5000,
      outputTokens: 800,
    });
    expect(costMicros(figures, priced("anthropic", "claude-sonnet-4-5-20250929"))).toBe(39750);
    // Haiku 5.5 moves to its long-prompt rates above 100k input: 100001 at 0.50 = 50000.5 -> 50001.
    const haiku = priced("anthropic", "claude-haiku-5-5");
    expect(costMicros(usage({ inputTokens: 100000 }), haiku)).toBe(10000);
    expect(costMicros(usage({ inputTokens: 100001 }), haiku)).toBe(50001);
  });

  it("costs a Gemini call with cached content and thoughts exactly, tiered above 200k", () => {
    // gemini-2.5-flash: 10000 at 0.30 + 2345 cached at 0.03 + 678 out (thoughts included) at 2.50.
    const figures = usage({
      inputTokens: 12345,
      cachedInputTokens: 2345,
      outputTokens: 678,
      reasoningTokens: 500,
    });
    expect(costMicros(figures, priced("gemini", "gemini-2.5-flash"))).toBe(4766); // 4765.35 rounded up
    // gemini-2.5-pro over 200k: 200000 at 2.50 + 100000 cached at 0.25 + 1000 out at 15.
    const long = usage({ inputTokens: 300000, cachedInputTokens: 100000, outputTokens: 1000 });
    expect(costMicros(long, priced("gemini", "gemini-2.5-pro"))).toBe(540000);
  });

  it("costs a Groq call exactly, and its transcription by the hour with a 10 s minimum", () => {
    expect(
      costMicros(usage({ inputTokens: 1000, outputTokens: 1000 }), priced("groq", "llama-3.3-70b-versatile")),
    ).toBe(1380);
    expect(costMicros(usage({ audioSeconds: 3.2 }), priced("groq", "whisper-large-v3"))).toBe(309);
  });

  it("costs non-token units exactly", () => {
    expect(costMicros(usage({ audioSeconds: 61.2 }), priced("openai", "whisper-1"))).toBe(6200);
    expect(costMicros(usage({ speechCharacters: 1234 }), priced("openai", "tts-1"))).toBe(18510);
    const dalle = priced("openai", "dall-e-3");
    expect(costMicros(usage({ images: 2 }), dalle, { imageVariant: "standard/1024x1024" })).toBe(80000);
    expect(costMicros(usage({ images: 2 }), dalle, { imageVariant: "hd/1024x1792" })).toBe(240000);
    // An unknown variant bills at the dearest.
    expect(costMicros(usage({ images: 2 }), dalle)).toBe(240000);
    expect(costMicros(usage({ images: 3 }), priced("gemini", "imagen-4.0-generate-001"))).toBe(120000);
    // Token-billed images: 50 prompt tokens at 5 + 4160 image tokens at 40.
    expect(
      costMicros(usage({ inputTokens: 50, outputTokens: 4160, images: 1 }), priced("openai", "gpt-image-1")),
    ).toBe(166650);
    expect(costMicros(usage({ inputTokens: 1_000_001 }), priced("openai", "text-embedding-3-small"))).toBe(
      20001,
    );
    expect(costMicros(usage({ inputTokens: 5000 }), priced("openai", "omni-moderation-latest"))).toBe(0);
  });

  it("keeps past and scheduled prices by date", () => {
    const sol = (day: string) => priced("openai", "gpt-5.6-sol", new Date(`${day}T00:00:00Z`)).tokens.input;
    expect(sol("2026-08-20")).toBe(5_000_000_000n);
    expect(sol("2026-08-21")).toBe(4_000_000_000n);
    expect(sol("2026-11-22")).toBe(5_000_000_000n);
    const sonnet = (day: string) =>
      priced("anthropic", "claude-sonnet-5-5", new Date(`${day}T00:00:00Z`)).tokens.cachedInput;
    expect(sonnet("2026-10-06")).toBe(200_000_000n);
    expect(sonnet("2026-10-07")).toBe(100_000_000n);
    const flash = usage({ inputTokens: 1_000_000 });
    expect(costMicros(flash, priced("gemini", "gemini-3.8-flash", new Date("2026-12-31T23:59:59Z")))).toBe(
      750000,
    );
    expect(costMicros(flash, priced("gemini", "gemini-3.8-flash", new Date("2027-01-01T00:00:00Z")))).toBe(
      1500000,
    );
  });

  it("makes each row's price once: calls under it share it, a dated snapshot too; another row is another", () => {
    const day = (d: string) => new Date(`${d}T12:00:00Z`);
    const first = catalogue.priceFor("openai", "gpt-5.6-sol", day("2026-08-21"));
    expect(catalogue.priceFor("openai", "gpt-5.6-sol", day("2026-09-30"))).toBe(first);
    expect(catalogue.priceFor("openai", "gpt-5.6-sol", day("2026-08-20"))).not.toBe(first);
    const snapshot = catalogue.priceFor("openai", "gpt-4o-2024-08-06", AT);
    expect(snapshot).toBe(catalogue.priceFor("openai", "gpt-4o", AT));
  });

  it("resolves snapshots without confusing neighbouring models", () => {
    expect(priced("openai", "gpt-4o-2024-08-06").model).toBe("gpt-4o");
    expect(priced("openai", "gpt-4o-2024-05-13").tokens.input).toBe(5_000_000_000n);
    expect(priced("anthropic", "claude-sonnet-4-20250514").model).toBe("claude-sonnet-4-0");
    expect(priced("groq", "moonshotai/kimi-k2-instruct").model).toBe("moonshotai/kimi-k2-instruct-0905");
    expect(catalogue.priceFor("openai", "gpt-4o-mini-tts", AT)).toBeUndefined();
    expect(catalogue.priceFor("groq", "gpt-4o", AT)).toBeUndefined();
  });

  it("lists the active rows as a table and as JSON", () => {
    const rows = catalogue.list({ vendor: "groq", at: AT });
    expect(rows.every((row) => row.vendor === "groq")).toBe(true);
    const table = formatPriceTable(rows);
    const lines = table.split("\n");
    expect(lines[0]).toMatch(
      /^VENDOR\s+MODEL\s+KIND\s+SINCE\s+INPUT\s+CACHED\s+CACHE-WRITE\s+OUTPUT\s+MAX-OUT\s+OTHER$/,
    );
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^groq\s+llama-3\.3-70b-versatile\s+chat\s+2025-01-01\s+0\.59\s+-\s+-\s+0\.79\s+32768$/,
      ),
    );
    expect(table).toContain("audio 0.111/hour (min 10 s)");
    const json = JSON.parse(JSON.stringify(catalogue.list({ at: AT }))) as {
      model: string;
      perImage?: unknown;
    }[];
    expect(json.find((row) => row.model === "dall-e-3")?.perImage).toMatchObject({ "hd/1024x1792": "0.12" });
    // Rows not yet in force are not listed.
    expect(
      catalogue.list({ vendor: "gemini", at: new Date("2026-10-06T00:00:00Z") }).map((r) => r.model),
    ).not.toContain("gemini-3.8-flash");
  });
});
