import { describe, expect, it } from "vitest";
import {
  BREAKDOWN_LINES,
  type BreakdownRow,
  breakdownDeltaOf,
  breakdownKeysOf,
  breakdownRange,
  breakdownReport,
  breakdownRowId,
  parseBreakdownQuery,
} from "../../../lambda/core/breakdowns";
import { ApiError } from "../../../lambda/core/errors";
import { statusClass } from "../../../lambda/core/interactions";
import {
  deltaOf,
  parseUsageRange,
  type Rollup,
  rollupId,
  rollupKeyOf,
  sumCounters,
  USAGE_MAX_DAYS,
  usageReport,
} from "../../../lambda/core/interactions-usage";
import { buildRecord, type InteractionRecord } from "../../../lambda/core/record";

const NOW = Date.UTC(2026, 10, 22, 15, 30);

function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

function record(overrides: Partial<InteractionRecord> = {}): InteractionRecord {
  return {
    ...buildRecord({
      store: "full",
      transactionId: "tx-1",
      projectId: "proj-a",
      keyId: "abcdefghijklmnop",
      vendor: "openai",
      endpoint: "/v1/chat/completions",
      model: "gpt-4o-mini",
      billingMode: "managed",
      statusCode: 200,
      streamed: false,
      startedAt: NOW,
      latencyMs: 120,
      usage: {
        inputTokens: 10,
        outputTokens: 20,
        cachedInputTokens: 4,
        cacheWriteTokens: 0,
        reasoningTokens: 0,
        estimated: false,
        complete: true,
      },
      costMicros: 35,
      request: { bytes: 2, text: "{}", truncated: false },
      response: { bytes: 2, text: "{}", truncated: false },
    }),
    ...overrides,
  };
}

describe("rollup arithmetic", () => {
  it("counts a failure as an error, including a stream that broke after its 200", () => {
    expect(statusClass(record())).toBe("success");
    expect(statusClass(record({ status_code: 429 }))).toBe("error");
    expect(statusClass(record({ error_type: "upstream_error" }))).toBe("error");
  });

  it("takes a record's figures, counting an unpriced call apart", () => {
    expect(deltaOf(record())).toEqual({
      requests: 1,
      errors: 0,
      refused: 0,
      input_tokens: 10,
      output_tokens: 20,
      cached_input_tokens: 4,
      cost_micros: 35,
      unpriced: 0,
      latency_ms: 120,
    });
    expect(deltaOf(record({ cost_micros: null }))).toMatchObject({ cost_micros: 0, unpriced: 1 });
  });

  it("counts the calls dmt refused apart, among the errors; a vendor's own 402 or 429 is not one", () => {
    const refused = (status_code: number, error_code: string | null) =>
      deltaOf(record({ status_code, error_code, error_type: "x" }));
    expect(refused(402, "insufficient_credits")).toMatchObject({ errors: 1, refused: 1 });
    expect(refused(402, "budget_exceeded")).toMatchObject({ errors: 1, refused: 1 });
    expect(refused(429, "rate_limit_exceeded")).toMatchObject({ errors: 1, refused: 1 });
    expect(refused(403, "model_not_allowed")).toMatchObject({ errors: 1, refused: 1 });
    expect(refused(429, null)).toMatchObject({ errors: 1, refused: 0 });
    expect(refused(500, "upstream_error")).toMatchObject({ errors: 1, refused: 0 });
    expect(breakdownDeltaOf(record({ status_code: 402, error_code: "budget_exceeded" }))).toMatchObject({
      errors: 1,
      refused: 1,
    });
  });

  it("adds counters up", () => {
    const deltas = [record(), record({ input_tokens: 7, status_code: 500 })].map(deltaOf);
    expect(sumCounters(deltas)).toMatchObject({ requests: 2, errors: 1, input_tokens: 17 });
    expect(sumCounters([])).toMatchObject({ requests: 0, cost_micros: 0 });
  });

  it("keys rollups by day, vendor, billing mode and model, with long models hashed", () => {
    expect(rollupId(rollupKeyOf(record()))).toBe("2026-11-22#openai#managed#gpt-4o-mini");
    expect(rollupId(rollupKeyOf(record({ model: null })))).toBe("2026-11-22#openai#managed#");
    const long = rollupId(rollupKeyOf(record({ model: "m".repeat(5000) })));
    expect(long).toMatch(/^2026-11-22#openai#managed#sha256:[0-9a-f]{64}$/);
  });
});

describe("the usage report", () => {
  const rollup = (overrides: Partial<Rollup>): Rollup => ({
    day: "2026-11-20",
    vendor: "openai",
    billing_mode: "managed",
    model: "gpt-4o-mini",
    ...sumCounters([deltaOf(record())]),
    ...overrides,
  });

  it("has every day of the range, zero where nothing ran, one series per vendor and model", () => {
    const report = usageReport(
      [
        rollup({}),
        rollup({ billing_mode: "byok", requests: 2, cost_micros: 70 }),
        rollup({ day: "2026-11-22", vendor: "anthropic", model: "claude-haiku-4-5", requests: 5 }),
        rollup({ day: "2026-10-01" }), // outside the range: ignored
      ],
      "2026-11-19",
      "2026-11-22",
    );
    expect(report.days).toEqual(["2026-11-19", "2026-11-20", "2026-11-21", "2026-11-22"]);
    // Dearest first: OpenAI's 3 calls cost more than Anthropic's 5.
    expect(report.series.map((s) => [s.vendor, s.model, s.requests])).toEqual([
      ["openai", "gpt-4o-mini", [0, 3, 0, 0]],
      ["anthropic", "claude-haiku-4-5", [0, 0, 0, 5]],
    ]);
    expect(report.series[0]?.cost_micros).toEqual([0, 105, 0, 0]);
    expect(report.series[1]?.cost_micros).toEqual([0, 0, 0, 35]);
    expect(report.totals.managed.requests).toBe(6);
    expect(report.totals.byok).toMatchObject({ requests: 2, cost_micros: 70 });
    expect(report.totals.dual.requests).toBe(0);
  });

  it("reads its range: 30 days up to today by default, at most a year", () => {
    expect(parseUsageRange({}, NOW)).toEqual({ from: "2026-10-24", to: "2026-11-22" });
    expect(parseUsageRange({ from: ["2026-11-01"], to: ["2026-11-02"] }, NOW)).toEqual({
      from: "2026-11-01",
      to: "2026-11-02",
    });
    const tooLong = refusal(() => parseUsageRange({ from: ["2020-01-01"], to: ["2026-01-01"] }, NOW));
    expect(tooLong.message).toContain(`at most ${USAGE_MAX_DAYS}`);
    expect(refusal(() => parseUsageRange({ days: ["7"] }, NOW)).message).toContain("'days'");
    expect(refusal(() => parseUsageRange({ from: ["11/01/2026"] }, NOW)).status).toBe(400);
  });
});

describe("usage by key and by user", () => {
  it("counts a call for its key, and for its user when it names one; managed cost is what was charged", () => {
    const managed = record({ user_id: "u-1" });
    expect(breakdownKeysOf(managed)).toEqual([
      { dimension: "key", day: "2026-11-22", id: managed.key_id },
      { dimension: "user", day: "2026-11-22", id: "u-1" },
    ]);
    expect(breakdownKeysOf(record({ user_id: null }))).toHaveLength(1);
    expect(breakdownDeltaOf(managed)).toEqual({
      requests: 1,
      errors: 0,
      refused: 0,
      input_tokens: 10,
      output_tokens: 20,
      cost_micros: 35,
      charged_micros: 35,
    });
    expect(breakdownDeltaOf(record({ billing_mode: "byok", status_code: 500 }))).toMatchObject({
      errors: 1,
      cost_micros: 35,
      charged_micros: 0,
    });
  });

  it("keeps every row of a day inside the day's range, whatever the id, and no user id passes for a deleted user", () => {
    const { low, high } = breakdownRange("user", "2026-11-22", "2026-11-22");
    for (const id of ["a", "~~~", "\u{10FFFF}", "é", "x".repeat(5000), "!deleted"]) {
      const rowId = breakdownRowId({ dimension: "user", day: "2026-11-22", id });
      expect(rowId >= low && rowId <= high, id).toBe(true);
      expect(rowId.startsWith("u#2026-11-22#=")).toBe(true);
    }
    expect(breakdownRowId({ dimension: "user", day: "2026-11-22", id: null }, "r1")).toBe("u#2026-11-22#!r1");
    expect(breakdownRowId({ dimension: "user", day: "2026-11-23", id: "" }) > high).toBe(true);
  });

  it("sums each id over the days, deleted users as one line, dearest first, the rest as other", () => {
    const row = (id: string | null, day: string, cost: number): BreakdownRow => ({
      dimension: "user",
      day,
      id,
      requests: 1,
      errors: 0,
      refused: 0,
      input_tokens: 1,
      output_tokens: 1,
      cost_micros: cost,
      charged_micros: cost,
    });
    const report = breakdownReport(
      [
        row("a", "2026-11-21", 5),
        row("b", "2026-11-22", 7),
        row("a", "2026-11-22", 5),
        row(null, "2026-11-21", 1),
        row(null, "2026-11-22", 2),
        row("c", "2026-11-30", 99),
      ],
      "user",
      "2026-11-21",
      "2026-11-22",
    );
    expect(report.lines.map((l) => [l.id, l.deleted, l.cost_micros, l.requests])).toEqual([
      ["a", false, 10, 2],
      ["b", false, 7, 1],
      [null, true, 3, 2],
    ]);
    expect(report.totals.cost_micros).toBe(20);
    expect(report.other).toBeUndefined();

    const many = Array.from({ length: BREAKDOWN_LINES + 3 }, (_, i) => row(`u${i}`, "2026-11-22", i + 1));
    const capped = breakdownReport(many, "user", "2026-11-22", "2026-11-22");
    expect(capped.lines).toHaveLength(BREAKDOWN_LINES);
    expect(capped.other).toMatchObject({ count: 3, cost_micros: 1 + 2 + 3, requests: 3 });
    expect(capped.totals.requests).toBe(BREAKDOWN_LINES + 3);
  });

  it("refuses a query it cannot answer with a 400 naming the parameter", () => {
    const q = (params: Record<string, string[]>) => parseBreakdownQuery(params, NOW);
    expect(q({ by: ["key"] })).toEqual({ by: "key", from: "2026-10-24", to: "2026-11-22" });
    for (const [params, field] of [
      [{}, "by"],
      [{ by: ["model"] }, "by"],
      [{ by: ["key", "user"] }, "by"],
      [{ by: ["key"], sort: ["cost"] }, "sort"],
      [{ by: ["key"], from: ["2026-11-31"] }, "from"],
      [{ by: ["user"], from: ["2026-11-22"], to: ["2026-11-01"] }, "from"],
    ] as const) {
      let thrown: unknown;
      try {
        q(params as unknown as Record<string, string[]>);
      } catch (err) {
        thrown = err;
      }
      expect(thrown, JSON.stringify(params)).toBeInstanceOf(ApiError);
      expect((thrown as ApiError).status).toBe(400);
      expect((thrown as ApiError).message).toContain(`'${field}'`);
    }
  });
});
