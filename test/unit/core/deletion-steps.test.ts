import { describe, expect, it } from "vitest";
import { DELETION_STEPS, type DeletionStep, retryDelayMs } from "../../../lambda/core/deletion-steps";

describe("the deletion steps", () => {
  it("are named once each, in the issue's order, and loop only back to FindFiles after Verify", () => {
    expect(DELETION_STEPS.map((s) => s.name)).toEqual([
      "RecordRequest",
      "WaitForInFlight",
      "FindFiles",
      "RewriteFiles",
      "PurgeCopies",
      "Verify",
    ]);
    const repeats = DELETION_STEPS.flatMap((s: DeletionStep) =>
      s.kind !== "wait" && s.repeat ? [s.repeat] : [],
    );
    // One find per round: the map reads the whole manifest, so it no longer loops back for more files.
    expect(repeats.map((r) => [r.choice, r.when, r.goTo])).toEqual([
      ["RowsRemain", "rowsRemain", "FindFiles"],
    ]);
  });

  it("back off as Step Functions does, up to the longest wait", () => {
    const policy = { maxAttempts: 5, intervalSeconds: 2, backoffRate: 2, maxDelaySeconds: 30 };
    expect([0, 1, 2, 3, 4].map((n) => retryDelayMs(policy, n))).toEqual([2000, 4000, 8000, 16000, 30000]);
  });
});
