import { describe, expect, it } from "vitest";
import { MemoryCredits } from "../../../../lambda/adapters/memory/credits";
import { MAX_BALANCE_MICROS, MAX_GRANT_MICROS } from "../../../../lambda/core/credits";
import { ApiError } from "../../../../lambda/core/errors";
import { creditStoreContract } from "../../../support/contracts/credits";

// One MemoryCredits is every process's store: they share its balances as processes share a table.
creditStoreContract("MemoryCredits", async (clock) => {
  const store = new MemoryCredits(clock);
  return {
    store,
    another: () => store,
    markers: (projectId) => store.markers(projectId),
    close: async () => {},
  };
});

describe("MemoryCredits", () => {
  it("refuses a grant that would take the balance past its cap, and takes one up to it", async () => {
    const credits = new MemoryCredits(() => 1_700_000_000_000);
    const grants = MAX_BALANCE_MICROS / MAX_GRANT_MICROS;
    for (let i = 0; i < grants; i++) await credits.grant("capped", MAX_GRANT_MICROS, "cli");
    const err = await credits.grant("capped", 1, "cli").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).message).toContain("would take the balance above");
    expect((await credits.balance("capped")).availableMicros).toBe(MAX_BALANCE_MICROS);
  });
});
