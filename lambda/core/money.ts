/**
 * How money is written, everywhere: the dashboard, the CLI, the API's messages and the exports. Amounts
 * are integer micro-USD; they are written in dollars, never as a float on the way.
 * - Summaries (totals, balances, spend per day, model, key or user) to the cent: `formatCents`.
 * - One call's amount to the micro-dollar, without a tail of zeros: `formatUsd`.
 * - Machines (exports, headers, events) get the same figure without the `$`: `decimalUsd`.
 * No imports: the dashboard's bundle uses it too.
 */

const MICROS_PER_USD = 1_000_000;
/** Half a cent: amounts from here round to the next cent. */
const HALF_CENT = 5_000;

/**
 * Micro-USD as a summary shows it, to the cent: `$5.10`, `-$0.06`, `$1,234.50`. Half a cent rounds away
 * from zero; an amount under half a cent that is not zero shows as `<$0.01` rather than `$0.00`.
 */
export function formatCents(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  if (abs > 0 && abs < HALF_CENT) return `${sign}<$0.01`;
  const cents = Math.floor((abs + HALF_CENT) / 10_000);
  const whole = Math.floor(cents / 100).toLocaleString("en-US");
  return `${sign}$${whole}.${String(cents % 100).padStart(2, "0")}`;
}

/**
 * Micro-USD as one call's amount: exact, with two decimals at least and six at most, so trailing zeros
 * stop at the cent: `$12.50`, `$0.0021`, `$0.000125`.
 */
export function formatUsd(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  const fraction = String(abs % MICROS_PER_USD)
    .padStart(6, "0")
    .replace(/0{1,4}$/, "");
  return `${sign}$${Math.floor(abs / MICROS_PER_USD)}.${fraction}`;
}

/** `12.50`, `0.000001`: `formatUsd` without the `$`, the decimal string exports, headers and events carry. */
export function decimalUsd(micros: number): string {
  return formatUsd(micros).replace("$", "");
}

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?$/;

/**
 * A decimal amount of micro-USD (a price line's exact amount, `"12.5"`) as dollars, every digit kept:
 * `$0.0000125`. Text that is not a decimal is returned as it came.
 */
export function formatMicrosText(text: string): string {
  const match = DECIMAL.exec(text);
  if (!match) return text;
  const [, sign = "", whole = "0", fraction = ""] = match;
  const digits = whole.padStart(7, "0");
  const dollars = digits.slice(0, -6).replace(/^0+(?=\d)/, "");
  const decimals = `${digits.slice(-6)}${fraction}`.replace(/0+$/, "").padEnd(2, "0");
  return `${sign}$${dollars}.${decimals}`;
}

/** A decimal dollar amount as the API writes it (`"0.81717"`, `"5.00"`) in micro-USD, exactly. */
export function decimalMicros(usd: string): number {
  const match = DECIMAL.exec(usd.trim());
  if (!match) return Number.NaN;
  const [, sign, whole = "0", fraction = ""] = match;
  const micros = Number(whole) * MICROS_PER_USD + Number(fraction.slice(0, 6).padEnd(6, "0"));
  return sign === "-" ? -micros : micros;
}
