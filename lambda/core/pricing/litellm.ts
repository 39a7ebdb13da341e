import type { VendorName } from "../vendor-names";
import { decimalText } from "./decimal";
import type { RawEntry } from "./schema";

/**
 * Reads LiteLLM's widely maintained price list (`model_prices_and_context_window.json`) and compares it
 * with our catalogue: models it has that we lack, prices that differ, and billed dimensions we do not
 * carry. `dmt prices import` prints the comparison and, with `--apply`, writes it as a deployment
 * override (prices/README.md). LiteLLM states prices per token as JSON numbers; they are shifted to
 * USD per million by decimal text, never by float arithmetic.
 */

/** One model as LiteLLM lists it, read into our field names (USD per million tokens, as decimal text). */
export interface ImportedModel {
  vendor: VendorName;
  model: string;
  kind: RawEntry["kind"];
  maxOutputTokens?: number;
  /** Our row fields (`input`, `cache_write_1h`, `service_tiers.flex.input`...) with their prices. */
  prices: Record<string, string>;
  /** LiteLLM cost fields we have no dimension for. */
  unmapped: string[];
}

export class PriceImportError extends Error {
  override name = "PriceImportError";
}

const PROVIDERS: Record<string, VendorName> = {
  openai: "openai",
  anthropic: "anthropic",
  gemini: "gemini",
  groq: "groq",
};
const PREFIXES = ["gemini/", "groq/"];
const MODES: Record<string, RawEntry["kind"]> = {
  chat: "chat",
  responses: "chat",
  completion: "chat",
  embedding: "embedding",
  image_generation: "image",
  audio_transcription: "transcription",
  audio_speech: "speech",
  moderation: "moderation",
};

/** LiteLLM per-token fields and the row field each fills. */
const PER_TOKEN: Record<string, string> = {
  input_cost_per_token: "input",
  output_cost_per_token: "output",
  cache_read_input_token_cost: "cached_input",
  cache_creation_input_token_cost: "cache_write",
  cache_creation_input_token_cost_above_1hr: "cache_write_1h",
  output_cost_per_reasoning_token: "reasoning",
  input_cost_per_audio_token: "audio_input",
  output_cost_per_audio_token: "audio_output",
  input_cost_per_image_token: "image_input",
  input_cost_per_token_flex: "service_tiers.flex.input",
  output_cost_per_token_flex: "service_tiers.flex.output",
  cache_read_input_token_cost_flex: "service_tiers.flex.cached_input",
  input_cost_per_token_priority: "service_tiers.priority.input",
  output_cost_per_token_priority: "service_tiers.priority.output",
  cache_read_input_token_cost_priority: "service_tiers.priority.cached_input",
};

/** Long-context fields: `<base field>_above_<n>k_tokens`. */
const LONG_CONTEXT =
  /^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost)_above_(\d+)k_tokens$/;
/** A field that states a price: anything LiteLLM names `*cost*`. */
const COST_FIELD = /cost/;

/**
 * The models of a LiteLLM price list that belong to our vendors and kinds. Anything that is not that
 * format is refused, naming the entry and field at fault.
 */
export function readLiteLlm(json: unknown): { models: ImportedModel[]; skipped: number } {
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new PriceImportError("Invalid LiteLLM price list: (file): must be a JSON object of model entries");
  }
  const models: ImportedModel[] = [];
  let skipped = 0;
  for (const [name, value] of Object.entries(json)) {
    if (name === "sample_spec") continue;
    const fail = (field: string, why: string): never => {
      throw new PriceImportError(`Invalid LiteLLM price list: ${name.slice(0, 128)}: ${field}: ${why}`);
    };
    if (typeof value !== "object" || value === null || Array.isArray(value))
      fail("(entry)", "must be an object");
    const entry = value as Record<string, unknown>;
    if (typeof entry.litellm_provider !== "string")
      fail("litellm_provider", "must be a string (is this a LiteLLM file?)");
    const vendor = PROVIDERS[entry.litellm_provider as string];
    const kind = MODES[typeof entry.mode === "string" ? entry.mode : "chat"];
    if (!vendor || !kind) {
      skipped++;
      continue;
    }
    const prices: Record<string, string> = {};
    const unmapped: string[] = [];
    for (const [field, raw] of Object.entries(entry)) {
      if (!COST_FIELD.test(field)) continue;
      if (typeof raw !== "number") {
        // Some tools are priced by an object (search context sizes): a dimension we do not carry.
        if (typeof raw === "object" && raw !== null) unmapped.push(field);
        else fail(field, "must be a number");
        continue;
      }
      if (!(raw >= 0) || !Number.isFinite(raw)) fail(field, "must be a non-negative number");
      const long = LONG_CONTEXT.exec(field);
      const target = PER_TOKEN[field] ?? (long ? `long_context.${PER_TOKEN[long[1] ?? ""]}` : undefined);
      if (target === undefined) {
        unmapped.push(field);
        continue;
      }
      const perMillion = shiftDecimal(raw, 6);
      if (perMillion === undefined) fail(field, "has more precision than a nano-dollar per million tokens");
      prices[target] = perMillion as string;
      if (long) prices["long_context.above_input_tokens"] = String(Number(long[2]) * 1000);
    }
    const model = PREFIXES.reduce(
      (id, prefix) => (id.startsWith(prefix) ? id.slice(prefix.length) : id),
      name,
    );
    const imported: ImportedModel = { vendor, model, kind, prices, unmapped };
    if (typeof entry.max_output_tokens === "number" && Number.isSafeInteger(entry.max_output_tokens)) {
      imported.maxOutputTokens = entry.max_output_tokens;
    }
    models.push(imported);
  }
  return { models, skipped };
}

/** `value × 10^places` as exact decimal text from the number's shortest form, or undefined past 9 decimals. */
function shiftDecimal(value: number, places: number): string | undefined {
  const [mantissa = "0", exponent = "0"] = value.toExponential().split("e");
  const digits = mantissa.replace(".", "").replace(/^-/, "");
  const point = 1 + Number(exponent) + places; // position of the decimal point within `digits`
  const whole = point <= 0 ? "0" : digits.slice(0, point).padEnd(point, "0");
  const fraction = point < 0 ? "0".repeat(-point) + digits : digits.slice(Math.max(point, 0));
  const text = `${whole.replace(/^0+(?=\d)/, "")}${fraction.replace(/0+$/, "") ? `.${fraction.replace(/0+$/, "")}` : ""}`;
  return decimalText(text);
}

/** One difference between LiteLLM's list and ours. */
export interface PriceDifference {
  vendor: VendorName;
  model: string;
  field: string;
  ours?: string;
  theirs?: string;
}

export interface ImportComparison {
  /** Models LiteLLM lists for our vendors that our catalogue does not. */
  newModels: ImportedModel[];
  /** Prices both list, with different amounts. */
  changed: PriceDifference[];
  /** Dimensions LiteLLM prices for a model of ours that our row lacks, or that we have no field for. */
  missing: PriceDifference[];
  skipped: number;
}

/** A catalogued row's prices in the same flattened field names (`service_tiers.flex.input`). */
export type FlatRow = Record<string, string>;

/**
 * Compares the imported models with our current rows (`ours`: by "vendor/model", aliases included).
 * Only exact ids are compared: a dated snapshot LiteLLM lists apart is not a model we lack.
 */
export function compareWithCatalogue(
  imported: { models: ImportedModel[]; skipped: number },
  ours: ReadonlyMap<string, { model: string; row: FlatRow }>,
): ImportComparison {
  const comparison: ImportComparison = { newModels: [], changed: [], missing: [], skipped: imported.skipped };
  for (const model of imported.models) {
    const current = ours.get(`${model.vendor}/${model.model}`);
    if (!current) {
      comparison.newModels.push(model);
      continue;
    }
    const subject = { vendor: model.vendor, model: current.model };
    for (const [field, theirs] of Object.entries(model.prices)) {
      const mine = current.row[field];
      if (mine === undefined) comparison.missing.push({ ...subject, field, theirs });
      else if (Number(mine) !== Number(theirs))
        comparison.changed.push({ ...subject, field, ours: mine, theirs });
    }
    for (const field of model.unmapped) comparison.missing.push({ ...subject, field: `litellm:${field}` });
  }
  return comparison;
}

/** Sets a flattened field (`service_tiers.flex.input`) on a nested object. */
export function setFlat(target: Record<string, unknown>, field: string, value: string | number): void {
  const path = field.split(".");
  let node = target;
  for (const key of path.slice(0, -1)) {
    node[key] ??= {};
    node = node[key] as Record<string, unknown>;
  }
  node[path.at(-1) as string] = value;
}

/** A nested row's prices as flattened fields: the inverse of `setFlat` over decimal text. */
export function flatten(value: unknown, prefix = ""): FlatRow {
  const flat: FlatRow = {};
  if (typeof value !== "object" || value === null) return flat;
  for (const [key, child] of Object.entries(value)) {
    const field = prefix ? `${prefix}.${key}` : key;
    if (typeof child === "string" || typeof child === "number") flat[field] = String(child);
    else Object.assign(flat, flatten(child, field));
  }
  return flat;
}

type JsonEntry = Record<string, unknown> & {
  vendor: string;
  model: string;
  aliases?: string[];
  prices: JsonRow[];
};
type JsonRow = Record<string, unknown> & { effective_from: string };

/** Our rows in force on `day`, by "vendor/model" and by alias, as flattened fields. */
function currentRows(
  models: JsonEntry[],
  day: string,
): Map<string, { model: string; row: FlatRow; entry: JsonEntry }> {
  const rows = new Map<string, { model: string; row: FlatRow; entry: JsonEntry }>();
  for (const entry of models) {
    const row = entry.prices.findLast((r) => r.effective_from <= day);
    if (!row) continue;
    const { effective_from: _from, note: _note, ...prices } = row;
    const current = { model: entry.model, row: flatten(prices), entry };
    for (const id of [entry.model, ...(entry.aliases ?? [])]) rows.set(`${entry.vendor}/${id}`, current);
  }
  return rows;
}

export interface ImportPlan {
  comparison: ImportComparison;
  /** The deployment override with the import applied: new models added, changed rows dated `day`. */
  override: { version?: string; markup?: number; notes?: string[]; models: Record<string, unknown>[] };
  /** New models left out of the override, and why (a chat model without an output cap). */
  leftOut: { vendor: VendorName; model: string; why: string }[];
}

/**
 * Compares a LiteLLM list with the catalogue (base merged with the current override, if any) and
 * builds the override that applies it: a row dated `day` for each model whose prices changed or gained
 * a dimension (its current row with LiteLLM's figures, so old rows stay as they were), and an entry for
 * each new model. The caller validates it with `loadPriceCatalogue` before writing it.
 */
export function planImport(
  merged: { models: Record<string, unknown>[] },
  currentOverride: ImportPlan["override"] | undefined,
  litellm: unknown,
  day: string,
): ImportPlan {
  const ours = currentRows(merged.models as JsonEntry[], day);
  const comparison = compareWithCatalogue(readLiteLlm(litellm), ours);
  const override: ImportPlan["override"] = {
    ...currentOverride,
    version: currentOverride?.version ?? `litellm-${day}`,
    models: [...(currentOverride?.models ?? [])],
  };
  const entryFor = (vendor: string, model: string) => {
    let entry = override.models.find((m) => m.vendor === vendor && m.model === model);
    if (!entry) {
      entry = { vendor, model, prices: [] };
      override.models.push(entry);
    }
    return entry as { prices: JsonRow[] };
  };
  const updates = new Map<string, PriceDifference[]>();
  for (const difference of [...comparison.changed, ...comparison.missing]) {
    if (difference.theirs === undefined) continue; // a LiteLLM field we have no dimension for
    const key = `${difference.vendor}/${difference.model}`;
    updates.set(key, [...(updates.get(key) ?? []), difference]);
  }
  for (const [key, differences] of updates) {
    const current = ours.get(key);
    if (!current) continue;
    const inForce = current.entry.prices.findLast((r) => r.effective_from <= day) as JsonRow;
    const row: Record<string, unknown> = {
      ...structuredClone(inForce),
      effective_from: day,
      note: "imported from LiteLLM",
    };
    for (const { field, theirs } of differences) setFlat(row, field, priceValue(field, theirs as string));
    const entry = entryFor(current.entry.vendor, current.entry.model);
    entry.prices = [...entry.prices.filter((r) => r.effective_from !== day), row as JsonRow];
  }
  const leftOut: ImportPlan["leftOut"] = [];
  for (const model of comparison.newModels) {
    if (model.kind === "chat" && model.maxOutputTokens === undefined) {
      leftOut.push({ vendor: model.vendor, model: model.model, why: "a chat model needs max_output_tokens" });
      continue;
    }
    const row: Record<string, unknown> = { effective_from: day, note: "imported from LiteLLM" };
    for (const [field, usd] of Object.entries(model.prices)) setFlat(row, field, priceValue(field, usd));
    override.models.push({
      vendor: model.vendor,
      model: model.model,
      kind: model.kind,
      ...(model.maxOutputTokens !== undefined ? { max_output_tokens: model.maxOutputTokens } : {}),
      prices: [row],
    });
  }
  return { comparison, override, leftOut };
}

/** Thresholds are token counts; every other field is a USD amount kept as decimal text. */
function priceValue(field: string, value: string): string | number {
  return field.endsWith("above_input_tokens") ? Number(value) : value;
}
