import { describe, expect, it } from "vitest";
import type { Rollup, RollupCounters } from "../../../lambda/core/interactions-usage";
import { zeroCounters } from "../../../lambda/core/interactions-usage";
import { buildOverview, overviewSince } from "../../../lambda/core/overview";

function rollup(day: string, cost: number, extra: Partial<Rollup & RollupCounters> = {}): Rollup {
  return {
    ...zeroCounters(),
    day,
    vendor: "openai",
    billing_mode: "managed",
    model: "gpt-4o-mini",
    requests: 1,
    cost_micros: cost,
    ...extra,
  };
}

const balance = { availableMicros: 7_000_000, heldMicros: 0 };
const now = Date.parse("2026-03-31T15:00:00Z");

describe("buildOverview", () => {
  it("sums today, the month to date and the last 30 days against the period before each", () => {
    const o = buildOverview(
      [
        rollup("2026-03-31", 100),
        rollup("2026-03-30", 40),
        rollup("2026-03-01", 7),
        rollup("2026-02-28", 1_000), // February has 28 days: the whole month compares with March 1-31
        rollup("2026-02-27", 3),
        rollup("2026-03-02", 20_000, { billing_mode: "byok" }), // list price, not charged
      ],
      balance,
      now,
    );
    expect(o.today).toBe("2026-03-31");
    expect(o.spend.today).toEqual({ from: "2026-03-31", to: "2026-03-31", micros: 100, previousMicros: 40 });
    expect(o.spend.month).toEqual({
      from: "2026-03-01",
      to: "2026-03-31",
      micros: 147,
      previousMicros: 1_003,
    });
    expect(o.spend.last30).toEqual({
      from: "2026-03-02",
      to: "2026-03-31",
      micros: 140,
      previousMicros: 1_010,
    });
    expect(o.listPriceUnchargedMicros).toBe(20_000);
  });

  it("compares the month to date with the same days of the previous month", () => {
    const mid = Date.parse("2026-03-10T01:00:00Z");
    const o = buildOverview(
      [rollup("2026-02-10", 5), rollup("2026-02-11", 1_000), rollup("2026-03-10", 9)],
      balance,
      mid,
    );
    expect(o.spend.month).toMatchObject({
      from: "2026-03-01",
      to: "2026-03-10",
      micros: 9,
      previousMicros: 5,
    });
  });

  it("burns the 7-day average, today included, and says how many whole days the credits last", () => {
    const days = [
      "2026-03-25",
      "2026-03-26",
      "2026-03-27",
      "2026-03-28",
      "2026-03-29",
      "2026-03-30",
      "2026-03-31",
    ];
    const o = buildOverview(
      [...days.map((d) => rollup(d, 1_000_000)), rollup("2026-03-24", 50_000_000)],
      balance,
      now,
    );
    expect(o.credits).toEqual({
      availableMicros: 7_000_000,
      heldMicros: 0,
      burnPerDayMicros: 1_000_000,
      runwayDays: 7,
    });
  });

  it("rounds the burn rate to a whole micro and has no runway when nothing is spent", () => {
    expect(buildOverview([rollup("2026-03-31", 10)], balance, now).credits.burnPerDayMicros).toBe(1);
    expect(buildOverview([rollup("2026-03-31", 3)], balance, now).credits.burnPerDayMicros).toBe(0);
    expect(buildOverview([rollup("2026-03-31", 3)], balance, now).credits.runwayDays).toBeNull();
    const broke = buildOverview([rollup("2026-03-31", 7_000)], { availableMicros: -5, heldMicros: 0 }, now);
    expect(broke.credits.runwayDays).toBe(0);
  });

  it("ranks models by cost over the last 30 days, all billing modes, at most five", () => {
    const models = ["a", "b", "c", "d", "e", "f"];
    const o = buildOverview(
      [
        ...models.map((m, i) => rollup("2026-03-20", (i + 1) * 100, { model: m, requests: 10 - i })),
        rollup("2026-03-21", 50, { model: "a", billing_mode: "byok" }),
        rollup("2026-02-01", 1_000_000, { model: "old" }),
        rollup("2026-03-20", 0, { model: "free", requests: 99 }),
      ],
      balance,
      now,
    );
    expect(o.topModels.map((m) => [m.model, m.costMicros])).toEqual([
      ["f", 600],
      ["e", 500],
      ["d", 400],
      ["c", 300],
      ["b", 200],
    ]);
  });

  it("draws the month's spend cumulatively, one point a day up to today", () => {
    const early = Date.parse("2026-03-04T10:00:00Z");
    const o = buildOverview(
      [rollup("2026-03-01", 10), rollup("2026-03-03", 5), rollup("2026-03-04", 1), rollup("2026-02-28", 99)],
      balance,
      early,
    );
    expect(o.month).toEqual({
      days: ["2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"],
      cumulativeMicros: [10, 10, 15, 16],
    });
  });
});

describe("overviewSince", () => {
  it("reaches back to the previous month's first day or 59 days, whichever is earlier", () => {
    expect(overviewSince(now)).toBe("2026-01-31");
    expect(overviewSince(Date.parse("2026-03-01T00:00:00Z"))).toBe("2026-01-01");
  });
});
