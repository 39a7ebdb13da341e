/**
 * Exact decimal money. Prices are read as decimal text ("0.075", or a JSON number, whose shortest
 * round-trip text is the literal that was written) and held as integer nano-USD in a bigint, so no
 * price ever passes through binary floating point.
 */

/** Nano-USD per USD: prices keep up to 9 decimal places. */
export const NANOS_PER_USD = 1_000_000_000n;

const DECIMAL = /^(\d{1,6})(?:\.(\d{1,9}))?$/;

/** The canonical decimal text of a JSON price value, or undefined when it is not a plain decimal. */
export function decimalText(value: unknown): string | undefined {
  const text = typeof value === "number" ? String(value) : value;
  if (typeof text !== "string" || !DECIMAL.test(text)) return undefined;
  return text;
}

/** "2.50" -> 2_500_000_000n (nano-USD). The text must already satisfy `decimalText`. */
export function parseNanos(text: string): bigint {
  const match = DECIMAL.exec(text);
  if (!match) throw new RangeError(`not a decimal amount: ${text}`);
  const [, whole = "0", fraction = ""] = match;
  return BigInt(whole) * NANOS_PER_USD + BigInt(fraction.padEnd(9, "0"));
}

/** 2_500_000_000n -> "2.5": the shortest exact decimal text of a nano-USD amount. */
export function formatNanos(nanos: bigint): string {
  const whole = nanos / NANOS_PER_USD;
  const fraction = (nanos % NANOS_PER_USD).toString().padStart(9, "0").replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole.toString();
}

/** An exact positive ratio, e.g. a markup of 1.1 as 11/10. */
export interface Ratio {
  num: bigint;
  den: bigint;
}

export const ONE: Ratio = { num: 1n, den: 1n };

/** 1.1 -> 11/10 exactly (via the number's shortest decimal text). */
export function ratioOf(value: number): Ratio | undefined {
  const text = decimalText(value);
  if (text === undefined) return undefined;
  const fraction = text.split(".")[1] ?? "";
  return { num: BigInt(text.replace(".", "")), den: 10n ** BigInt(fraction.length) };
}

/** Integer division rounding up, for non-negative operands. */
export function ceilDiv(num: bigint, den: bigint): bigint {
  return (num + den - 1n) / den;
}
