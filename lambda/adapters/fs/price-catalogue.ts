import { readFileSync } from "node:fs";
import base from "../../../prices/catalogue.json" with { type: "json" };
import { loadPriceCatalogue, mergeOverride, type PriceCatalogue } from "../../core/pricing";
import { type ImportPlan, planImport } from "../../core/pricing/litellm";

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
  const markup = env.DMT_PRICE_MARKUP === undefined ? undefined : Number(env.DMT_PRICE_MARKUP);
  if (markup !== undefined && Number.isNaN(markup)) {
    throw new Error("Invalid configuration: DMT_PRICE_MARKUP must be a number such as 1.1");
  }
  return loadPriceCatalogue(base, overrideOf(env), markup);
}

/** The deployment override `DMT_PRICES_OVERRIDE` names (a file path or the JSON itself), if any. */
function overrideOf(env: Record<string, string | undefined>): unknown {
  const raw = env.DMT_PRICES_OVERRIDE;
  if (!raw) return undefined;
  const text = raw.trimStart().startsWith("{") ? raw : readFileSync(raw, "utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw new Error("Invalid configuration: DMT_PRICES_OVERRIDE is not valid JSON");
  }
}

/**
 * `dmt prices import`: LiteLLM's price list compared with the active catalogue, and the override that
 * would apply it, checked by the same loader as a start (a bad result throws naming model and field).
 */
export function planPriceImport(
  litellm: unknown,
  day: string,
  env: Record<string, string | undefined> = process.env,
): ImportPlan {
  activePriceCatalogue(env); // the current override is valid: merging it below cannot fail
  const current = overrideOf(env) as ImportPlan["override"] | undefined;
  const merged = current ? mergeOverride(base, current as Parameters<typeof mergeOverride>[1]).merged : base;
  const plan = planImport(merged as { models: Record<string, unknown>[] }, current, litellm, day);
  loadPriceCatalogue(base, plan.override);
  return plan;
}
