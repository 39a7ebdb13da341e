import { createHash } from "node:crypto";
import type * as z from "zod/mini";
import type { VendorName } from "../vendor-names";
import { formatNanos, ONE, type Ratio, ratioOf } from "./decimal";
import {
  catalogueSchema,
  type ModelKind,
  overrideSchema,
  type RawCatalogue,
  type RawEntry,
  type RawPriceRow,
  type ServiceTier,
  type Tool,
} from "./schema";

/** Token prices in nano-USD per million tokens, with the defaults of absent fields filled in. */
export interface TokenRates {
  input: bigint;
  output: bigint;
  /** Absent in the file: billed at the input rate (never cheaper than the vendor by omission). */
  cachedInput: bigint;
  /** Absent in the file: billed at the input rate. */
  cacheWrite: bigint;
  /** Absent in the file: reasoning is billed at the output rate. */
  reasoning: bigint;
  /**
   * Rates of the subsets some vendors bill apart. Absent: no published rate was confirmed, so those
   * tokens bill at the plain rate they are part of and the record lists the dimension as unpriced.
   */
  cacheWrite1h: bigint | undefined;
  audioInput: bigint | undefined;
  imageInput: bigint | undefined;
  audioOutput: bigint | undefined;
}

export type AudioUnit = "second" | "minute" | "hour";

/** The price of one model at one moment, as `costMicros` and `maxCostMicros` use it (shared: never changed). */
export interface ModelPrice {
  readonly vendor: VendorName;
  /** The catalogue's id for the model the request named (after alias and snapshot resolution). */
  readonly model: string;
  readonly kind: ModelKind;
  readonly effectiveFrom: string;
  readonly maxOutputTokens: number | undefined;
  readonly tokens: TokenRates;
  /** Rates for the whole request once its input exceeds `aboveInputTokens`. */
  readonly longContext: { aboveInputTokens: number; tokens: TokenRates } | undefined;
  /** Rates for the whole request when a service tier other than the standard one served it. */
  readonly serviceTiers: ReadonlyMap<ServiceTier, TokenRates>;
  /** Nano-USD per 1,000 calls of a server-side tool, and per 1,000 requests that used one. */
  readonly toolCalls: ReadonlyMap<Tool, bigint>;
  readonly toolRequests: ReadonlyMap<Tool, bigint>;
  /** Nano-USD per image, by "<quality>/<size>" variant (a single price is the variant "any"). */
  readonly perImage: ReadonlyMap<string, bigint> | undefined;
  readonly audio: { per: AudioUnit; nanos: bigint; minimumSeconds: number } | undefined;
  /** Nano-USD per million characters of speech input. */
  readonly perMillionCharacters: bigint | undefined;
  /** The deployment's markup, applied to every cost. */
  readonly markup: Ratio;
  /** The `price_version` a usage record priced with this carries. */
  readonly priceVersion: string;
}

/** One row of `dmt prices list`: list prices as decimal USD text, exactly as the catalogue holds them. */
export interface PriceListRow {
  vendor: VendorName;
  model: string;
  kind: ModelKind;
  aliases: string[];
  effectiveFrom: string;
  maxOutputTokens?: number;
  input?: string;
  cachedInput?: string;
  cacheWrite?: string;
  output?: string;
  reasoning?: string;
  cacheWrite1h?: string;
  audioInput?: string;
  imageInput?: string;
  audioOutput?: string;
  serviceTiers?: Partial<Record<ServiceTier, Record<string, string>>>;
  toolCalls?: Partial<Record<Tool, string>>;
  toolRequests?: Partial<Record<Tool, string>>;
  longContext?: {
    aboveInputTokens: number;
    input: string;
    output: string;
    cachedInput?: string;
    cacheWrite?: string;
    cacheWrite1h?: string;
    reasoning?: string;
  };
  perImage?: Record<string, string>;
  audio?: { per: AudioUnit; usd: string; minimumSeconds?: number };
  perMillionCharacters?: string;
  note?: string;
}

const MAX_MARKUP = 10;

/** Dated snapshot suffixes: gpt-4o-2024-08-06, claude-sonnet-4-5-20250929, gemini-2.0-flash-001, -0125. */
const SNAPSHOT_SUFFIX = /-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{2}-\d{4}|\d{3,4})$/;

export class PriceCatalogue {
  /** The base catalogue's `version`. */
  readonly version: string;
  /** The catalogue version, plus a hash of the override and markup when either is in force. */
  readonly priceVersion: string;
  readonly markup: Ratio;
  private readonly models: readonly RawEntry[];
  private readonly byId = new Map<string, RawEntry>();
  /** Each row's price, made once: every metered call asks for one (rows are few and never change). */
  private readonly priceOfRow = new WeakMap<RawPriceRow, ModelPrice>();

  constructor(catalogue: RawCatalogue, markup: Ratio, priceVersion: string) {
    this.version = catalogue.version;
    this.priceVersion = priceVersion;
    this.markup = markup;
    this.models = catalogue.models;
    for (const entry of catalogue.models) {
      for (const id of [entry.model, ...(entry.aliases ?? [])]) this.byId.set(`${entry.vendor}/${id}`, entry);
    }
  }

  /**
   * The price in force for `model` at `at` (rows apply from 00:00 UTC of their date), or undefined
   * when the model is unknown or not yet priced then. A model id resolves by exact id or alias, then
   * without a leading "models/" (Gemini paths), then without a dated snapshot suffix. There is no
   * looser prefix match: gpt-4o-mini-tts must never be priced as gpt-4o-mini.
   */
  priceFor(vendor: VendorName, model: string, at: Date): ModelPrice | undefined {
    const entry = this.resolve(vendor, model);
    const row = entry && rowAt(entry, at);
    if (!entry || !row) return undefined;
    let price = this.priceOfRow.get(row);
    if (!price) {
      price = toModelPrice(entry, row, this.markup, this.priceVersion);
      this.priceOfRow.set(row, price);
    }
    return price;
  }

  /** The rows in force at `at`, for `dmt prices list [--vendor v] [--json]`. */
  list(options: { vendor?: VendorName; at?: Date } = {}): PriceListRow[] {
    const at = options.at ?? new Date();
    const rows: PriceListRow[] = [];
    for (const entry of this.models) {
      if (options.vendor !== undefined && entry.vendor !== options.vendor) continue;
      const row = rowAt(entry, at);
      if (row) rows.push(toListRow(entry, row));
    }
    return rows;
  }

  private resolve(vendor: VendorName, model: string): RawEntry | undefined {
    const find = (id: string) => this.byId.get(`${vendor}/${id}`);
    const bare = model.startsWith("models/") ? model.slice("models/".length) : model;
    return (
      find(model) ??
      find(bare) ??
      (SNAPSHOT_SUFFIX.test(bare) ? find(bare.replace(SNAPSHOT_SUFFIX, "")) : undefined)
    );
  }
}

/**
 * Loads the base catalogue, merges a deployment override over it and sets the markup. Throws at
 * startup on any bad value, naming the model and the field. Override semantics: an entry for a model
 * the catalogue lacks adds it (and must be complete); an entry for a catalogued model replaces the
 * fields it gives, and its price rows replace the rows with the same `effective_from` or add new ones.
 * The `markup` argument wins over the override file's `markup`; default 1.
 */
export function loadPriceCatalogue(base: unknown, override?: unknown, markup?: number): PriceCatalogue {
  const parsedBase = parse(catalogueSchema, base, "Invalid price catalogue", base);
  let catalogue = parsedBase;
  let fileMarkup: number | undefined;
  if (override !== undefined) {
    const parsedOverride = parse(overrideSchema, override, "Invalid price override", override);
    fileMarkup = parsedOverride.markup;
    const { merged, touched } = mergeOverride(base as { models: Record<string, unknown>[] }, parsedOverride);
    const result = catalogueSchema.safeParse(merged);
    if (!result.success) {
      const issue = result.error.issues[0];
      const index = issue?.path[1];
      const fromOverride = typeof index === "number" && touched.has(index);
      throw new Error(
        describeIssue(fromOverride ? "Invalid price override" : "Invalid price catalogue", issue, merged),
      );
    }
    catalogue = result.data;
  }
  const markupValue = markup ?? fileMarkup ?? 1;
  const ratio = ratioOf(markupValue);
  if (!(markupValue > 0 && markupValue <= MAX_MARKUP) || ratio === undefined) {
    throw new Error(
      `Invalid price markup: ${markupValue} is not a factor above 0 and at most ${MAX_MARKUP} (e.g. 1.1)`,
    );
  }
  const plain = override === undefined && markupValue === 1;
  const priceVersion = plain
    ? parsedBase.version
    : `${parsedBase.version}+${createHash("sha256")
        .update(JSON.stringify({ override: override ?? null, markup: String(markupValue) }))
        .digest("hex")
        .slice(0, 12)}`;
  return new PriceCatalogue(catalogue, plain ? ONE : ratio, priceVersion);
}

function parse<T extends z.ZodMiniType>(schema: T, value: unknown, what: string, raw: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw new Error(describeIssue(what, result.error.issues[0], raw));
  return result.data;
}

/** "Invalid price catalogue: openai/gpt-4o: prices[0].output: required for a chat model". */
function describeIssue(what: string, issue: z.core.$ZodIssue | undefined, raw: unknown): string {
  if (!issue) return what;
  const path = [...issue.path];
  let subject = "";
  if (path[0] === "models" && typeof path[1] === "number") {
    const model = (raw as { models?: Record<string, unknown>[] }).models?.[path[1]];
    subject = `${String(model?.vendor ?? "?")}/${String(model?.model ?? `models[${path[1]}]`)}: `;
    path.splice(0, 2);
  }
  const field = path
    .map((part, i) => (typeof part === "number" ? `[${part}]` : `${i === 0 ? "" : "."}${String(part)}`))
    .join("");
  return `${what}: ${subject}${field || "(file)"}: ${issue.message}`;
}

/** The catalogue's JSON with an override's entries merged in (see `loadPriceCatalogue`). */
export function mergeOverride(
  base: { models: Record<string, unknown>[] },
  override: z.output<typeof overrideSchema>,
): { merged: Record<string, unknown>; touched: Set<number> } {
  const models = [...base.models];
  const touched = new Set<number>();
  for (const change of override.models ?? []) {
    const index = models.findIndex((m) => m.vendor === change.vendor && m.model === change.model);
    if (index === -1) {
      touched.add(models.push(change) - 1);
      continue;
    }
    const current = models[index] as Record<string, unknown> & { prices: { effective_from: string }[] };
    const rows = new Map(current.prices.map((row) => [row.effective_from, row]));
    for (const row of change.prices ?? []) rows.set(row.effective_from, row);
    const prices = [...rows.values()].sort((a, b) => a.effective_from.localeCompare(b.effective_from));
    models[index] = { ...current, ...change, prices };
    touched.add(index);
  }
  return { merged: { ...base, models }, touched };
}

function rowAt(entry: RawEntry, at: Date): RawPriceRow | undefined {
  const day = at.toISOString().slice(0, 10);
  return entry.prices.findLast((row) => row.effective_from <= day);
}

type Rates = Pick<
  RawPriceRow,
  | "input"
  | "output"
  | "cached_input"
  | "cache_write"
  | "cache_write_1h"
  | "reasoning"
  | "audio_input"
  | "image_input"
  | "audio_output"
>;

function tokenRates(rates: Rates): TokenRates {
  const input = rates.input ?? 0n;
  const output = rates.output ?? 0n;
  return {
    input,
    output,
    cachedInput: rates.cached_input ?? input,
    cacheWrite: rates.cache_write ?? input,
    reasoning: rates.reasoning ?? output,
    cacheWrite1h: rates.cache_write_1h,
    audioInput: rates.audio_input,
    imageInput: rates.image_input,
    audioOutput: rates.audio_output,
  };
}

/** The rates of a row as `--json` shows them: decimal text, absent fields left out. */
function ratesText(rates: Rates): Record<string, string> {
  const text: Record<string, string> = {};
  for (const [field, value] of Object.entries(rates)) {
    if (typeof value === "bigint") text[field] = formatNanos(value);
  }
  return text;
}

function feesText(
  fees: Partial<Record<Tool, bigint>> | undefined,
): Partial<Record<Tool, string>> | undefined {
  return fees && Object.fromEntries(Object.entries(fees).map(([tool, nanos]) => [tool, formatNanos(nanos)]));
}

function toModelPrice(entry: RawEntry, row: RawPriceRow, markup: Ratio, priceVersion: string): ModelPrice {
  const { per_image: perImage, audio, long_context: long } = row;
  return {
    vendor: entry.vendor,
    model: entry.model,
    kind: entry.kind,
    effectiveFrom: row.effective_from,
    maxOutputTokens: entry.max_output_tokens,
    tokens: tokenRates(row),
    longContext: long && { aboveInputTokens: long.above_input_tokens, tokens: tokenRates(long) },
    serviceTiers: new Map(
      Object.entries(row.service_tiers ?? {}).map(([tier, rates]) => [
        tier as ServiceTier,
        tokenRates(rates),
      ]),
    ),
    toolCalls: new Map(Object.entries(row.tool_calls ?? {}) as [Tool, bigint][]),
    toolRequests: new Map(Object.entries(row.tool_requests ?? {}) as [Tool, bigint][]),
    perImage:
      perImage === undefined
        ? undefined
        : new Map(typeof perImage === "bigint" ? [["any", perImage]] : Object.entries(perImage)),
    audio: audio && { per: audio.per, nanos: audio.usd, minimumSeconds: audio.minimum_seconds ?? 0 },
    perMillionCharacters: row.per_million_characters,
    markup,
    priceVersion,
  };
}

const usdText = (nanos: bigint | undefined) => (nanos === undefined ? undefined : formatNanos(nanos));

function toListRow(entry: RawEntry, row: RawPriceRow): PriceListRow {
  const { per_image: perImage, audio, long_context: long } = row;
  const listRow: PriceListRow = {
    vendor: entry.vendor,
    model: entry.model,
    kind: entry.kind,
    aliases: entry.aliases ?? [],
    effectiveFrom: row.effective_from,
    maxOutputTokens: entry.max_output_tokens,
    input: usdText(row.input),
    cachedInput: usdText(row.cached_input),
    cacheWrite: usdText(row.cache_write),
    output: usdText(row.output),
    reasoning: usdText(row.reasoning),
    cacheWrite1h: usdText(row.cache_write_1h),
    audioInput: usdText(row.audio_input),
    imageInput: usdText(row.image_input),
    audioOutput: usdText(row.audio_output),
    serviceTiers:
      row.service_tiers &&
      Object.fromEntries(Object.entries(row.service_tiers).map(([tier, rates]) => [tier, ratesText(rates)])),
    toolCalls: feesText(row.tool_calls),
    toolRequests: feesText(row.tool_requests),
    longContext: long && {
      aboveInputTokens: long.above_input_tokens,
      input: formatNanos(long.input),
      output: formatNanos(long.output),
      cachedInput: usdText(long.cached_input),
      cacheWrite: usdText(long.cache_write),
      cacheWrite1h: usdText(long.cache_write_1h),
      reasoning: usdText(long.reasoning),
    },
    perImage:
      perImage === undefined
        ? undefined
        : typeof perImage === "bigint"
          ? { any: formatNanos(perImage) }
          : Object.fromEntries(Object.entries(perImage).map(([k, v]) => [k, formatNanos(v)])),
    audio: audio && { per: audio.per, usd: formatNanos(audio.usd), minimumSeconds: audio.minimum_seconds },
    perMillionCharacters: usdText(row.per_million_characters),
    note: row.note ?? entry.note,
  };
  // Drop absent fields so `--json` shows only what the catalogue says.
  return JSON.parse(JSON.stringify(listRow)) as PriceListRow;
}
