import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { planPriceImport } from "../../../../lambda/adapters/fs/price-catalogue";
import { loadPriceCatalogue } from "../../../../lambda/core/pricing";
import { readLiteLlm } from "../../../../lambda/core/pricing/litellm";

const fixture = JSON.parse(
  readFileSync(new URL("../../../fixtures/litellm-prices.json", import.meta.url), "utf8"),
);
const base = JSON.parse(readFileSync(new URL("../../../../prices/catalogue.json", import.meta.url), "utf8"));
const DAY = "2026-11-27";

describe("reading LiteLLM's price list", () => {
  it("shifts per-token prices to USD per million exactly and maps our vendors and fields", () => {
    const { models, skipped } = readLiteLlm(fixture);
    expect(skipped).toBe(1); // the bedrock entry
    const haiku = models.find((m) => m.model === "claude-haiku-4-5");
    expect(haiku?.prices).toEqual({
      input: "1",
      output: "5",
      cache_write: "1.25",
      cache_write_1h: "2",
      cached_input: "0.1",
    });
    const flash = models.find((m) => m.model === "gemini-2.5-flash");
    expect(flash).toMatchObject({ vendor: "gemini", prices: { cached_input: "0.03", audio_input: "1" } });
    expect(models.find((m) => m.model === "gpt-4o")?.unmapped).toEqual(["search_context_cost_per_query"]);
  });

  it.each([
    [[1, 2], /\(file\): must be a JSON object/],
    [base, /Invalid LiteLLM price list: version: \(entry\): must be an object/],
    [{ "gpt-x": { input_cost_per_token: 1e-6 } }, /gpt-x: litellm_provider: must be a string/],
    [
      { "gpt-x": { litellm_provider: "openai", input_cost_per_token: "0.000001" } },
      /gpt-x: input_cost_per_token: must be a number/,
    ],
    [
      { "gpt-x": { litellm_provider: "openai", output_cost_per_token: -1e-6 } },
      /gpt-x: output_cost_per_token: must be a non-negative/,
    ],
    [
      { "gpt-x": { litellm_provider: "openai", input_cost_per_token: 1.23456789e-15 } },
      /gpt-x: input_cost_per_token: has more precision/,
    ],
  ])("refuses another format, naming the entry and field (%#)", (json, message) => {
    expect(() => readLiteLlm(json)).toThrow(message);
  });
});

describe("dmt prices import (the plan)", () => {
  const plan = planPriceImport(fixture, DAY, {});

  it("shows new models, changed prices and dimensions we lack", () => {
    expect(plan.comparison.newModels.map((m) => `${m.vendor}/${m.model}`)).toEqual([
      "openai/gpt-7-preview",
      "groq/new-model-x",
    ]);
    expect(plan.comparison.changed).toEqual([
      { vendor: "openai", model: "gpt-5", field: "output", ours: "10", theirs: "12" },
    ]);
    expect(plan.comparison.missing).toEqual([
      { vendor: "openai", model: "gpt-4o", field: "litellm:search_context_cost_per_query" },
      { vendor: "gemini", model: "gemini-2.5-flash", field: "audio_input", theirs: "1" },
    ]);
    expect(plan.leftOut).toEqual([
      { vendor: "groq", model: "new-model-x", why: "a chat model needs max_output_tokens" },
    ]);
  });

  it("builds an override that adds a dated row and the new model, and loads as the catalogue", () => {
    const catalogue = loadPriceCatalogue(base, plan.override);
    const at = new Date(`${DAY}T00:00:00Z`);
    const before = new Date("2026-11-26T12:00:00Z");
    expect(catalogue.priceFor("openai", "gpt-5", at)?.tokens.output).toBe(12_000_000_000n);
    // The old row stays: a past call's cost can still be recomputed.
    expect(catalogue.priceFor("openai", "gpt-5", before)?.tokens.output).toBe(10_000_000_000n);
    // The new row keeps what LiteLLM does not list (the tiers and tool fees of our row).
    expect(catalogue.priceFor("openai", "gpt-5", at)?.serviceTiers.has("priority")).toBe(true);
    expect(catalogue.priceFor("gemini", "gemini-2.5-flash", at)?.tokens.audioInput).toBe(1_000_000_000n);
    expect(catalogue.priceFor("openai", "gpt-7-preview", at)).toMatchObject({
      kind: "chat",
      maxOutputTokens: 65536,
    });
  });
});
