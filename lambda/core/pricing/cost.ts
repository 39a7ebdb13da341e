import type { Usage } from "../usage";
import type { ModelPrice, TokenRates } from "./catalogue";
import { ceilDiv } from "./decimal";

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

/**
 * The cost of a call. `usage` follows `lambda/core/usage.ts`: totals with subsets, so uncached input
 * is input − cached − cache writes, and reasoning is part of output. A request whose input exceeds
 * the model's long-context threshold is priced wholly at the long-context rates. Per-image prices
 * use `imageVariant`, or the dearest variant when it is unknown. Audio is billed in whole seconds
 * (rounded up) with the vendor's per-request minimum. Throws RangeError on impossible usage.
 */
export function costMicros(usage: Usage, price: ModelPrice, options: CostOptions = {}): number {
  checkUsage(usage);
  const rates = ratesFor(price, usage.inputTokens);
  const uncached = usage.inputTokens - usage.cachedInputTokens - usage.cacheWriteTokens;
  const visibleOutput = usage.outputTokens - usage.reasoningTokens;
  const tokenNanos =
    big(uncached) * rates.input +
    big(usage.cachedInputTokens) * rates.cachedInput +
    big(usage.cacheWriteTokens) * rates.cacheWrite +
    big(visibleOutput) * rates.output +
    big(usage.reasoningTokens) * rates.reasoning;
  const scaled =
    tokenNanos * PER_MILLION +
    imagesScaled(price, usage.images ?? 0, options.imageVariant) +
    audioScaled(price, usage.audioSeconds ?? 0) +
    big(usage.speechCharacters ?? 0) * (price.perMillionCharacters ?? 0n) * PER_MILLION;
  return toMicros(scaled, price, options.applyMarkup ?? true);
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
  return toMicros(scaled, price, true);
}

function ratesFor(price: ModelPrice, inputTokens: number): TokenRates {
  const long = price.longContext;
  return long && inputTokens > long.aboveInputTokens ? long.tokens : price.tokens;
}

function imagesScaled(price: ModelPrice, images: number, variant: string | undefined): bigint {
  if (images === 0 || !price.perImage) return 0n;
  const each =
    (variant !== undefined ? price.perImage.get(variant) : undefined) ?? max(...price.perImage.values());
  return big(images) * each * SCALE;
}

function audioScaled(price: ModelPrice, seconds: number): bigint {
  if (seconds === 0 || !price.audio) return 0n;
  const billed = Math.max(Math.ceil(seconds), price.audio.minimumSeconds);
  return big(billed) * price.audio.nanos * PER_AUDIO_UNIT[price.audio.per];
}

function toMicros(scaled: bigint, price: ModelPrice, applyMarkup: boolean): number {
  const { num, den } = applyMarkup ? price.markup : { num: 1n, den: 1n };
  return Number(ceilDiv(scaled * num, SCALE * NANOS_PER_MICRO * den));
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
