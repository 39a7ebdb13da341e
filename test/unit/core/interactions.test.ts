import fc from "fast-check";
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
import {
  DAY_MS,
  DEFAULT_PAGE_SIZE,
  entryPosition,
  INDEX_RETENTION_DAYS,
  type InteractionListQuery,
  matchesStatus,
  parseListQuery,
  parseTransactionId,
  positionRange,
  selectsFailures,
  statusClass,
  writeCursor,
} from "../../../lambda/core/interactions";
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
const TODAY = Date.UTC(2026, 10, 22);

function refusal(run: () => unknown): ApiError {
  try {
    run();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

const list = (params: Record<string, string | string[]>, projectId = "proj-a") =>
  parseListQuery(
    projectId,
    Object.fromEntries(Object.entries(params).map(([k, v]) => [k, Array.isArray(v) ? v : [v]])),
    NOW,
  );

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

describe("the list query", () => {
  it("defaults to the index's whole window, newest first, a page of 50", () => {
    expect(list({})).toEqual({
      projectId: "proj-a",
      since: TODAY - (INDEX_RETENTION_DAYS - 1) * DAY_MS,
      until: TODAY + DAY_MS,
      filters: {},
      limit: DEFAULT_PAGE_SIZE,
    });
  });

  it("reads every filter", () => {
    const query = list({
      from: "2026-11-01",
      to: "2026-11-02",
      vendor: "anthropic",
      model: "claude-haiku-4-5",
      user_id: "<b>alice</b>",
      status: "429",
      billing_mode: "byok",
      limit: "10",
    });
    expect(query).toMatchObject({
      since: Date.UTC(2026, 10, 1),
      until: Date.UTC(2026, 10, 3),
      limit: 10,
      filters: {
        vendor: "anthropic",
        model: "claude-haiku-4-5",
        userId: "<b>alice</b>",
        status: 429,
        billingMode: "byok",
      },
    });
    expect(list({ status: "error" }).filters.status).toBe("error");
    expect(list({ status: "success" }).filters.status).toBe("success");
    for (const kind of ["credits", "budget", "rate", "policy"]) {
      expect(list({ status: kind }).filters.status).toBe(kind);
    }
  });

  it("tells the refusals apart by kind: 402 out of credits is not 402 over a budget", () => {
    const call = (status_code: number, error_code: string | null) => ({
      status_code,
      error_type: error_code === null ? null : "billing_error",
      error_code,
    });
    const credits = call(402, "insufficient_credits");
    const budget = call(402, "budget_exceeded");
    const rate = call(429, "rate_limit_exceeded");
    const endpoint = call(403, "insufficient_permissions");
    const model = call(403, "model_not_allowed");
    const vendor429 = call(429, "rate_limit_error_from_vendor");
    const ok = call(200, null);
    const kinds = ["credits", "budget", "rate", "policy"] as const;
    const kindsOf = (record: ReturnType<typeof call>) => kinds.filter((k) => matchesStatus(record, k));
    expect(kindsOf(credits)).toEqual(["credits"]);
    expect(kindsOf(budget)).toEqual(["budget"]);
    expect(kindsOf(rate)).toEqual(["rate"]);
    expect(kindsOf(endpoint)).toEqual(["policy"]);
    expect(kindsOf(model)).toEqual(["policy"]);
    expect(kindsOf(vendor429)).toEqual([]);
    expect(kindsOf(ok)).toEqual([]);
    // The classes and exact codes still select as before.
    expect(matchesStatus(budget, 402)).toBe(true);
    expect(matchesStatus(budget, "error")).toBe(true);
    expect(matchesStatus(ok, "success")).toBe(true);
    expect(matchesStatus(ok, "error")).toBe(false);
    for (const kind of kinds) expect(selectsFailures(kind)).toBe(true);
    expect(selectsFailures("success")).toBe(false);
    expect(selectsFailures(200)).toBe(false);
    expect(selectsFailures(undefined)).toBe(false);
  });

  it("cuts a range to the retention window, and keeps a range before it empty", () => {
    const earliest = TODAY - (INDEX_RETENTION_DAYS - 1) * DAY_MS;
    expect(list({ from: "2020-01-01" }).since).toBe(earliest);
    const old = list({ from: "2020-01-01", to: "2020-01-31" });
    expect(old.until).toBe(old.since);
  });

  it.each([
    [{ vendor: "openrouter" }, "vendor", "must be one of groq, openai, anthropic, gemini"],
    [{ billing_mode: "free" }, "billing_mode", "must be one of managed, byok, dual"],
    [{ status: "oops" }, "status", "must be success, error or a status code"],
    [{ status: "600" }, "status", "must be success, error or a status code"],
    [{ status: "20" }, "status", "must be success, error or a status code"],
    [{ limit: "abc" }, "limit", "must be an integer from 1 to 100"],
    [{ limit: "0" }, "limit", "must be an integer from 1 to 100"],
    [{ limit: "101" }, "limit", "must be an integer from 1 to 100"],
    [{ limit: "1e2" }, "limit", "must be an integer from 1 to 100"],
    [{ from: "yesterday" }, "from", "must be a date YYYY-MM-DD"],
    [{ to: "2026-02-30" }, "to", "is not a calendar date"],
    [{ from: "2026-11-10", to: "2026-11-01" }, "from", "2026-11-10 is after to 2026-11-01"],
    [{ model: "" }, "model", "1 to 256 characters"],
    [{ user_id: "a\nb" }, "user_id", "without control characters"],
    [{ user_id: "u".repeat(257) }, "user_id", "1 to 256 characters"],
    [{ vendor: ["openai", "groq"] }, "vendor", "must be given once"],
    [{ project: "other" }, "project", "is not a filter"],
  ])("refuses %j with a 400 naming %s", (params, field, why) => {
    const err = refusal(() => list(params));
    expect(err.status).toBe(400);
    expect(err.code).toBe("invalid_field");
    expect(err.message).toContain(`'${field}'`);
    expect(err.message).toContain(why);
  });
});

describe("cursors", () => {
  const position = entryPosition(NOW - 1000, "tx-9");
  const withCursor = (query: InteractionListQuery, cursor: string, projectId = query.projectId) =>
    list({ vendor: "openai", cursor }, projectId);

  it("take the next page from where the last one stopped", () => {
    const first = list({ vendor: "openai" });
    const cursor = writeCursor(position, first);
    expect(withCursor(first, cursor).after).toBe(position);
  });

  it("belong to one project and one query", () => {
    const first = list({ vendor: "openai" });
    const cursor = writeCursor(position, first);
    for (const run of [
      () => withCursor(first, cursor, "proj-b"),
      () => list({ vendor: "groq", cursor }),
      () => list({ vendor: "openai", from: "2026-11-01", cursor }),
      () => list({ cursor }),
    ]) {
      const err = refusal(run);
      expect(err.status).toBe(400);
      expect(err.message).toContain("'cursor'");
    }
  });

  it("refuse anything forged", () => {
    const first = list({ vendor: "openai" });
    const json = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const honest = JSON.parse(Buffer.from(writeCursor(position, first), "base64url").toString()) as {
      q: string;
    };
    const forged = [
      "not a cursor!",
      "",
      "x".repeat(2000),
      json("just a string"),
      json({ p: position }),
      json({ p: "000#../../etc", q: honest.q }),
      json({ p: 12, q: honest.q }),
      // A well-formed position outside the query's range: the store would refuse it, so must we.
      json({ p: entryPosition(NOW + 10 * DAY_MS, "tx"), q: honest.q }),
      Buffer.from("{not json").toString("base64url"),
    ];
    for (const cursor of forged) {
      const err = refusal(() => list({ vendor: "openai", cursor }));
      expect(err.status, cursor).toBe(400);
      expect(err.code).toBe("invalid_field");
    }
  });

  it("hold positions that sort by time, then by transaction id", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 47 }),
        fc.integer({ min: 0, max: 2 ** 47 }),
        fc.stringMatching(/^[A-Za-z0-9_.:-]{1,40}$/),
        fc.stringMatching(/^[A-Za-z0-9_.:-]{1,40}$/),
        (a, b, ta, tb) => {
          const pa = entryPosition(a, ta);
          const pb = entryPosition(b, tb);
          if (a !== b) expect(pa < pb).toBe(a < b);
          const range = positionRange(Math.min(a, b), Math.max(a, b) + 1);
          expect(pa >= range.low && pa <= range.high).toBe(true);
          expect(pb >= range.low && pb <= range.high).toBe(true);
        },
      ),
    );
  });
});

describe("a transaction id in a path", () => {
  it("is a 404 when no interaction could have it", () => {
    expect(parseTransactionId("4f1c-aa.b:c_d")).toBe("4f1c-aa.b:c_d");
    for (const id of ["", "a/b", "<script>", "x".repeat(129)]) {
      expect(refusal(() => parseTransactionId(id)).status).toBe(404);
    }
  });
});

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
