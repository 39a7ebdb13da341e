import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Budget, type BudgetCounters, newBudget } from "../../../lambda/core/budgets";
import { type Hold, newHoldId } from "../../../lambda/core/credits";

export interface BudgetCountersUnderTest {
  /** The counters of one process. */
  counters: BudgetCounters;
  /** The counters of another process on the same store. */
  another(): BudgetCounters;
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;
const MINUTE = 60_000;

/**
 * The cases every adapter of the budgets port (definitions, and counters held under a limit:
 * core/budgets.ts `BudgetCounters`) must pass: no number of holds takes a counter past the limit
 * it is held under, a settlement turns a hold into its cost exactly once, noted charges count as
 * spent, and the sweeper settles expired holds at what was noted. `make` is called once per group of
 * cases (the sweeper's reports count every expired hold of the store).
 */
export function budgetCountersContract(
  name: string,
  make: (clock: () => number) => Promise<BudgetCountersUnderTest>,
): void {
  let now = T0;
  const clock = () => now;
  let subject: BudgetCountersUnderTest;
  let serial = 0;
  const newCounter = () => `proj.aaaa${String(++serial).padStart(4, "0")}#d2023-11-14`;
  const counters = () => subject.counters;
  const opened = () => {
    beforeAll(async () => {
      now = T0;
      subject = await make(clock);
    });
    afterAll(() => subject.close());
  };

  async function take(counterId: string, micros: number, limit: number, ttl = 15 * MINUTE): Promise<Hold> {
    const result = await counters().hold(counterId, newHoldId(), micros, now + ttl, limit);
    if (!result.ok) throw new Error(`hold refused with ${result.availableMicros} left`);
    return result.hold;
  }

  describe(`budget counters contract: ${name}`, () => {
    opened();

    it("keeps budget definitions per project: put, get, list, replace, delete", async () => {
      const project = `budgets-${++serial}`;
      const day = newBudget({ projectId: project, usd: "5", window: "day" }, now);
      const month = newBudget({ projectId: project, usd: "20", window: "month", soft: true }, now);
      const elsewhere = newBudget({ projectId: `budgets-${++serial}`, usd: "1", window: "total" }, now);
      for (const budget of [day, month, elsewhere]) await counters().put(budget);
      expect(await counters().get(day.budgetId)).toEqual(day);
      const byId = (a: Budget, b: Budget) => (a.budgetId < b.budgetId ? -1 : 1);
      expect((await counters().list(project)).sort(byId)).toEqual([day, month].sort(byId));

      const raised: Budget = { ...day, limitMicros: 7_000_000, updatedAt: now + 1 };
      await counters().put(raised);
      expect(await counters().get(day.budgetId)).toEqual(raised);
      expect(await counters().delete(day.budgetId)).toBe(true);
      expect(await counters().delete(day.budgetId)).toBe(false);
      expect(await counters().get(day.budgetId)).toBeUndefined();
      expect(await counters().list(project)).toEqual([month]);
      expect(await counters().get("not a budget id")).toBeUndefined();
      expect(await counters().list(`budgets-${++serial}`)).toEqual([]);
    });

    it("holds under the limit, says what is left, and refuses a hold the room cannot cover", async () => {
      const counter = newCounter();
      expect(await counters().spend(counter)).toEqual({ spentMicros: 0, heldMicros: 0 });
      const first = await counters().hold(counter, newHoldId(), 600, now + MINUTE, 1_000);
      expect(first).toMatchObject({ ok: true, availableMicros: 400 });
      expect(await counters().hold(counter, newHoldId(), 401, now + MINUTE, 1_000)).toEqual({
        ok: false,
        availableMicros: 400,
      });
      expect(await counters().hold(counter, newHoldId(), 400, now + MINUTE, 1_000)).toMatchObject({
        ok: true,
        availableMicros: 0,
      });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 0, heldMicros: 1_000 });
      // A hold larger than the limit itself is refused on an empty counter too.
      expect(await counters().hold(newCounter(), newHoldId(), 2_000, now + MINUTE, 1_000)).toEqual({
        ok: false,
        availableMicros: 1_000,
      });
    });

    it("applies a lowered limit to the next hold at once", async () => {
      const counter = newCounter();
      await take(counter, 500, 2_000);
      expect(await counters().hold(counter, newHoldId(), 100, now + MINUTE, 500)).toEqual({
        ok: false,
        availableMicros: 0,
      });
      expect((await counters().hold(counter, newHoldId(), 100, now + MINUTE, 600)).ok).toBe(true);
    });

    it("of 100 holds at once from four processes under room for 40, exactly 40 are taken", async () => {
      const counter = newCounter();
      const processes = Array.from({ length: 4 }, () => subject.another());
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          (processes[i % 4] as BudgetCounters).hold(counter, newHoldId(), 25, now + MINUTE, 1_000),
        ),
      );
      expect(results.filter((r) => r.ok)).toHaveLength(40);
      for (const refused of results.filter((r) => !r.ok))
        expect(refused).toEqual({ ok: false, availableMicros: 0 });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 0, heldMicros: 1_000 });
    });

    it("a retried hold whose first answer was lost holds once", async () => {
      const counter = newCounter();
      const holdId = newHoldId();
      const first = await counters().hold(counter, holdId, 300, now + MINUTE, 1_000);
      expect(await counters().hold(counter, holdId, 300, now + MINUTE, 1_000)).toEqual(first);
      expect(await counters().spend(counter)).toEqual({ spentMicros: 0, heldMicros: 300 });
    });

    it("settles a hold at its cost, uncollected excess included, exactly once; the rest returns to the window", async () => {
      const counter = newCounter();
      const hold = await take(counter, 800, 1_000);
      const charges = { chargedMicros: 500, uncollectedMicros: 20, calls: 2 };
      expect(await counters().settleCharges(hold, charges)).toMatchObject({
        holdId: hold.holdId,
        outcome: "settled",
        heldMicros: 800,
        chargedMicros: 500,
        uncollectedMicros: 20,
        calls: 2,
      });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 520, heldMicros: 0 });
      // A repeat (the caller's retry) changes nothing.
      await counters().settleCharges(hold, charges);
      await subject.another().settleCharges(hold, { chargedMicros: 800, uncollectedMicros: 0, calls: 3 });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 520, heldMicros: 0 });
      expect(await counters().charges(counter)).toEqual({ settledMicros: 520, noted: new Map() });
      // What was not spent is room again.
      expect(await counters().hold(counter, newHoldId(), 480, now + MINUTE, 1_000)).toMatchObject({
        ok: true,
        availableMicros: 0,
      });
    });

    it("a hold settled at nothing is released whole", async () => {
      const counter = newCounter();
      const hold = await take(counter, 700, 1_000);
      expect(
        await counters().settleCharges(hold, { chargedMicros: 0, uncollectedMicros: 0, calls: 0 }),
      ).toMatchObject({ outcome: "released", chargedMicros: 0 });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 0, heldMicros: 0 });
    });

    it("counts noted charges as spent before the settlement, and ignores an older note", async () => {
      const counter = newCounter();
      const hold = await take(counter, 900, 1_000);
      expect(
        await counters().recordCharges(hold, { chargedMicros: 200, uncollectedMicros: 10, calls: 2 }),
      ).toBe(true);
      expect(
        await counters().recordCharges(hold, { chargedMicros: 100, uncollectedMicros: 0, calls: 1 }),
      ).toBe(false);
      expect(await counters().spend(counter)).toEqual({ spentMicros: 210, heldMicros: 690 });
      expect(await counters().charges(counter)).toEqual({
        settledMicros: 0,
        noted: new Map([[hold.holdId, 210]]),
      });
      await counters().settleCharges(hold, { chargedMicros: 300, uncollectedMicros: 10, calls: 3 });
      expect(
        await counters().recordCharges(hold, { chargedMicros: 400, uncollectedMicros: 0, calls: 4 }),
      ).toBe(false);
      expect(await counters().spend(counter)).toEqual({ spentMicros: 310, heldMicros: 0 });
    });

    it("starts a window from spend recorded before: raised to it once, never lowered, counted against the limit", async () => {
      const counter = newCounter();
      await counters().startFrom(counter, 600);
      expect(await counters().spend(counter)).toEqual({ spentMicros: 600, heldMicros: 0 });
      // Counted already (a budget set twice): nothing more; less: nothing lowered.
      await counters().startFrom(counter, 600);
      await subject.another().startFrom(counter, 100);
      expect(await counters().spend(counter)).toEqual({ spentMicros: 600, heldMicros: 0 });
      // Noted charges are spend too: only what they leave out is added.
      const hold = await take(counter, 300, 1_000);
      await counters().recordCharges(hold, { chargedMicros: 100, uncollectedMicros: 0, calls: 1 });
      await counters().startFrom(counter, 750);
      expect(await counters().spend(counter)).toEqual({ spentMicros: 750, heldMicros: 200 });
      expect((await counters().hold(counter, newHoldId(), 100, now + MINUTE, 1_000)).ok).toBe(false);
    });
  });

  describe(`budget counters contract, the sweeper: ${name}`, () => {
    opened();

    it("settles expired holds at the charges noted on them, once, and leaves live ones", async () => {
      const counter = newCounter();
      const dead = await take(counter, 600, 1_000, 5 * MINUTE);
      await counters().recordCharges(dead, { chargedMicros: 150, uncollectedMicros: 0, calls: 1 });
      const idle = await take(counter, 100, 1_000, 5 * MINUTE);
      const live = await take(counter, 200, 1_000, 30 * MINUTE);
      expect(await counters().releaseExpired(now + 5 * MINUTE - 1)).toEqual({ holdsSettled: 0 });
      expect(await counters().releaseExpired(now + 5 * MINUTE)).toEqual({ holdsSettled: 2 });
      expect(await counters().releaseExpired(now + 5 * MINUTE)).toEqual({ holdsSettled: 0 });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 150, heldMicros: 200 });
      // The dead process's late settlement finds nothing to settle.
      await counters().settleCharges(dead, { chargedMicros: 600, uncollectedMicros: 0, calls: 4 });
      await counters().settleCharges(idle, { chargedMicros: 100, uncollectedMicros: 0, calls: 1 });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 150, heldMicros: 200 });
      await counters().settleCharges(live, { chargedMicros: 50, uncollectedMicros: 0, calls: 1 });
      expect(await counters().spend(counter)).toEqual({ spentMicros: 200, heldMicros: 0 });
    });
  });
}
