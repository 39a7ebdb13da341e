import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CreditStore, type Hold, type LedgerEntry, newHoldId } from "../../../lambda/core/credits";
import { ApiError } from "../../../lambda/core/errors";

export interface CreditsUnderTest {
  /** The credit store of one process. */
  store: CreditStore;
  /** The credit store of another process on the same balances (its own client). */
  another(): CreditStore;
  /** The markers a project's balance still carries: open holds and grants whose ledger entry may be missing. */
  markers(projectId: string): Promise<{ holds: string[]; grants: string[] }>;
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;
const MINUTE = 60_000;

/**
 * The cases every adapter of the credits port (`core/credits.ts`) must pass: holds that never overspend,
 * settlement to the actual cost exactly once, refunds, leases' noted charges, the ledger summing to the
 * balance, and the sweeper. `make` is called once per group of cases, with the clock the store must
 * use; the sweeper's group needs a store of its own (its reports count every expired hold).
 */
export function creditStoreContract(
  name: string,
  make: (clock: () => number) => Promise<CreditsUnderTest>,
): void {
  let now = T0;
  const clock = () => now;
  let subject: CreditsUnderTest;
  let projects = 0;
  const newProject = () => `proj-${++projects}`;
  const credits = () => subject.store;

  async function ledgerOf(projectId: string): Promise<LedgerEntry[]> {
    const entries: LedgerEntry[] = [];
    let cursor: string | undefined;
    do {
      const page = await credits().ledger(projectId, { limit: 7, ...(cursor ? { cursor } : {}) });
      entries.push(...page.entries);
      cursor = page.cursor;
    } while (cursor);
    return entries;
  }

  const total = (entries: LedgerEntry[]) => entries.reduce((sum, entry) => sum + entry.deltaMicros, 0);

  /** No marker left and the ledger sums to the balance: the state every operation must end in. */
  async function expectSettledState(projectId: string): Promise<LedgerEntry[]> {
    expect(await subject.markers(projectId)).toEqual({ holds: [], grants: [] });
    const entries = await ledgerOf(projectId);
    const balance = await credits().balance(projectId);
    expect(balance).toMatchObject({ heldMicros: 0, openHolds: 0 });
    expect(total(entries)).toBe(balance.availableMicros);
    expect(balance.availableMicros).toBeGreaterThanOrEqual(0);
    return entries;
  }

  async function takeHold(projectId: string, micros: number, ttl = 15 * MINUTE): Promise<Hold> {
    const result = await credits().hold(projectId, newHoldId(), micros, now + ttl);
    if (!result.ok) throw new Error("hold refused");
    return result.hold;
  }

  const opened = () => {
    beforeAll(async () => {
      now = T0;
      subject = await make(clock);
    });
    afterAll(() => subject.close());
  };

  describe(`credits contract: ${name}`, () => {
    opened();

    describe("adjustments by outside payments", () => {
      it("applies once per payment, and a debit never takes more than is available", async () => {
        const p = newProject();
        const at = now - 5000;
        const purchase = {
          ref: "cs_test_a1YS1URlnyQCN5fUUduORoQ7Pw41PJqDWkIVQCpJPqkfIhd6tVY8XB1OLY",
          at,
          micros: 25_000_000,
          source: "stripe_checkout",
        };
        const first = await credits().adjust(p, purchase);
        expect(first).toMatchObject({
          applied: true,
          entry: { type: "grant", deltaMicros: 25_000_000, ref: purchase.ref, at },
        });
        now += 1000;
        // A repeat (a webhook delivered again later) moves nothing and names the same entry.
        expect(await credits().adjust(p, purchase)).toEqual({ applied: false, entry: first.entry });
        expect((await credits().balance(p)).availableMicros).toBe(25_000_000);

        // Calls spend 20 of the 25; a refund of the whole 25 takes back the 5 left, and says 20 was spent.
        const hold = await takeHold(p, 20_000_000);
        await credits().settle(hold, 20_000_000);
        const refund = { ref: "re_full", at: now, micros: -25_000_000, source: "stripe_refund" };
        const debit = await credits().adjust(p, refund);
        expect(debit).toMatchObject({
          applied: true,
          entry: { type: "debit", deltaMicros: -5_000_000, uncollectedMicros: 20_000_000 },
        });
        expect((await credits().adjust(p, refund)).applied).toBe(false);
        expect((await credits().balance(p)).availableMicros).toBe(0);
        // With nothing left, a debit takes nothing and reports all of it.
        const dispute = await credits().adjust(p, {
          ref: "dp_1",
          at: now + 1,
          micros: -1_000_000,
          source: "stripe_dispute",
        });
        expect(dispute.entry).toMatchObject({ type: "debit", deltaMicros: 0, uncollectedMicros: 1_000_000 });
        await expectSettledState(p);
      });
    });

    describe("grant, hold, settle, release", () => {
      it("moves the balance and writes a ledger that sums to it", async () => {
        const p = newProject();
        const grant = await credits().grant(p, 10_000_000, "cli", "welcome credit");
        expect(grant).toMatchObject({
          type: "grant",
          deltaMicros: 10_000_000,
          source: "cli",
          note: "welcome credit",
        });

        // The ledger orders by time, then id: entries of the same millisecond have no order between them.
        now += 1000;
        const hold = await takeHold(p, 2_000_000);
        expect(await credits().balance(p)).toEqual({
          projectId: p,
          availableMicros: 8_000_000,
          heldMicros: 2_000_000,
          chargedInFlightMicros: 0,
          openHolds: 1,
        });

        now += 1000;
        const settled = await credits().settle(hold, 1_250_000);
        expect(settled).toEqual({
          projectId: p,
          holdId: hold.holdId,
          outcome: "settled",
          heldMicros: 2_000_000,
          chargedMicros: 1_250_000,
          uncollectedMicros: 0,
          calls: 1,
          at: now,
        });

        const entries = await expectSettledState(p);
        expect(entries.map((e) => [e.type, e.deltaMicros])).toEqual([
          ["settle", 750_000],
          ["hold", -2_000_000],
          ["grant", 10_000_000],
        ]);
        expect((await credits().balance(p)).availableMicros).toBe(8_750_000);
      });

      it("release refunds the whole hold: a failed call costs nothing", async () => {
        const p = newProject();
        await credits().grant(p, 5_000_000, "cli");
        const hold = await takeHold(p, 5_000_000);
        expect(await credits().release(hold)).toMatchObject({ outcome: "released", chargedMicros: 0 });
        await expectSettledState(p);
        expect((await credits().balance(p)).availableMicros).toBe(5_000_000);
      });

      it("charges at most the hold and records the rest as uncollected", async () => {
        const p = newProject();
        await credits().grant(p, 3_000_000, "cli");
        const hold = await takeHold(p, 1_000_000);
        expect(await credits().settle(hold, 1_400_000)).toMatchObject({
          chargedMicros: 1_000_000,
          uncollectedMicros: 400_000,
        });
        await expectSettledState(p);
        expect((await credits().balance(p)).availableMicros).toBe(2_000_000);
      });

      it("refuses a hold the balance cannot cover, changing nothing", async () => {
        const p = newProject();
        expect(await credits().hold(p, newHoldId(), 1, now + MINUTE)).toEqual({
          ok: false,
          availableMicros: 0,
        });
        await credits().grant(p, 999, "cli");
        expect(await credits().hold(p, newHoldId(), 1000, now + MINUTE)).toEqual({
          ok: false,
          availableMicros: 999,
        });
        const entries = await expectSettledState(p);
        expect(entries).toHaveLength(1);
      });

      it("settles exactly once: repeats and races return the first resolution", async () => {
        const p = newProject();
        await credits().grant(p, 10_000_000, "cli");
        const hold = await takeHold(p, 4_000_000);
        const first = await credits().settle(hold, 1_000_000);
        expect(await credits().settle(hold, 3_000_000)).toEqual(first);
        expect(await credits().release(hold)).toEqual(first);

        const raced = await takeHold(p, 4_000_000);
        const other = subject.another();
        const results = await Promise.all([
          credits().settle(raced, 100),
          other.settle(raced, 200),
          credits().release(raced),
          other.settle(raced, 300),
        ]);
        const [winner] = results;
        for (const result of results) expect(result).toEqual(winner);

        await expectSettledState(p);
        expect((await credits().balance(p)).availableMicros).toBe(
          10_000_000 - 1_000_000 - (winner?.chargedMicros ?? 0),
        );
      });

      it("a retried hold whose first answer was lost debits once; a reused open hold id is an error", async () => {
        const p = newProject();
        await credits().grant(p, 1_000_000, "cli");
        const holdId = newHoldId();
        const first = await credits().hold(p, holdId, 600_000, now + MINUTE);
        const retry = await credits().hold(p, holdId, 600_000, now + MINUTE);
        expect(retry).toEqual(first);
        expect((await credits().balance(p)).availableMicros).toBe(400_000);
        // An id reused for another hold is refused: at once, or (DynamoDB, whose take is one write)
        // when the hold's own item is written, the second debit given back.
        const reused = await credits()
          .hold(p, holdId, 1000, now + MINUTE)
          .catch((err: unknown) => err);
        if (reused instanceof Error) expect(reused.message).toMatch(/already in use/);
        else await expect.poll(async () => (await credits().balance(p)).availableMicros).toBe(400_000);
        if (first.ok) await credits().release(first.hold);
        await expectSettledState(p);
      });

      it("settling a hold that never existed is an error, not a ledger entry", async () => {
        const p = newProject();
        await credits().grant(p, 1_000_000, "cli");
        const ghost: Hold = {
          projectId: p,
          holdId: newHoldId(),
          micros: 1000,
          createdAt: now,
          expiresAt: now + 1,
        };
        await expect(credits().settle(ghost, 10)).rejects.toThrow(/No hold/);
        expect(await expectSettledState(p)).toHaveLength(1);
      });
    });

    describe("a hold that pays for several calls (a credit lease)", () => {
      it("notes charges as they grow, settles at their total, and the ledger sums to the balance", async () => {
        const p = newProject();
        await credits().grant(p, 10_000_000, "cli");
        now += 1000;
        const lease = await takeHold(p, 4_000_000);
        expect(
          await credits().recordCharges(lease, { chargedMicros: 300_000, uncollectedMicros: 0, calls: 2 }),
        ).toBe(true);
        // Noted charges are spent: the balance no longer counts them as held.
        expect(await credits().balance(p)).toMatchObject({
          availableMicros: 6_000_000,
          heldMicros: 3_700_000,
        });
        // A repeat is harmless, and an older total (fewer calls) arriving late changes nothing.
        expect(
          await credits().recordCharges(lease, { chargedMicros: 300_000, uncollectedMicros: 0, calls: 2 }),
        ).toBe(false);
        expect(
          await credits().recordCharges(lease, { chargedMicros: 100_000, uncollectedMicros: 0, calls: 1 }),
        ).toBe(false);
        expect((await credits().balance(p)).heldMicros).toBe(3_700_000);

        now += 1000;
        const settled = await credits().settleCharges(lease, {
          chargedMicros: 1_100_000,
          uncollectedMicros: 50_000,
          calls: 5,
        });
        expect(settled).toMatchObject({
          outcome: "settled",
          chargedMicros: 1_100_000,
          uncollectedMicros: 50_000,
          calls: 5,
        });
        // Resolved: nothing more is noted, and a repeat returns the first resolution.
        expect(
          await credits().recordCharges(lease, { chargedMicros: 1_200_000, uncollectedMicros: 0, calls: 6 }),
        ).toBe(false);
        expect(
          await credits().settleCharges(lease, { chargedMicros: 0, uncollectedMicros: 0, calls: 0 }),
        ).toEqual(settled);
        const entries = await expectSettledState(p);
        expect(entries.map((e) => [e.type, e.deltaMicros])).toEqual([
          ["settle", 2_900_000],
          ["hold", -4_000_000],
          ["grant", 10_000_000],
        ]);
        expect((await credits().balance(p)).availableMicros).toBe(8_900_000);
      });

      it("a lease with no charge is released", async () => {
        const p = newProject();
        await credits().grant(p, 1_000_000, "cli");
        const lease = await takeHold(p, 800_000);
        expect(
          await credits().settleCharges(lease, { chargedMicros: 0, uncollectedMicros: 0, calls: 0 }),
        ).toMatchObject({
          outcome: "released",
          chargedMicros: 0,
        });
        await expectSettledState(p);
        expect((await credits().balance(p)).availableMicros).toBe(1_000_000);
      });

      it("refuses charges beyond the hold or that are not whole numbers", async () => {
        const p = newProject();
        await credits().grant(p, 1_000_000, "cli");
        const lease = await takeHold(p, 500_000);
        for (const charges of [
          { chargedMicros: 500_001, uncollectedMicros: 0, calls: 1 },
          { chargedMicros: -1, uncollectedMicros: 0, calls: 1 },
          { chargedMicros: 10, uncollectedMicros: 0.5, calls: 1 },
          { chargedMicros: 10, uncollectedMicros: 0, calls: Number.NaN },
        ]) {
          await expect(credits().recordCharges(lease, charges)).rejects.toBeInstanceOf(ApiError);
          await expect(credits().settleCharges(lease, charges)).rejects.toBeInstanceOf(ApiError);
        }
        expect((await credits().balance(p)).openHolds).toBe(1);
        await credits().release(lease);
      });
    });

    describe("200 concurrent holds against a balance that covers 50", () => {
      it("grants exactly 50, never goes negative, and the ledger sums to the balance", async () => {
        const p = newProject();
        const unit = 1_000;
        await credits().grant(p, 50 * unit, "cli");
        // Four "processes": four credit stores on the same balances.
        const stores = Array.from({ length: 4 }, () => subject.another());
        const store = (i: number) => stores[i % stores.length] as CreditStore;
        const results = await Promise.all(
          Array.from({ length: 200 }, (_, i) => store(i).hold(p, newHoldId(), unit, now + MINUTE)),
        );
        const holds = results.flatMap((r) => (r.ok ? [r.hold] : []));
        expect(holds).toHaveLength(50);
        for (const refused of results.filter((r) => !r.ok))
          expect(refused).toEqual({ ok: false, availableMicros: 0 });
        expect(await credits().balance(p)).toEqual({
          projectId: p,
          availableMicros: 0,
          heldMicros: 50 * unit,
          chargedInFlightMicros: 0,
          openHolds: 50,
        });

        // Settle each at a cost from 0 to 1.5x the hold (the excess is not charged), each twice at once.
        const actual = (i: number) => (i * 37) % (1.5 * unit);
        const settlements = await Promise.all(
          holds.flatMap((hold, i) => [
            store(i).settle(hold, actual(i)),
            store(i + 1).settle(hold, actual(i)),
          ]),
        );
        for (let i = 0; i < holds.length; i++) expect(settlements[2 * i]).toEqual(settlements[2 * i + 1]);
        const charged = holds.reduce((sum, _hold, i) => sum + Math.min(actual(i), unit), 0);

        const entries = await expectSettledState(p);
        expect((await credits().balance(p)).availableMicros).toBe(50 * unit - charged);
        expect(entries.filter((e) => e.type === "hold")).toHaveLength(50);
        expect(
          entries
            .filter((e) => e.type !== "grant" && e.type !== "hold")
            .map((e) => `${e.type}:${e.chargedMicros}:${e.calls}`)
            .filter((t) => !t.startsWith("settle")),
        ).toEqual([]);
        expect(entries.filter((e) => e.type === "settle")).toHaveLength(50);
        const settledCost = entries.reduce((sum, e) => sum + (e.chargedMicros ?? 0), 0);
        expect(settledCost).toBe(charged);
      });
    });

    describe("ledger pages and bad input", () => {
      it("pages newest first with an opaque cursor", async () => {
        const p = newProject();
        for (let i = 1; i <= 5; i++) {
          now += 1;
          await credits().grant(p, i, "cli");
        }
        const first = await credits().ledger(p, { limit: 2 });
        expect(first.entries.map((e) => e.deltaMicros)).toEqual([5, 4]);
        const second = await credits().ledger(p, { limit: 2, cursor: first.cursor });
        expect(second.entries.map((e) => e.deltaMicros)).toEqual([3, 2]);
        const rest = await credits().ledger(p, { limit: 10, cursor: second.cursor });
        expect(rest.entries.map((e) => e.deltaMicros)).toEqual([1]);
        expect(rest.cursor).toBeUndefined();
      });

      it.each([
        ["negative", -5],
        ["zero", 0],
        ["fractional", 1.5],
        ["not a number", Number.NaN],
        ["absurd", 10 ** 13],
      ])("refuses a %s grant with 400 and writes nothing", async (_label, micros) => {
        const p = newProject();
        const err = await credits()
          .grant(p, micros, "cli")
          .catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ApiError);
        expect((err as ApiError).status).toBe(400);
        expect(await ledgerOf(p)).toEqual([]);
      });

      it("refuses bad pages", async () => {
        await expect(credits().ledger("x1", { limit: 0 })).rejects.toThrow(/'limit'/);
        await expect(credits().ledger("x1", { limit: 1001 })).rejects.toThrow(/'limit'/);
        await expect(credits().ledger("x1", { cursor: "bm9wZQ" })).rejects.toThrow(/'cursor'/);
      });
    });
  });

  describe(`credits contract, the sweeper: ${name}`, () => {
    opened();

    it("leaves holds alone until they expire, then releases one whose caller never came back", async () => {
      const p = newProject();
      await credits().grant(p, 10_000, "cli");
      now += 1000;
      await takeHold(p, 4_000);
      const before = await credits().balance(p);
      expect(await credits().releaseExpired(now + 15 * MINUTE - 1)).toEqual({
        holdsReleased: 0,
        settlementsCompleted: 0,
        grantsCompleted: 0,
      });
      expect(await credits().balance(p)).toEqual(before);
      expect(await credits().releaseExpired(now + 15 * MINUTE)).toEqual({
        holdsReleased: 1,
        settlementsCompleted: 0,
        grantsCompleted: 0,
      });
      const entries = await expectSettledState(p);
      expect(entries.map((e) => e.type)).toEqual(["release", "hold", "grant"]);
      expect((await credits().balance(p)).availableMicros).toBe(10_000);
      // Once swept, nothing is left to sweep.
      expect((await credits().releaseExpired(now + 30 * MINUTE)).holdsReleased).toBe(0);
    });

    it("settles a lease whose process died at the charges it noted, at expiry", async () => {
      const p = newProject();
      await credits().grant(p, 10_000, "cli");
      const lease = await takeHold(p, 6_000);
      await credits().recordCharges(lease, { chargedMicros: 2_500, uncollectedMicros: 100, calls: 3 });
      // The process dies here: calls after the last note go unpaid, the rest of the lease comes back.
      expect(await credits().releaseExpired(now + 15 * MINUTE)).toEqual({
        holdsReleased: 1,
        settlementsCompleted: 0,
        grantsCompleted: 0,
      });
      const entries = await expectSettledState(p);
      expect(entries.find((e) => e.type === "settle")).toMatchObject({
        type: "settle",
        chargedMicros: 2_500,
        uncollectedMicros: 100,
        calls: 3,
      });
      expect((await credits().balance(p)).availableMicros).toBe(7_500);
      // The caller, back late, settles again: it gets the sweeper's resolution and nothing moves.
      expect(
        await credits().settleCharges(lease, { chargedMicros: 0, uncollectedMicros: 0, calls: 0 }),
      ).toMatchObject({
        outcome: "settled",
        chargedMicros: 2_500,
      });
      expect((await credits().balance(p)).availableMicros).toBe(7_500);
    });
  });
}
