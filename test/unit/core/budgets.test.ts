import { describe, expect, it } from "vitest";
import {
  type Budget,
  budgetExceededError,
  budgetHeaders,
  budgetsFor,
  CLOSED_WINDOW_KEPT_MS,
  counterExpiry,
  counterId,
  modelAllowed,
  newBudget,
  parseModels,
  projectOfBudget,
  tpmCounterId,
  tpmShardCount,
  tpmShardLimit,
  tpmSpan,
  unmatchedModelPatterns,
  validateTpm,
  windowSpan,
} from "../../../lambda/core/budgets";
import { ApiError } from "../../../lambda/core/errors";

const at = Date.UTC(2026, 10, 30, 23, 59, 59, 999); // the last millisecond of November 2026

describe("budget windows", () => {
  it("are UTC calendar days and months, part of the counter's key, and roll over at the boundary", () => {
    expect(windowSpan("day", at)).toEqual({ id: "d2026-11-30", resetsAt: Date.UTC(2026, 11, 1) });
    expect(windowSpan("day", at + 1)).toEqual({ id: "d2026-12-01", resetsAt: Date.UTC(2026, 11, 2) });
    expect(windowSpan("month", at)).toEqual({ id: "m2026-11", resetsAt: Date.UTC(2026, 11, 1) });
    expect(windowSpan("month", Date.UTC(2026, 11, 31, 12))).toEqual({
      id: "m2026-12",
      resetsAt: Date.UTC(2027, 0, 1),
    });
    expect(windowSpan("total", at)).toEqual({ id: "total", resetsAt: undefined });
    expect(tpmSpan(Date.UTC(2026, 0, 1, 0, 0, 30))).toEqual({
      id: `t${Date.UTC(2026, 0, 1) / 60_000}`,
      resetsAt: Date.UTC(2026, 0, 1, 0, 1),
    });
    const budget = newBudget({ projectId: "acme", usd: "20", window: "day" }, at);
    expect(counterId(budget, windowSpan("day", at), null)).not.toBe(
      counterId(budget, windowSpan("day", at + 1), null),
    );
  });

  it("keep a total window's counter for good, a closed day or month window's 90 days, a TPM minute's an hour", () => {
    const budget = newBudget({ projectId: "acme", usd: "20", window: "day" }, at);
    const day = windowSpan("day", at);
    expect(counterExpiry(counterId(budget, day, null))).toBe((day.resetsAt ?? 0) + CLOSED_WINDOW_KEPT_MS);
    const month = windowSpan("month", at);
    expect(counterExpiry(counterId(budget, month, "alice"))).toBe(
      (month.resetsAt ?? 0) + CLOSED_WINDOW_KEPT_MS,
    );
    expect(counterExpiry(counterId(budget, windowSpan("total", at), null))).toBeUndefined();
    const minute = tpmSpan(at);
    expect(counterExpiry(tpmCounterId("key_1", minute))).toBe(Date.UTC(2026, 11, 1) + 3_600_000);
    expect(counterExpiry(tpmCounterId("key_1", minute, 7))).toBe(Date.UTC(2026, 11, 1) + 3_600_000);
  });

  it("split a TPM minute in one counter per million tokens of the limit, up to the host's most, parts summing to the limit", () => {
    expect(tpmShardCount(999_999, 16)).toBe(1);
    expect(tpmShardCount(5_500_000, 16)).toBe(5);
    expect(tpmShardCount(100_000_000, 16)).toBe(16);
    expect(tpmShardCount(100_000_000, 1)).toBe(1);
    const limit = 10_000_003;
    const count = tpmShardCount(limit, 16);
    const parts = Array.from({ length: count }, (_, k) => tpmShardLimit(limit, count, k));
    expect(parts.reduce((sum, p) => sum + p, 0)).toBe(limit);
    expect(Math.max(...parts) - Math.min(...parts)).toBeLessThanOrEqual(1);
    expect(tpmCounterId("key_1", tpmSpan(at), 3)).toBe(`${tpmCounterId("key_1", tpmSpan(at))}#s3`);
  });

  it("count each end user apart under a budget of each user, with the user id hashed", () => {
    const each = newBudget({ projectId: "acme", userId: "*", usd: "1", window: "month" }, at);
    const span = windowSpan("month", at);
    const alice = counterId(each, span, "alice");
    expect(alice).not.toBe(counterId(each, span, "bob"));
    expect(alice).not.toContain("alice");
  });
});

describe("which budgets count a call", () => {
  const mk = (input: Partial<Parameters<typeof newBudget>[0]>) =>
    newBudget({ projectId: "acme", usd: "5", window: "day", ...input }, at);
  const project = mk({});
  const key = mk({ keyId: "k".repeat(16) });
  const alice = mk({ userId: "alice" });
  const eachUser = mk({ userId: "*" });
  const byok = mk({ window: "month", includeByok: true });
  const all: Budget[] = [project, key, alice, eachUser, byok];

  it("project, the call's key, the call's end user; BYOK only with include-byok", () => {
    expect(budgetsFor(all, { keyId: "k".repeat(16), userId: "alice", managed: true })).toEqual(all);
    expect(budgetsFor(all, { keyId: "x".repeat(16), userId: null, managed: true })).toEqual([project, byok]);
    expect(budgetsFor(all, { keyId: "x".repeat(16), userId: "bob", managed: true })).toEqual([
      project,
      eachUser,
      byok,
    ]);
    expect(budgetsFor(all, { keyId: "k".repeat(16), userId: "alice", managed: false })).toEqual([byok]);
  });
});

describe("bad budgets", () => {
  const refuse = (input: Partial<Parameters<typeof newBudget>[0]>, message: RegExp) => {
    let caught: unknown;
    try {
      newBudget({ projectId: "acme", usd: "5", window: "day", ...input }, at);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ApiError);
    expect((caught as ApiError).toBody().error).toMatchObject({
      type: "invalid_request_error",
      code: "invalid_field",
      message: expect.stringMatching(message),
    });
  };

  it.each([
    ["0", /limit must be more than \$0/],
    ["0.000000", /limit must be more than \$0/],
    ["-5", /limit must be more than \$0/],
    ["five", /US dollars/],
    ["1.0000001", /US dollars/],
    ["1000001", /at most \$1000000/],
  ])("refuses the limit %s", (usd, message) => refuse({ usd }, message));

  it("refuses an unknown window, both a key and a user, and malformed subjects", () => {
    refuse({ window: "week" }, /'window': must be one of day, month, total/);
    refuse({ keyId: "a".repeat(16), userId: "bob" }, /give a key or a user, not both/);
    refuse({ keyId: "not-a-key" }, /is not a key id/);
    refuse({ userId: "" }, /'user'/);
    refuse({ userId: "tab\there" }, /'user'/);
  });

  it("names its project in its id", () => {
    const budget = newBudget({ projectId: "acme-2", usd: "5", window: "day" }, at);
    expect(projectOfBudget(budget.budgetId)).toBe("acme-2");
    expect(projectOfBudget("nonsense")).toBeUndefined();
  });
});

describe("the refusal and the headers", () => {
  it("402 budget_exceeded names scope, window, limit, what is left and the reset", () => {
    const budget = newBudget({ projectId: "acme", keyId: "k".repeat(16), usd: "20", window: "day" }, at);
    const error = budgetExceededError(budget, windowSpan("day", at), 1_500_000, 250_000);
    expect(error.status).toBe(402);
    expect(error.toBody().error).toEqual({
      type: "billing_error",
      code: "budget_exceeded",
      message:
        `Budget exceeded: this request may cost up to $1.50 and key ${"k".repeat(16)}'s daily budget of ` +
        "$20.00 has $0.25 left. It resets at 2026-12-01T00:00:00.000Z.",
    });
    expect(error.headers).toEqual({
      "X-Budget-Remaining-USD": "0.25",
      "X-Budget-Reset": String(Date.UTC(2026, 11, 1) / 1000),
    });
    expect(budgetHeaders(-5, windowSpan("total", at))).toEqual({ "X-Budget-Remaining-USD": "0.00" });
  });

  it("names the key by its name beside its id when the name is known", () => {
    const budget = newBudget({ projectId: "acme", keyId: "k".repeat(16), usd: "20", window: "day" }, at);
    const error = budgetExceededError(budget, windowSpan("day", at), 1_500_000, 250_000, 'batch "nightly"');
    expect(error.message).toContain(`key ${"k".repeat(16)} ("batch \\"nightly\\"")'s daily budget of $20.00`);
  });
});

describe("key policies", () => {
  it("model globs match names and Gemini's models/ paths", () => {
    const patterns = parseModels("gpt-4o*, claude-3-5-*,gemini-2.0-flash");
    expect(patterns).toEqual(["gpt-4o*", "claude-3-5-*", "gemini-2.0-flash"]);
    expect(modelAllowed(patterns, "gpt-4o-mini")).toBe(true);
    expect(modelAllowed(patterns, "models/gemini-2.0-flash")).toBe(true);
    expect(modelAllowed(patterns, "gpt-3.5-turbo")).toBe(false);
    expect(modelAllowed(undefined, "anything")).toBe(true);
    expect(unmatchedModelPatterns(patterns, ["gpt-4o-mini", "gemini-2.0-flash"])).toEqual(["claude-3-5-*"]);
  });

  it("refuses empty or malformed model lists and a TPM outside 1 to the cap", () => {
    expect(() => parseModels("")).toThrow(/Invalid field 'models'/);
    expect(() => parseModels("gpt-4o,,x")).toThrow(/Invalid field 'models'/);
    expect(() => parseModels("gpt 4o")).toThrow(/is not a model name or glob/);
    expect(() => validateTpm(0)).toThrow(/'tpm': must be a whole number from 1 to 100000000/);
    expect(() => validateTpm(100_000_001)).toThrow(/'tpm'/);
    expect(() => validateTpm(1.5)).toThrow(/'tpm'/);
    expect(() => validateTpm(100_000_000)).not.toThrow();
  });
});
