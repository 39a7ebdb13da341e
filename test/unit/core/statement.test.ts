import { describe, expect, it } from "vitest";
import type { CreditStore, LedgerEntry } from "../../../lambda/core/credits";
import { ApiError } from "../../../lambda/core/errors";
import { formatCents } from "../../../lambda/core/money";
import {
  buildStatement,
  ledgerSince,
  monthPeriod,
  parseStatementQuery,
  readStatement,
  type StatementPeriod,
  statementCsv,
} from "../../../lambda/core/statement";

const DAY = 86_400_000;
const at = (iso: string) => Date.parse(iso);

function grant(time: string, micros: number, ref: string, source = "invoice"): LedgerEntry {
  return {
    projectId: "p",
    entryId: `${at(time)}#${ref}#0`,
    type: "grant",
    deltaMicros: micros,
    at: at(time),
    ref,
    source,
  };
}

/** A lease of `held` taken at `time` that charged `charged` for `calls` calls, resolved `lagMs` later. */
function lease(time: string, held: number, charged: number, calls: number, ref: string, lagMs = 30_000) {
  const taken = at(time);
  const hold: LedgerEntry = {
    projectId: "p",
    entryId: `${taken}#${ref}#0`,
    type: "hold",
    deltaMicros: -held,
    at: taken,
    ref,
    heldMicros: held,
  };
  const resolution: LedgerEntry = {
    projectId: "p",
    entryId: `${taken}#${ref}#1`,
    type: charged > 0 ? "settle" : "release",
    deltaMicros: held - charged,
    at: taken + lagMs,
    ref,
    heldMicros: held,
    chargedMicros: charged,
    uncollectedMicros: 0,
    calls,
  };
  return [hold, resolution];
}

const settled = { heldMicros: 0, chargedInFlightMicros: 0, openHolds: 0 };
const period = (from: string, to: string, grouping: StatementPeriod["grouping"] = "day") => ({
  from,
  to,
  grouping,
});

function apiError(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected an ApiError");
}

describe("buildStatement", () => {
  // $10 granted, then two leases on Nov 2 ($0.081752 over 30 calls, $0.02 over 5), one released
  // lease, and one lease on Nov 3 ($1.5 over 12 calls). Available now: 10 - 0.081752 - 0.02 - 1.5.
  const entries = [
    grant("2026-11-01T09:00:00Z", 10_000_000, "g1"),
    ...lease("2026-11-02T10:00:00Z", 5_182_000, 81_752, 30, "l1"),
    ...lease("2026-11-02T11:00:00Z", 1_000_000, 20_000, 5, "l2"),
    ...lease("2026-11-02T12:00:00Z", 1_000_000, 0, 0, "l3"),
    ...lease("2026-11-03T08:00:00Z", 4_000_000, 1_500_000, 12, "l4"),
  ];
  const available = 10_000_000 - 81_752 - 20_000 - 1_500_000;

  it("turns each lease into one debit of what it charged, never its hold and refund", () => {
    const s = buildStatement(
      entries,
      { availableMicros: available, ...settled },
      period("2026-11-01", "2026-11-03", "lease"),
    );
    expect(s.lines.map((l) => [l.kind, l.amountMicros, l.calls, l.ref])).toEqual([
      ["grant", 10_000_000, undefined, "g1"],
      ["charges", -81_752, 30, "l1"],
      ["charges", -20_000, 5, "l2"],
      ["charges", -1_500_000, 12, "l4"],
    ]);
  });

  it("keeps a running balance from the opening to the closing, which is the balance now", () => {
    const s = buildStatement(
      entries,
      { availableMicros: available, ...settled },
      period("2026-11-01", "2026-11-03", "lease"),
    );
    expect(s.openingMicros).toBe(0);
    expect(s.lines.map((l) => l.balanceMicros)).toEqual([
      10_000_000,
      10_000_000 - 81_752,
      10_000_000 - 101_752,
      available,
    ]);
    expect(s.closingMicros).toBe(available);
  });

  it("sums a day's charges into one line, calls and leases counted", () => {
    const s = buildStatement(
      entries,
      { availableMicros: available, ...settled },
      period("2026-11-01", "2026-11-03"),
    );
    expect(s.lines.map((l) => [l.day, l.kind, l.amountMicros, l.calls, l.leases, l.balanceMicros])).toEqual([
      ["2026-11-01", "grant", 10_000_000, undefined, undefined, 10_000_000],
      ["2026-11-02", "charges", -101_752, 35, 2, 10_000_000 - 101_752],
      ["2026-11-03", "charges", -1_500_000, 12, 1, available],
    ]);
  });

  it("places a grant between the day's charges where it happened, balances still running", () => {
    const day = [
      ...lease("2026-11-05T08:00:00Z", 100, 10, 1, "a"),
      grant("2026-11-05T09:00:00Z", 1_000, "g"),
      ...lease("2026-11-05T10:00:00Z", 100, 20, 2, "b"),
    ];
    const s = buildStatement(day, { availableMicros: 970, ...settled }, period("2026-11-05", "2026-11-05"));
    expect(s.openingMicros).toBe(0);
    expect(s.lines.map((l) => [l.kind, l.amountMicros, l.balanceMicros])).toEqual([
      ["grant", 1_000, 990],
      ["charges", -30, 970],
    ]);
    // The opening plus every line is the closing.
    expect(s.openingMicros + s.lines.reduce((sum, l) => sum + l.amountMicros, 0)).toBe(s.closingMicros);
  });

  it("opens with what came before the period and closes before what came after", () => {
    const s = buildStatement(
      entries,
      { availableMicros: available, ...settled },
      period("2026-11-02", "2026-11-02"),
    );
    expect(s.openingMicros).toBe(10_000_000);
    expect(s.lines).toHaveLength(1);
    expect(s.closingMicros).toBe(10_000_000 - 101_752);
  });

  it("dates charges by their resolution, so a lease taken before midnight counts on the day it settled", () => {
    const late = lease("2026-11-02T23:59:50Z", 1_000, 400, 4, "late", 20_000);
    const s = buildStatement(
      [grant("2026-11-01T00:00:00Z", 1_000, "g"), ...late],
      { availableMicros: 600, ...settled },
      period("2026-11-03", "2026-11-03"),
    );
    expect(s.openingMicros).toBe(1_000);
    expect(s.lines.map((l) => [l.day, l.amountMicros])).toEqual([["2026-11-03", -400]]);
  });

  it("shows open leases apart: their reservation and their charges so far are in flight", () => {
    // $10 granted; a lease of $2 is open and has charged $0.30 so far: available is $8.
    const s = buildStatement(
      [grant("2026-11-01T09:00:00Z", 10_000_000, "g")],
      { availableMicros: 8_000_000, heldMicros: 1_700_000, chargedInFlightMicros: 300_000, openHolds: 1 },
      period("2026-11-01", "2026-11-01"),
    );
    expect(s.closingMicros).toBe(10_000_000);
    expect(s.inFlight).toEqual({ heldMicros: 1_700_000, chargedMicros: 300_000, openLeases: 1 });
    expect(s.availableMicros).toBe(8_000_000);
    expect(s.closingMicros - s.inFlight.heldMicros - s.inFlight.chargedMicros).toBe(s.availableMicros);
  });

  it("is empty but balanced for a period without movements", () => {
    const s = buildStatement(
      entries,
      { availableMicros: available, ...settled },
      period("2026-10-01", "2026-10-31"),
    );
    expect(s.lines).toEqual([]);
    expect(s.openingMicros).toBe(0);
    expect(s.closingMicros).toBe(0);
  });

  it("keeps the uncollected cost on the charges line", () => {
    const [hold, settle] = lease("2026-11-02T10:00:00Z", 100, 100, 2, "u");
    const s = buildStatement(
      [hold as LedgerEntry, { ...(settle as LedgerEntry), uncollectedMicros: 7 }],
      { availableMicros: -100, ...settled },
      period("2026-11-02", "2026-11-02"),
    );
    expect(s.lines[0]?.uncollectedMicros).toBe(7);
  });
});

describe("readStatement", () => {
  it("reads ledger pages back to a week before the period, and no further", async () => {
    const now = at("2026-11-20T12:00:00Z");
    const all: LedgerEntry[] = [];
    for (let d = 0; d < 60; d++) all.push(grant(new Date(now - d * DAY).toISOString(), 1_000, `g${d}`));
    let reads = 0;
    const credits: Pick<CreditStore, "balance" | "ledger"> = {
      balance: async () => ({
        projectId: "p",
        availableMicros: 60_000,
        heldMicros: 0,
        chargedInFlightMicros: 0,
        openHolds: 0,
      }),
      ledger: async (_project, options = {}) => {
        reads++;
        // Pages of 10 for the test: the cursor is the offset.
        const offset = Number(options.cursor ?? 0);
        const entries = all.slice(offset, offset + 10);
        return offset + 10 < all.length ? { entries, cursor: String(offset + 10) } : { entries };
      },
    };
    const s = await readStatement(credits, "p", period("2026-11-11", "2026-11-20"));
    expect(s.lines).toHaveLength(10);
    expect(s.openingMicros).toBe(50_000);
    expect(s.closingMicros).toBe(60_000);
    // 10 days in the period and 7 before it: two pages, not all six.
    expect(ledgerSince("2026-11-11")).toBe(at("2026-11-04T00:00:00Z"));
    expect(reads).toBe(2);
  });
});

describe("parseStatementQuery", () => {
  const now = at("2026-11-20T12:00:00Z");

  it("defaults to the last 30 days by day", () => {
    expect(parseStatementQuery({}, now)).toEqual({ from: "2026-10-22", to: "2026-11-20", grouping: "day" });
  });

  it("takes a period and a grouping", () => {
    expect(parseStatementQuery({ from: "2026-11-01", to: "2026-11-05", group: "lease" }, now)).toEqual({
      from: "2026-11-01",
      to: "2026-11-05",
      grouping: "lease",
    });
  });

  it.each([
    [{ from: "2026-11-06", to: "2026-11-05" }, "from", "is after to"],
    [{ from: "2025-01-01", to: "2026-11-05" }, "from", "at most 366"],
    [{ from: "2026-02-30" }, "from", "not a calendar date"],
    [{ to: "yesterday" }, "to", "YYYY-MM-DD"],
    [{ group: "week" }, "group", "day or lease"],
    [{ limit: "5" }, "limit", "not a parameter"],
  ])("refuses %j with a 400 naming %s", (params, field, text) => {
    const err = apiError(() => parseStatementQuery(params, now));
    expect(err.status).toBe(400);
    expect(err.message).toContain(field);
    expect(err.message).toContain(text);
  });
});

describe("formatCents", () => {
  it.each([
    [0, "$0.00"],
    [5_100_227, "$5.10"],
    [-81_752, "-$0.08"],
    [5_000, "$0.01"],
    [4_999, "<$0.01"],
    [-1, "-<$0.01"],
    [1_234_567_890_000, "$1,234,567.89"],
    [994_999, "$0.99"],
    [995_000, "$1.00"],
  ])("shows %i micros as %s", (micros, text) => {
    expect(formatCents(micros)).toBe(text);
  });
});

describe("a month's statement as CSV", () => {
  it("covers the calendar month and lists purchases, refunds not taken back, and charges to the micro-dollar", () => {
    expect(monthPeriod("2026-02")).toEqual({ from: "2026-02-01", to: "2026-02-28", grouping: "day" });
    expect(() => monthPeriod("2026-13")).toThrow(/month/);
    const at = Date.UTC(2026, 10, 3, 12);
    const entries: LedgerEntry[] = [
      {
        projectId: "p",
        entryId: "1",
        type: "grant",
        deltaMicros: 25_000_000,
        at,
        ref: "cs_test_1",
        source: "stripe_checkout",
      },
      {
        projectId: "p",
        entryId: "2",
        type: "settle",
        deltaMicros: 0,
        at: at + 1,
        ref: "h1",
        chargedMicros: 20_000_001,
        calls: 3,
      },
      {
        projectId: "p",
        entryId: "3",
        type: "debit",
        deltaMicros: -4_999_999,
        at: at + 2,
        ref: "pi_1-rev-25000000",
        source: "stripe_refund",
        uncollectedMicros: 20_000_001,
      },
    ];
    const statement = buildStatement(
      entries,
      { availableMicros: 0, heldMicros: 0, chargedInFlightMicros: 0, openHolds: 0 },
      monthPeriod("2026-11"),
    );
    expect(statementCsv(statement).split("\r\n")).toEqual([
      "date,kind,description,reference,amount_usd,balance_usd",
      "2026-11-01,opening,opening balance,,,0.000000",
      "2026-11-03,grant,credits bought (Stripe Checkout) · cs_test_1,cs_test_1,25.000000,25.000000",
      "2026-11-03,charges,3 calls on 1 lease,,-20.000001,4.999999",
      "2026-11-03,debit,refund: credits taken back ($20.00 was spent already),pi_1-rev-25000000,-4.999999,0.000000",
      "2026-11-30,closing,closing balance,,,0.000000",
      "",
    ]);
  });
});
