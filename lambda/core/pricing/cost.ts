import type { Usage } from "../usage";
import type { ModelPrice, TokenRates } from "./catalogue";
import { ceilDiv, formatNanos, NANOS_PER_USD, ONE, type Ratio } from "./decimal";
import type { ServiceTier, Tool } from "./schema";

/**
 * Cost in integer micro-USD, computed exactly: every term is an integer count times an integer
 * nano-USD rate, summed as one bigint fraction, multiplied by the markup ratio, and rounded once,
 * up, to the next whole micro-USD. So a call that costs anything costs at least 1 micro-USD, and
 * summing per-part roundings can never drift from the total.
 */

/**
 * One common denominator for every unit: rates are per million tokens or characters, per image, or
 * per second, minute or hour of audio. Amounts are kept as nano-USD × SCALE so each term is integral.
 */
const SCALE = 3_600_000_000n;
const PER_MILLION = SCALE / 1_000_000n;
const PER_AUDIO_UNIT = { second: SCALE, minute: SCALE / 60n, hour: SCALE / 3600n } as const;
const NANOS_PER_MICRO = 1000n;

export interface CostOptions {
  /** The "<quality>/<size>" of the images generated, when the model prices them by variant. */
  imageVariant?: string;
  /** False for the vendor's list price (BYOK and dual-key records); default true. */
  applyMarkup?: boolean;
}

/** One line of a charge: `quantity` `unit`s at `rate_usd` per `per` of them. */
export interface LineItem {
  /** What was counted: `input`, `cache_write_1h`, `images`, `tool_calls.web_search`... (prices/README.md). */
  dimension: string;
  quantity: number;
  unit: "tokens" | "images" | "seconds" | "characters" | "calls" | "requests";
  /** USD per `per` units, as the catalogue lists it. */
  rate_usd: string;
  per: number;
  /** quantity × rate_usd / per, in micro-USD, before the markup; exact (rounded up at the 9th decimal). */
  amount_micros: string;
  /**
   * The line's share of the list total and of the billed total, in whole micro-USD: each line gets its
   * exact amount rounded down, and the micro-USD the totals' single rounding up leaves over go one each
   * to the lines with the largest remainders (the earlier line on a tie). So the lines sum exactly to
   * `list_micros` and `micros`.
   */
  list_micros: number;
  billed_micros: number;
}

/**
 * How a cost was reached, enough to recompute it from the record alone: the sum of the lines'
 * quantity × rate / per, times `markup`, rounded once, up, to a whole micro-USD is `micros`.
 */
export interface CostBreakdown {
  /** Billed: the lines' exact sum times `markup`, rounded once, up, to a whole micro-USD. */
  micros: number;
  /** The list price: the lines' exact sum rounded once, up (equal to `micros` at list price). */
  list_micros: number;
  items: LineItem[];
  /** The markup applied ("1" for list prices). */
  markup: string;
  /** The service tier whose rates applied, when not the standard ones. */
  service_tier?: string;
  /** The whole call was priced at the long-context rates. */
  long_context?: boolean;
  /**
   * Dimensions the usage has and the price lacks a rate for: tokens stay billed at the rate of the total
   * they are part of (never zero); a tool or tier without a price is not billed. Metering logs them.
   */
  unpriced?: string[];
  /** The price plan of a managed call, its version and the percentage that applied (core/plans.ts). */
  plan?: { id: string; version: number; percent: string };
  /** What was charged when it differs from `micros`: metering caps a charge at the call's credit hold. */
  charged_micros?: number;
}

/** Service tiers that mean the standard rates. Groq bills its flex tier at on-demand rates. */
const STANDARD_TIERS = new Set(["default", "standard", "auto", "on_demand"]);
/** OpenAI renamed priority processing "fast" on 2026-07-30; both names select the same rates. */
const TIER_ALIASES: Record<string, ServiceTier> = { fast: "priority", priority: "priority", flex: "flex" };

/**
 * The cost of a call. `usage` follows `lambda/core/usage.ts`: totals with subsets, so uncached input
 * is input − cached − cache writes, and reasoning is part of output. A call served by another service
 * tier is priced wholly at that tier's rates; otherwise a request whose input exceeds the model's
 * long-context threshold is priced wholly at the long-context rates. Per-image prices use
 * `imageVariant`, or the dearest variant when it is unknown. Audio is billed in whole seconds (rounded
 * up) with the vendor's per-request minimum. Throws RangeError on impossible usage.
 */
export function costMicros(usage: Usage, price: ModelPrice, options: CostOptions = {}): number {
  return costBreakdown(usage, price, options).micros;
}

/** The cost of a call with its line items (see `costMicros`). */
export function costBreakdown(usage: Usage, price: ModelPrice, options: CostOptions = {}): CostBreakdown {
  checkUsage(usage);
  const unpriced: string[] = [];
  const tier = tierOf(price, usage.serviceTier, unpriced);
  const tierRates = tier && price.serviceTiers.get(tier);
  const long = !tierRates && isLongContext(price, usage.inputTokens);
  const rates = tierRates ?? (long && price.longContext ? price.longContext.tokens : price.tokens);
  const lines: Priced[] = [];
  const tokens = (dimension: string, quantity: number, rate: bigint) =>
    lines.push({ dimension, quantity, unit: "tokens", rate, per: 1_000_000 });
  /** Moves `part` of a total to its own line when the row prices it; otherwise notes it unpriced. */
  const split = (total: number, part: number, dimension: string, rate: bigint | undefined): number => {
    const taken = Math.min(part, total);
    if (taken === 0) return total;
    if (rate === undefined) {
      unpriced.push(dimension);
      return total;
    }
    tokens(dimension, taken, rate);
    return total - taken;
  };

  let uncached = usage.inputTokens - usage.cachedInputTokens - usage.cacheWriteTokens;
  uncached = split(uncached, usage.audioInputTokens ?? 0, "audio_input", rates.audioInput);
  uncached = split(uncached, usage.imageInputTokens ?? 0, "image_input", rates.imageInput);
  tokens("input", uncached, rates.input);
  tokens("cached_input", usage.cachedInputTokens, rates.cachedInput);
  const writes5m = split(
    usage.cacheWriteTokens,
    usage.cacheWrite1hTokens ?? 0,
    "cache_write_1h",
    rates.cacheWrite1h,
  );
  tokens("cache_write", writes5m, rates.cacheWrite);
  let visible = usage.outputTokens - usage.reasoningTokens;
  visible = split(visible, usage.audioOutputTokens ?? 0, "audio_output", rates.audioOutput);
  tokens("output", visible, rates.output);
  tokens("reasoning", usage.reasoningTokens, rates.reasoning);

  addUnits(lines, usage, price, options, unpriced);
  const priced = lines.filter((line) => line.quantity > 0);
  const scaled = priced.reduce((sum, line) => sum + scaledAmount(line), 0n);
  const markup = (options.applyMarkup ?? true) ? price.markup : ONE;
  const amounts = priced.map(scaledAmount);
  const listShares = shares(amounts, ONE);
  const billedShares = markup === ONE ? listShares : shares(amounts, markup);
  const breakdown: CostBreakdown = {
    micros: toMicros(scaled, markup),
    list_micros: toMicros(scaled, ONE),
    items: priced.map((line, i) => ({
      dimension: line.dimension,
      quantity: line.quantity,
      unit: line.unit,
      rate_usd: formatNanos(line.rate),
      per: line.per,
      amount_micros: formatNanos(ceilDiv((amounts[i] ?? 0n) * NANOS_PER_USD, SCALE * NANOS_PER_MICRO)),
      list_micros: listShares[i] ?? 0,
      billed_micros: billedShares[i] ?? 0,
    })),
    markup: ratioText(markup),
  };
  if (tierRates && tier) breakdown.service_tier = tier;
  if (long) breakdown.long_context = true;
  if (unpriced.length > 0) breakdown.unpriced = unpriced;
  return breakdown;
}

/** A line before formatting: its rate in nano-USD per `per` units. */
interface Priced {
  dimension: string;
  quantity: number;
  unit: LineItem["unit"];
  rate: bigint;
  per: number;
}

/** Images, audio, speech and server-side tools: the units priced otherwise than per token. */
function addUnits(
  lines: Priced[],
  usage: Usage,
  price: ModelPrice,
  options: CostOptions,
  unpriced: string[],
): void {
  const images = usage.images ?? 0;
  if (images > 0 && price.perImage) {
    const each = imagePrice(price.perImage, options.imageVariant);
    lines.push({ dimension: "images", quantity: images, unit: "images", rate: each, per: 1 });
  }
  const seconds = usage.audioSeconds ?? 0;
  if (seconds > 0 && price.audio) {
    const billed = Math.max(Math.ceil(seconds), price.audio.minimumSeconds);
    const per = { second: 1, minute: 60, hour: 3600 }[price.audio.per];
    lines.push({
      dimension: "audio_seconds",
      quantity: billed,
      unit: "seconds",
      rate: price.audio.nanos,
      per,
    });
  }
  const characters = usage.speechCharacters ?? 0;
  if (characters > 0 && price.perMillionCharacters !== undefined) {
    lines.push({
      dimension: "speech_characters",
      quantity: characters,
      unit: "characters",
      rate: price.perMillionCharacters,
      per: 1_000_000,
    });
  }
  for (const [tool, calls] of Object.entries(usage.toolCalls ?? {})) {
    if (calls <= 0) continue;
    const perCall = price.toolCalls.get(tool as Tool);
    const perRequest = price.toolRequests.get(tool as Tool);
    if (perCall !== undefined) {
      lines.push({
        dimension: `tool_calls.${tool}`,
        quantity: calls,
        unit: "calls",
        rate: perCall,
        per: 1000,
      });
    } else if (perRequest !== undefined) {
      lines.push({
        dimension: `tool_requests.${tool}`,
        quantity: 1,
        unit: "requests",
        rate: perRequest,
        per: 1000,
      });
    } else {
      unpriced.push(`tool_calls.${tool}`);
    }
  }
}

/** The priced tier a response named; undefined for the standard rates (an unpriced tier is noted). */
function tierOf(
  price: ModelPrice,
  reported: string | undefined,
  unpriced: string[],
): ServiceTier | undefined {
  if (reported === undefined || price.vendor === "groq" || STANDARD_TIERS.has(reported)) return undefined;
  const tier = TIER_ALIASES[reported];
  if (tier === undefined || !price.serviceTiers.has(tier)) {
    unpriced.push(`service_tier.${reported}`);
    return undefined;
  }
  return tier;
}

function scaledAmount(line: Priced): bigint {
  return (big(line.quantity) * line.rate * SCALE) / big(line.per);
}

function ratioText(ratio: Ratio): string {
  return formatNanos((ratio.num * NANOS_PER_USD) / ratio.den);
}

/** Non-token units a request will produce, for sizing a hold. */
export interface HoldUnits {
  images?: number;
  audioSeconds?: number;
  speechCharacters?: number;
}

/**
 * The most a call can cost, for the credit hold taken before forwarding: every input token at the
 * dearest input rate (plain, cached or cache write) and every output token at the dearer of output
 * and reasoning, with `maxOutputTokens` falling back to the model's output cap. The tier follows the
 * estimate: an estimate under the long-context threshold holds at the base rates.
 */
export function maxCostMicros(
  price: ModelPrice,
  estimatedInputTokens: number,
  maxOutputTokens?: number,
  units: HoldUnits = {},
): number {
  const outputTokens = maxOutputTokens ?? price.maxOutputTokens ?? 0;
  checkCount("estimatedInputTokens", estimatedInputTokens);
  checkCount("maxOutputTokens", outputTokens);
  checkCount("images", units.images ?? 0);
  checkCount("speechCharacters", units.speechCharacters ?? 0);
  checkSeconds(units.audioSeconds ?? 0);
  const rates = ratesFor(price, estimatedInputTokens);
  const tokenNanos =
    big(estimatedInputTokens) * max(rates.input, rates.cachedInput, rates.cacheWrite) +
    big(outputTokens) * max(rates.output, rates.reasoning);
  const scaled =
    tokenNanos * PER_MILLION +
    imagesScaled(price, units.images ?? 0, undefined) +
    audioScaled(price, units.audioSeconds ?? 0) +
    big(units.speechCharacters ?? 0) * (price.perMillionCharacters ?? 0n) * PER_MILLION;
  return toMicros(scaled, price.markup);
}

function ratesFor(price: ModelPrice, inputTokens: number): TokenRates {
  return isLongContext(price, inputTokens) && price.longContext ? price.longContext.tokens : price.tokens;
}

function isLongContext(price: ModelPrice, inputTokens: number): boolean {
  return price.longContext !== undefined && inputTokens > price.longContext.aboveInputTokens;
}

function imagesScaled(price: ModelPrice, images: number, variant: string | undefined): bigint {
  if (images === 0 || !price.perImage) return 0n;
  return big(images) * imagePrice(price.perImage, variant) * SCALE;
}

/** The variant's price, or the dearest when the variant is unknown. */
function imagePrice(perImage: ReadonlyMap<string, bigint>, variant: string | undefined): bigint {
  return (variant !== undefined ? perImage.get(variant) : undefined) ?? max(...perImage.values());
}

function audioScaled(price: ModelPrice, seconds: number): bigint {
  if (seconds === 0 || !price.audio) return 0n;
  const billed = Math.max(Math.ceil(seconds), price.audio.minimumSeconds);
  return big(billed) * price.audio.nanos * PER_AUDIO_UNIT[price.audio.per];
}

/**
 * Whole micro-USD per line that sum to the total's single rounding up: each line's exact amount times
 * `ratio` rounded down, then one more to each of the lines with the largest remainders (earlier first
 * on a tie) until the total is reached.
 */
function shares(amounts: readonly bigint[], ratio: Ratio): number[] {
  const unit = SCALE * NANOS_PER_MICRO * ratio.den;
  const exact = amounts.map((amount) => amount * ratio.num);
  const floors = exact.map((value) => value / unit);
  const total = ceilDiv(
    exact.reduce((sum, value) => sum + value, 0n),
    unit,
  );
  let left = total - floors.reduce((sum, value) => sum + value, 0n);
  const order = exact
    .map((value, index) => ({ index, remainder: value % unit }))
    .filter((line) => line.remainder > 0n)
    .sort((a, b) => (a.remainder === b.remainder ? a.index - b.index : a.remainder > b.remainder ? -1 : 1));
  for (const line of order) {
    if (left <= 0n) break;
    floors[line.index] = (floors[line.index] ?? 0n) + 1n;
    left -= 1n;
  }
  return floors.map(Number);
}

function toMicros(scaled: bigint, markup: Ratio): number {
  return Number(ceilDiv(scaled * markup.num, SCALE * NANOS_PER_MICRO * markup.den));
}

function checkUsage(usage: Usage): void {
  for (const field of [
    "inputTokens",
    "outputTokens",
    "cachedInputTokens",
    "cacheWriteTokens",
    "reasoningTokens",
  ] as const) {
    checkCount(field, usage[field]);
  }
  checkCount("images", usage.images ?? 0);
  checkCount("speechCharacters", usage.speechCharacters ?? 0);
  checkSeconds(usage.audioSeconds ?? 0);
  for (const field of [
    "cacheWrite1hTokens",
    "audioInputTokens",
    "imageInputTokens",
    "audioOutputTokens",
  ] as const) {
    checkCount(field, usage[field] ?? 0);
  }
  for (const [tool, calls] of Object.entries(usage.toolCalls ?? {})) checkCount(`toolCalls.${tool}`, calls);
  if (usage.cachedInputTokens + usage.cacheWriteTokens > usage.inputTokens) {
    throw new RangeError("usage: cachedInputTokens + cacheWriteTokens exceed inputTokens");
  }
  if (usage.reasoningTokens > usage.outputTokens) {
    throw new RangeError("usage: reasoningTokens exceed outputTokens");
  }
}

function checkCount(field: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${field} must be a non-negative integer, got ${value}`);
  }
}

function checkSeconds(value: number): void {
  if (!Number.isFinite(value) || value < 0 || value > Number.MAX_SAFE_INTEGER) {
    throw new RangeError(`audioSeconds must be a non-negative number, got ${value}`);
  }
}

const big = (value: number) => BigInt(value);

function max(...values: bigint[]): bigint {
  let largest = 0n;
  for (const value of values) if (value > largest) largest = value;
  return largest;
}
