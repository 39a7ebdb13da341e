import { describe, expect, it } from "vitest";
import {
  formatUsd,
  insufficientCreditsError,
  MAX_GRANT_MICROS,
  newHoldId,
  parseUsd,
  validateGrant,
  validateHold,
} from "../../../lambda/core/credits";
import { ApiError } from "../../../lambda/core/errors";

function apiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected an ApiError");
}

describe("parseUsd", () => {
  it.each([
    ["25", 25_000_000],
    ["12.50", 12_500_000],
    ["0.000001", 1],
    ["0.1", 100_000],
    ["1000000", MAX_GRANT_MICROS],
    ["007", 7_000_000],
  ])("reads %s exactly as %i micros", (text, micros) => {
    expect(parseUsd(text)).toBe(micros);
  });

  it.each([
    ["abc", "like 25 or 12.50"],
    ["12abc", "like 25 or 12.50"],
    ["1e3", "like 25 or 12.50"],
    ["NaN", "like 25 or 12.50"],
    ["Infinity", "like 25 or 12.50"],
    [" 5", "like 25 or 12.50"],
    ["5 ", "like 25 or 12.50"],
    ["", "like 25 or 12.50"],
    ["1.", "like 25 or 12.50"],
    [".5", "like 25 or 12.50"],
    ["0.0000001", "like 25 or 12.50"],
    ["1,000", "like 25 or 12.50"],
    ["-5", "must be a positive amount"],
    ["-0.01", "must be a positive amount"],
    ["0", "more than $0"],
    ["0.000000", "more than $0"],
    ["1000000.000001", "at most $1000000.00"],
    ["99999999999999999999999", "at most $1000000.00"],
    ["9".repeat(400), "at most $1000000.00"],
  ])("refuses %j with 400 (%s)", (text, why) => {
    const err = apiError(() => parseUsd(text));
    expect(err.status).toBe(400);
    expect(err.code).toBe("invalid_field");
    expect(err.message).toContain("'usd'");
    expect(err.message).toContain(why);
  });
});

describe("formatUsd", () => {
  it.each([
    [0, "$0.00"],
    [1, "$0.000001"],
    [12_500_000, "$12.50"],
    [1_234_500, "$1.2345"],
    [1_000_000, "$1.00"],
    [-2_500_000, "-$2.50"],
    [MAX_GRANT_MICROS, "$1000000.00"],
  ])("formats %i as %s", (micros, text) => {
    expect(formatUsd(micros)).toBe(text);
  });
});

describe("validateGrant", () => {
  it("accepts a whole micro amount with a source and an optional note", () => {
    expect(() => validateGrant(1, "cli", undefined)).not.toThrow();
    expect(() => validateGrant(MAX_GRANT_MICROS, "stripe_webhook", "invoice 42")).not.toThrow();
  });

  it.each([
    [0, "amount"],
    [-1, "amount"],
    [1.5, "amount"],
    [Number.NaN, "amount"],
    [Number.POSITIVE_INFINITY, "amount"],
    [MAX_GRANT_MICROS + 1, "amount"],
    [2 ** 60, "amount"],
  ])("refuses the amount %d", (micros, field) => {
    const err = apiError(() => validateGrant(micros, "cli", undefined));
    expect(err.status).toBe(400);
    expect(err.message).toContain(`'${field}'`);
  });

  it("refuses a bad source or note", () => {
    expect(apiError(() => validateGrant(1, "", undefined)).message).toContain("'source'");
    expect(apiError(() => validateGrant(1, "CLI", undefined)).message).toContain("'source'");
    expect(apiError(() => validateGrant(1, "cli", "a\nb")).message).toContain("control characters");
    expect(apiError(() => validateGrant(1, "cli", "x".repeat(501))).message).toContain("at most 500");
  });
});

describe("validateHold", () => {
  const now = 1_700_000_000_000;
  it("accepts a fresh hold id, a positive amount and a future expiry", () => {
    expect(() => validateHold(newHoldId(), 1, now + 1, now)).not.toThrow();
  });

  it("refuses a bad id, amount or expiry", () => {
    expect(apiError(() => validateHold("short", 1, now + 1, now)).message).toContain("'holdId'");
    expect(apiError(() => validateHold("has space in it", 1, now + 1, now)).message).toContain("'holdId'");
    expect(apiError(() => validateHold(newHoldId(), 0, now + 1, now)).message).toContain("'micros'");
    expect(apiError(() => validateHold(newHoldId(), 0.5, now + 1, now)).message).toContain("'micros'");
    expect(apiError(() => validateHold(newHoldId(), 1, now, now)).message).toContain("'expiresAt'");
  });

  it("makes hold ids that do not repeat", () => {
    const ids = new Set(Array.from({ length: 1000 }, () => newHoldId()));
    expect(ids.size).toBe(1000);
  });
});

describe("insufficientCreditsError", () => {
  it("is the spec's 402 and names both amounts", () => {
    const err = insufficientCreditsError(2_500_000, 1_000_000);
    expect(err.status).toBe(402);
    expect(err.toBody()).toEqual({
      error: {
        type: "billing_error",
        code: "insufficient_credits",
        message:
          "Insufficient credits: this request may cost up to $2.50 and the project's available balance is $1.00.",
      },
    });
  });
});
