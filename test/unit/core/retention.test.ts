import { describe, expect, it } from "vitest";
import { firstKeptDay, recordsExpired, retentionCutoffs } from "../../../lambda/core/retention";

describe("retention by whole days", () => {
  const now = Date.UTC(2026, 10, 26, 5);
  it("removes a day once all of it is older than the limit", () => {
    expect(firstKeptDay(30, now)).toBe("2026-10-27");
    expect(firstKeptDay(1, now)).toBe("2026-11-25");
    expect(firstKeptDay(1, Date.UTC(2026, 10, 26))).toBe("2026-11-25");
    const cutoffs = retentionCutoffs({ retentionDays: 30 }, now);
    expect(recordsExpired(cutoffs, "2026-10-26")).toBe(true);
    expect(recordsExpired(cutoffs, "2026-10-27")).toBe(false);
    expect(recordsExpired(retentionCutoffs({}, now), "2000-01-01")).toBe(false);
  });
});
