import { readFileSync } from "node:fs";
import base from "../../../prices/catalogue.json" with { type: "json" };
import { loadPriceCatalogue, type PriceCatalogue } from "../../core/pricing";

/**
 * The active price catalogue: the shipped `prices/catalogue.json` (bundled into Lambda), merged with a
 * deployment override and markup. `DMT_PRICES_OVERRIDE` is a JSON file path or inline JSON;
 * `DMT_PRICE_MARKUP` a factor such as 1.1. A bad file fails at start, naming the model and field.
 */
/** The catalogue's model names: what a key's `--models` globs are checked against (a warning). */
export function catalogueModels(env: Record<string, string | undefined> = process.env): string[] {
  return activePriceCatalogue(env)
    .list()
    .map((row) => row.model);
}

export function activePriceCatalogue(env: Record<string, string | undefined> = process.env): PriceCatalogue {
  const raw = env.DMT_PRICES_OVERRIDE;
  let override: unknown;
  if (raw) {
    const text = raw.trimStart().startsWith("{") ? raw : readFileSync(raw, "utf8");
    try {
      override = JSON.parse(text);
    } catch {
      throw new Error("Invalid configuration: DMT_PRICES_OVERRIDE is not valid JSON");
    }
  }
  const markup = env.DMT_PRICE_MARKUP === undefined ? undefined : Number(env.DMT_PRICE_MARKUP);
  if (markup !== undefined && Number.isNaN(markup)) {
    throw new Error("Invalid configuration: DMT_PRICE_MARKUP must be a number such as 1.1");
  }
  return loadPriceCatalogue(base, override, markup);
}
