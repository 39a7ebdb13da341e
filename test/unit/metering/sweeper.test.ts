import { describe, expect, it } from "vitest";
import { activePriceCatalogue } from "../../../lambda/adapters/fs/price-catalogue";
import { MemoryBudgets } from "../../../lambda/adapters/memory/budgets";
import { MemoryCredits } from "../../../lambda/adapters/memory/credits";
import { MemoryIdempotency } from "../../../lambda/adapters/memory/idempotency";
import { MemoryMasterKey } from "../../../lambda/adapters/memory/key-wrapper";
import { MemoryRateLimiter } from "../../../lambda/adapters/memory/rate-limit";
import { MemoryVendorKeys } from "../../../lambda/adapters/memory/vendor-keys";
import { counterId, newBudget, windowSpan } from "../../../lambda/core/budgets";
import { type Logger, loggerOver, silentLogger } from "../../../lambda/core/logger";
import { CachedVendorKeys } from "../../../lambda/core/metering-vendor-keys";
import { BudgetGuard, sweepHolds } from "../../../lambda/metering/budgets";
import { createMetering } from "../../../lambda/metering/hooks";
import { startSweeper } from "../../../lambda/metering/sweeper";
import { chatCall, outcomeOf, runCall } from "../../support/proxy-calls";

const T0 = Date.UTC(2026, 10, 22, 12);
const MINUTE = 60_000;

describe("the sweep of holds a dead process left open", () => {
  it("settles the credit lease and the budget holds at the charges noted, once they expired", async () => {
    let now = T0;
    const clock = () => now;
    const credits = new MemoryCredits(clock);
    const budgets = new MemoryBudgets(clock);
    const budget = newBudget({ projectId: "proj-test", usd: "50", window: "month" }, T0);
    await budgets.put(budget);
    await credits.grant("proj-test", 50_000_000, "test");
    const metering = createMetering({
      credits,
      limiter: new MemoryRateLimiter(clock),
      idempotency: new MemoryIdempotency(clock),
      vendorKeys: new CachedVendorKeys(new MemoryVendorKeys(new MemoryMasterKey(), clock), 0, 10, clock),
      prices: activePriceCatalogue({}),
      logger: silentLogger,
      clock,
      holdTtlMs: 15 * MINUTE,
      // Lambda's setting: each call's charge is noted before its after-work ends.
      noteChargesMs: 0,
      budgets: new BudgetGuard({
        counters: budgets,
        clock,
        logger: silentLogger,
        cacheMs: 0,
        holdTtlMs: 15 * MINUTE,
        noteChargesMs: 0,
      }),
    });
    const calls = Array.from({ length: 3 }, () => chatCall({ projectId: "proj-test", startedAt: T0 }));
    for (const call of calls)
      await runCall(metering, call, outcomeOf({ inputTokens: 2_000, outputTokens: 500 }));
    const cost = calls.reduce((sum, call) => sum + (call.billing?.costMicros ?? 0), 0);
    expect(cost).toBeGreaterThan(0);
    // The process is frozen and reaped here: its leases are never settled.
    const sweep = sweepHolds(credits, budgets);
    expect(await sweep.releaseExpired(now + 15 * MINUTE)).toEqual({
      holdsReleased: 0,
      settlementsCompleted: 0,
      grantsCompleted: 0,
      budgetHoldsSettled: 0,
    });
    now += 60 * MINUTE;
    const report = await sweep.releaseExpired(now);
    expect(report.holdsReleased).toBeGreaterThanOrEqual(1);
    expect(report.budgetHoldsSettled).toBeGreaterThanOrEqual(1);
    expect(await credits.balance("proj-test")).toEqual({
      projectId: "proj-test",
      availableMicros: 50_000_000 - cost,
      heldMicros: 0,
      chargedInFlightMicros: 0,
      openHolds: 0,
    });
    expect(await budgets.spend(counterId(budget, windowSpan("month", T0), null))).toEqual({
      spentMicros: cost,
      heldMicros: 0,
    });
    // A second sweep finds nothing more.
    expect(await sweep.releaseExpired(now)).toMatchObject({ holdsReleased: 0, budgetHoldsSettled: 0 });
  });
});

describe("startSweeper", () => {
  function recording(): { logger: Logger; errors: string[] } {
    const errors: string[] = [];
    return {
      errors,
      logger: loggerOver((level, message) => {
        if (level === "error") errors.push(message);
      }),
    };
  }

  it("sweeps at once, never two sweeps at a time, logs a failed sweep and keeps going; stop waits for the sweep", async () => {
    const { logger, errors } = recording();
    let running = 0;
    let most = 0;
    let sweeps = 0;
    let release = () => {};
    const sweepOnce = async () => {
      sweeps++;
      running++;
      most = Math.max(most, running);
      await new Promise<void>((resolve) => {
        release = resolve;
      });
      running--;
      if (sweeps === 1) throw new Error("store unavailable");
    };
    const sweeper = startSweeper(sweepOnce, 1, logger);
    expect(sweeps).toBe(1);
    // The interval fires while the first sweep still runs: no second one starts.
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sweeps).toBe(1);
    release();
    while (sweeps < 2) await new Promise((resolve) => setTimeout(resolve, 1));
    expect(errors).toEqual(["credit sweep failed"]);
    const stopped = sweeper.stop();
    let done = false;
    void stopped.then(() => {
      done = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(done).toBe(false);
    release();
    await stopped;
    expect(most).toBe(1);
    const after = sweeps;
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(sweeps).toBe(after);
  });
});
