import { describe, expect, it } from "vitest";
import { decimalMicros, decimalUsd, formatMicrosText, formatUsd } from "../../../lambda/core/money";

/** lambda/core/money.ts: the one way money is written (formatCents is tested with the statement). */

describe("formatUsd: one call's amount", () => {
  it.each([
    [0, "$0.00"],
    [125, "$0.000125"],
    [5, "$0.000005"],
    [2_100, "$0.0021"],
    [1_500_000, "$1.50"],
    [12_345_678, "$12.345678"],
    [-125, "-$0.000125"],
  ])("shows %i micros as %s: exact, no tail of zeros past the cent", (micros, text) => {
    expect(formatUsd(micros)).toBe(text);
    expect(decimalUsd(micros)).toBe(text.replace("$", ""));
  });
});

describe("formatMicrosText: a price line's exact amount", () => {
  it.each([
    ["12.5", "$0.0000125"],
    ["1500000", "$1.50"],
    ["0", "$0.00"],
    ["123456789.000001", "$123.456789000001"],
    ["-3", "-$0.000003"],
    ["n/a", "n/a"],
  ])("shows %s micros as %s", (text, shown) => {
    expect(formatMicrosText(text)).toBe(shown);
  });
});

describe("decimalMicros: the API's dollar strings", () => {
  it.each([
    ["0.81717", 817_170],
    ["5.00", 5_000_000],
    ["0.000001", 1],
    ["20", 20_000_000],
  ])("reads %s as %i micros", (usd, micros) => {
    expect(decimalMicros(usd)).toBe(micros);
  });

  it("reads what is not an amount as NaN", () => {
    expect(decimalMicros("five")).toBeNaN();
  });
});
