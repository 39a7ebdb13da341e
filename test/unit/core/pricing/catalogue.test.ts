import { describe, expect, it } from "vitest";
import { costMicros, loadPriceCatalogue } from "../../../../lambda/core/pricing";
import { AT, priced, testCatalogue, usage } from "../../../support/price-catalogue";

describe("priceFor", () => {
  const catalogue = loadPriceCatalogue(testCatalogue());

  it("takes the row in force at the given moment, from 00:00 UTC of its date", () => {
    expect(catalogue.priceFor("openai", "chat-a", new Date("2025-12-31T23:59:59Z"))).toBeUndefined();
    expect(priced(catalogue, "openai", "chat-a", new Date("2026-01-01T00:00:00Z")).tokens.input).toBe(
      150_000_000n,
    );
    expect(priced(catalogue, "openai", "chat-a", new Date("2026-05-31T23:59:59Z")).effectiveFrom).toBe(
      "2026-01-01",
    );
    expect(priced(catalogue, "openai", "chat-a", new Date("2026-06-01T00:00:00Z")).effectiveFrom).toBe(
      "2026-06-01",
    );
  });

  it("resolves aliases, dated snapshots and Gemini model paths, and nothing looser", () => {
    expect(priced(catalogue, "openai", "chat-a-latest").model).toBe("chat-a");
    expect(priced(catalogue, "openai", "chat-a-2026-03-01").model).toBe("chat-a");
    expect(priced(catalogue, "openai", "chat-a-0125").model).toBe("chat-a");
    expect(priced(catalogue, "anthropic", "claude-x-1-20260115").model).toBe("claude-x-1");
    expect(priced(catalogue, "openai", "models/chat-a").model).toBe("chat-a");
    expect(catalogue.priceFor("openai", "chat-a-tts", AT)).toBeUndefined();
    expect(catalogue.priceFor("openai", "chat", AT)).toBeUndefined();
    expect(catalogue.priceFor("groq", "chat-a", AT)).toBeUndefined();
  });

  it("fills the defaults of absent fields", () => {
    const price = priced(catalogue, "openai", "thinker");
    expect(price.tokens).toEqual({
      input: 1_000_000_000n,
      output: 4_000_000_000n,
      cachedInput: 1_000_000_000n,
      cacheWrite: 1_000_000_000n,
      reasoning: 8_000_000_000n,
    });
  });
});

describe("loadPriceCatalogue", () => {
  function withModel(change: (model: Record<string, unknown>) => void) {
    const catalogue = testCatalogue();
    change(catalogue.models[0] as unknown as Record<string, unknown>);
    return catalogue;
  }
  const firstRow = (model: Record<string, unknown>) =>
    (model.prices as Record<string, unknown>[])[0] as Record<string, unknown>;

  it("fails naming the model and the missing field", () => {
    const bad = withModel((model) => {
      delete firstRow(model).output;
    });
    expect(() => loadPriceCatalogue(bad)).toThrow(
      "Invalid price catalogue: openai/chat-a: prices[0].output: required for a chat model",
    );
    const noCap = withModel((model) => {
      delete model.max_output_tokens;
    });
    expect(() => loadPriceCatalogue(noCap)).toThrow(
      "openai/chat-a: max_output_tokens: required for a chat model",
    );
    const noKind = withModel((model) => {
      delete model.kind;
    });
    expect(() => loadPriceCatalogue(noKind)).toThrow(/openai\/chat-a: kind: /);
  });

  it("rejects negative, absurd and malformed amounts", () => {
    const negative = withModel((model) => {
      firstRow(model).input = -0.15;
    });
    expect(() => loadPriceCatalogue(negative)).toThrow(
      /openai\/chat-a: prices\[0\]\.input: must be a non-negative USD amount/,
    );
    const absurd = withModel((model) => {
      firstRow(model).output = 60000;
    });
    expect(() => loadPriceCatalogue(absurd)).toThrow(/prices\[0\]\.output: is over 10000 USD/);
    for (const amount of ["1,5", "0.0000000001", "", "1e-3", true]) {
      const malformed = withModel((model) => {
        firstRow(model).input = amount;
      });
      expect(() => loadPriceCatalogue(malformed)).toThrow(/prices\[0\]\.input/);
    }
  });

  it("rejects unknown fields, so a typo cannot price a model at zero", () => {
    const typo = withModel((model) => {
      firstRow(model).cached_imput = 0.075;
    });
    expect(() => loadPriceCatalogue(typo)).toThrow(/openai\/chat-a: prices\[0\]: .*cached_imput/);
  });

  it("rejects unknown dimensions and negative rates in tiers and tool fees, naming the model and field", () => {
    const cases: [(row: Record<string, unknown>) => void, RegExp][] = [
      [
        (row) => (row.tool_calls = { web_serach: 10 }),
        /openai\/chat-a: prices\[0\]\.tool_calls: .*web_serach/,
      ],
      [
        (row) => (row.tool_requests = { google_search: -35 }),
        /prices\[0\]\.tool_requests\.google_search: must be/,
      ],
      [
        (row) => (row.service_tiers = { turbo: { input: 1, output: 2 } }),
        /prices\[0\]\.service_tiers: .*turbo/,
      ],
      [(row) => (row.service_tiers = { flex: { input: 1 } }), /prices\[0\]\.service_tiers\.flex\.output/],
      [
        (row) => (row.service_tiers = { flex: { input: 1, output: 2, cache_rd: 1 } }),
        /prices\[0\]\.service_tiers\.flex: .*cache_rd/,
      ],
      [
        (row) => (row.cache_write_1h = -6),
        /openai\/chat-a: prices\[0\]\.cache_write_1h: must be a non-negative/,
      ],
      [(row) => (row.audio_input = "ten"), /prices\[0\]\.audio_input/],
    ];
    for (const [change, message] of cases) {
      const bad = withModel((model) => change(firstRow(model)));
      expect(() => loadPriceCatalogue(bad)).toThrow(message);
    }
  });

  it("rejects rows out of date order, bad dates and ambiguous ids", () => {
    const unordered = withModel((model) => {
      (model.prices as unknown[]).reverse();
    });
    expect(() => loadPriceCatalogue(unordered)).toThrow(/prices\[1\]\.effective_from: must be later/);
    const badDate = withModel((model) => {
      firstRow(model).effective_from = "2026-02-30";
    });
    expect(() => loadPriceCatalogue(badDate)).toThrow(/prices\[0\]\.effective_from/);
    const clash = withModel((model) => {
      model.aliases = ["thinker"];
    });
    expect(() => loadPriceCatalogue(clash)).toThrow(/'thinker' is also openai\/chat-a/);
  });

  it("rejects a file that is not a catalogue", () => {
    expect(() => loadPriceCatalogue(null)).toThrow(/Invalid price catalogue: \(file\)/);
    expect(() => loadPriceCatalogue({ ...testCatalogue(), currency: "EUR" })).toThrow(/currency/);
    expect(() => loadPriceCatalogue({ ...testCatalogue(), version: "" })).toThrow(/version/);
  });
});

describe("override", () => {
  it("adds models and replaces or adds price rows", () => {
    const override = {
      version: "acme-1",
      models: [
        {
          vendor: "groq",
          model: "fine-tune",
          kind: "chat",
          max_output_tokens: 8192,
          prices: [{ effective_from: "2026-11-01", input: 0.2, output: 0.2 }],
        },
        {
          vendor: "openai",
          model: "chat-a",
          prices: [{ effective_from: "2026-06-01", input: 0.12, output: 0.48 }],
        },
        {
          vendor: "openai",
          model: "thinker",
          max_output_tokens: 50000,
          prices: [{ effective_from: "2026-12-01", input: 2, output: 8 }],
        },
      ],
    };
    const catalogue = loadPriceCatalogue(testCatalogue(), override);
    expect(
      costMicros(
        usage({ inputTokens: 1_000_000, outputTokens: 1_000_000 }),
        priced(catalogue, "groq", "fine-tune"),
      ),
    ).toBe(400_000);
    // The row of 2026-06-01 is replaced whole: its cached price falls back to the input rate.
    const chat = priced(catalogue, "openai", "chat-a");
    expect(chat.tokens.input).toBe(120_000_000n);
    expect(chat.tokens.cachedInput).toBe(120_000_000n);
    // Earlier rows and aliases are kept.
    expect(priced(catalogue, "openai", "chat-a-latest", new Date("2026-02-01T00:00:00Z")).tokens.input).toBe(
      150_000_000n,
    );
    const thinker = priced(catalogue, "openai", "thinker");
    expect(thinker.maxOutputTokens).toBe(50000);
    expect(thinker.tokens.reasoning).toBe(8_000_000_000n);
    expect(priced(catalogue, "openai", "thinker", new Date("2026-12-01T00:00:00Z")).tokens.reasoning).toBe(
      8_000_000_000n,
    );
    expect(priced(catalogue, "openai", "thinker", new Date("2026-12-01T00:00:00Z")).tokens.input).toBe(
      2_000_000_000n,
    );
  });

  it("fails naming the override's model and field", () => {
    const incomplete = {
      models: [
        {
          vendor: "groq",
          model: "fine-tune",
          kind: "chat",
          prices: [{ effective_from: "2026-11-01", input: 0.2 }],
        },
      ],
    };
    expect(() => loadPriceCatalogue(testCatalogue(), incomplete)).toThrow(
      "Invalid price override: groq/fine-tune: max_output_tokens: required for a chat model",
    );
    const negative = {
      models: [
        {
          vendor: "openai",
          model: "chat-a",
          prices: [{ effective_from: "2026-12-01", input: -1, output: 1 }],
        },
      ],
    };
    expect(() => loadPriceCatalogue(testCatalogue(), negative)).toThrow(
      /Invalid price override: openai\/chat-a: prices\[2\]\.input/,
    );
    expect(() => loadPriceCatalogue(testCatalogue(), { models: [{ vendor: "acme", model: "x" }] })).toThrow(
      /Invalid price override: acme\/x: vendor/,
    );
    expect(() => loadPriceCatalogue(testCatalogue(), { markup: 1.1, extra: true })).toThrow(
      /Invalid price override/,
    );
  });

  it("gives a price version that names the catalogue and changes with the override and markup", () => {
    const base = loadPriceCatalogue(testCatalogue());
    expect(base.priceVersion).toBe("test-1");
    expect(priced(base, "openai", "chat-a").priceVersion).toBe("test-1");
    const override = {
      models: [
        {
          vendor: "openai",
          model: "chat-a",
          prices: [{ effective_from: "2026-12-01", input: 1, output: 1 }],
        },
      ],
    };
    const a = loadPriceCatalogue(testCatalogue(), override).priceVersion;
    expect(a).toMatch(/^test-1\+[0-9a-f]{12}$/);
    expect(loadPriceCatalogue(testCatalogue(), override).priceVersion).toBe(a);
    const b = loadPriceCatalogue(testCatalogue(), override, 1.1).priceVersion;
    const c = loadPriceCatalogue(testCatalogue(), undefined, 1.1).priceVersion;
    expect(new Set([a, b, c, "test-1"]).size).toBe(4);
    expect(priced(loadPriceCatalogue(testCatalogue(), undefined, 1.1), "openai", "chat-a").priceVersion).toBe(
      c,
    );
  });
});
