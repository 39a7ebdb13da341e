import fc from "fast-check";
import { describe, expect, it } from "vitest";
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
  writeCursor,
} from "../../../lambda/core/interactions";

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
