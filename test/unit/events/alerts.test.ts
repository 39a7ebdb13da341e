import { describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import { budgetThresholdsRule, lowBalanceRule } from "../../../lambda/events/alerts";

function refusal(fn: () => unknown): { status: number; code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return { status: err.status, code: err.code, message: err.message };
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("low-balance rules", () => {
  it("takes an amount in dollars and refuses negative or malformed ones", () => {
    expect(lowBalanceRule("acme", "12.50", 0)).toMatchObject({ thresholdMicros: 12_500_000, armed: true });
    expect(refusal(() => lowBalanceRule("acme", "-5", 0))).toMatchObject({
      status: 400,
      code: "invalid_field",
      message: expect.stringContaining("must not be negative"),
    });
    expect(refusal(() => lowBalanceRule("acme", "five", 0)).code).toBe("invalid_field");
  });
});

describe("budget-threshold rules", () => {
  it("takes distinct whole percentages from 1 to 100, sorted", () => {
    expect(budgetThresholdsRule("acme", "100, 50,80", 0)).toMatchObject({
      ruleId: "budget-thresholds",
      kind: "budget_thresholds",
      thresholds: [50, 80, 100],
    });
    expect(budgetThresholdsRule("acme", "1", 0).thresholds).toEqual([1]);
  });

  it("refuses empty lists, non-integers, out-of-range values and duplicates, naming the field", () => {
    for (const [text, why] of [
      ["", "comma-separated whole percentages"],
      ["50,,80", "comma-separated whole percentages"],
      ["50.5", "'50.5' is not a whole percentage from 1 to 100"],
      ["0,50", "'0' is not a whole percentage"],
      ["101", "'101' is not a whole percentage"],
      ["-10", "'-10' is not a whole percentage"],
      ["half", "'half' is not a whole percentage"],
      ["50,80,50", "50 is given twice"],
      ["1,2,3,4,5,6,7,8,9,10,11", "at most 10"],
    ] as const) {
      const refused = refusal(() => budgetThresholdsRule("acme", text, 0));
      expect(refused).toMatchObject({ status: 400, code: "invalid_field" });
      expect(refused.message).toContain("budget_thresholds");
      expect(refused.message).toContain(why);
    }
  });
});
