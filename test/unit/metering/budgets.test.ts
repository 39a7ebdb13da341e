import { describe, expect, it } from "vitest";
import { MemoryBudgets } from "../../../lambda/adapters/memory/budgets";
import {
  type BudgetInput,
  type BudgetReport,
  type BudgetWatcher,
  counterId,
  newBudget,
  tpmCounterId,
  tpmSpan,
  windowSpan,
} from "../../../lambda/core/budgets";
import { silentLogger } from "../../../lambda/core/logger";
import { type BudgetAdmission, type BudgetClaim, BudgetGuard } from "../../../lambda/metering/budgets";

/**
 * Budgets and tokens-per-minute limits as holds on shared counters (the memory adapter, which passes
 * the DynamoDB adapter's contract): the windows, the scopes, hard and soft, and what a call that ends
 * gives back.
 */

const T0 = Date.UTC(2026, 10, 22, 12);
const MINUTE = 60_000;
const USD = 1_000_000;

function setup(watcher?: BudgetWatcher) {
  let now = T0;
  const clock = () => now;
  const counters = new MemoryBudgets(clock);
  const guard = (cacheMs = 0, shards?: { tpmShards: number; tpmShard: number }) =>
    new BudgetGuard({
      counters,
      clock,
      logger: silentLogger,
      cacheMs,
      holdTtlMs: 15 * MINUTE,
      noteChargesMs: 0,
      ...(watcher && { watcher }),
      ...shards,
    });
  return {
    counters,
    guard: guard(),
    guard2: guard(),
    /** A process of a host that splits a key's minute over `tpmShards` counters, `tpmShard` its own. */
    sharded: (tpmShards: number, tpmShard: number) => guard(0, { tpmShards, tpmShard }),
    /** Sets a budget of the project `proj`. */
    budget: async (input: Omit<BudgetInput, "projectId">) => {
      const budget = newBudget({ projectId: "proj", ...input }, now);
      await counters.put(budget);
      return budget;
    },
    at(time: number) {
      now = time;
    },
  };
}

const claim = (maxCostMicros: number, changes: Partial<BudgetClaim> = {}): BudgetClaim => ({
  projectId: "proj",
  keyId: "abcdefghij012345",
  userId: null,
  managed: true,
  maxCostMicros: () => maxCostMicros,
  ...changes,
});

/** Admits a call, and ends it at `cost` when admitted. */
async function call(guard: BudgetGuard, maxCost: number, cost: number, changes: Partial<BudgetClaim> = {}) {
  const admission = await guard.admit(claim(maxCost, changes));
  if (admission.ok) await guard.finish(admission.holds, cost, 0);
  return admission;
}

const refusal = (admission: BudgetAdmission) => (admission.ok ? undefined : admission.error);

describe("a hard budget", () => {
  it("admits calls while their maximum cost fits, charges what they cost, and refuses 402 beyond", async () => {
    const s = setup();
    await s.budget({ usd: "1", window: "day" });
    // Each call may cost 0.40 and costs 0.30: the third fits only because the first two cost less than held.
    expect((await call(s.guard, 0.4 * USD, 0.3 * USD)).ok).toBe(true);
    expect((await call(s.guard, 0.4 * USD, 0.3 * USD)).ok).toBe(true);
    const third = await call(s.guard, 0.4 * USD, 0.3 * USD);
    expect(third.ok).toBe(true);
    const fourth = await call(s.guard, 0.4 * USD, 0.3 * USD);
    expect(refusal(fourth)).toMatchObject({ status: 402, type: "billing_error", code: "budget_exceeded" });
    expect(refusal(fourth)?.message).toContain("has $0.10 left");
    await s.guard.settle();
    expect(await s.counters.spend(`${(await s.counters.list("proj"))[0]?.budgetId}#d2026-11-22`)).toEqual({
      spentMicros: 0.9 * USD,
      heldMicros: 0,
    });
  });

  it("a call that failed gives its whole hold back", async () => {
    const s = setup();
    await s.budget({ usd: "1", window: "total" });
    for (let i = 0; i < 5; i++) expect((await call(s.guard, 0.6 * USD, 0)).ok).toBe(true);
  });

  it("never lets calls at once, from two processes, hold past the limit", async () => {
    const s = setup();
    await s.budget({ usd: "1", window: "month" });
    const admissions = await Promise.all(
      Array.from({ length: 30 }, (_, i) => (i % 2 ? s.guard : s.guard2).admit(claim(0.1 * USD))),
    );
    const admitted = admissions.filter((a) => a.ok).length;
    expect(admitted).toBeGreaterThan(0);
    expect(admitted).toBeLessThanOrEqual(10);
    for (const a of admissions) if (!a.ok) expect(a.error.code).toBe("budget_exceeded");
  });

  it("counts by UTC day, month or in total, each window a counter of its own", async () => {
    const s = setup();
    await s.budget({ usd: "1", window: "day" });
    s.at(Date.UTC(2026, 10, 22, 23, 59));
    expect((await call(s.guard, USD, USD)).ok).toBe(true);
    expect((await call(s.guard, 1, 1)).ok).toBe(false);
    s.at(Date.UTC(2026, 10, 23, 0, 0));
    expect((await call(s.guard, USD, USD)).ok).toBe(true);

    const m = setup();
    await m.budget({ usd: "1", window: "month" });
    m.at(Date.UTC(2026, 10, 30, 23));
    expect((await call(m.guard, USD, USD)).ok).toBe(true);
    const refused = refusal(await call(m.guard, 1, 1));
    expect(refused?.headers["X-Budget-Reset"]).toBe(String(Date.UTC(2026, 11, 1) / 1000));
    m.at(Date.UTC(2026, 11, 1));
    expect((await call(m.guard, USD, USD)).ok).toBe(true);

    const t = setup();
    await t.budget({ usd: "1", window: "total" });
    expect((await call(t.guard, USD, USD)).ok).toBe(true);
    t.at(Date.UTC(2027, 5, 1));
    const never = refusal(await call(t.guard, 1, 1));
    expect(never?.message).toContain("It does not reset.");
    expect(never?.headers).not.toHaveProperty("X-Budget-Reset");
  });

  it("applies to its key or end user only; a budget of each user counts each apart", async () => {
    const s = setup();
    await s.budget({ usd: "1", window: "day", keyId: "keyaaaaaaaaaaaaa" });
    await s.budget({ usd: "2", window: "day", userId: "*" });
    expect((await call(s.guard, USD, USD, { keyId: "keyaaaaaaaaaaaaa" })).ok).toBe(true);
    expect((await call(s.guard, USD, USD, { keyId: "keyaaaaaaaaaaaaa" })).ok).toBe(false);
    expect((await call(s.guard, USD, USD, { keyId: "keybbbbbbbbbbbbb" })).ok).toBe(true);

    expect((await call(s.guard, 2 * USD, 2 * USD, { keyId: "keybbbbbbbbbbbbb", userId: "alice" })).ok).toBe(
      true,
    );
    const alice = refusal(await call(s.guard, 1, 1, { keyId: "keybbbbbbbbbbbbb", userId: "alice" }));
    expect(alice?.message).toContain("the daily budget of each end user");
    expect((await call(s.guard, 2 * USD, 2 * USD, { keyId: "keybbbbbbbbbbbbb", userId: "bob" })).ok).toBe(
      true,
    );
  });

  it("counts BYOK calls only when it includes them", async () => {
    const s = setup();
    await s.budget({ usd: "1", window: "day" });
    for (let i = 0; i < 3; i++) expect((await call(s.guard, USD, USD, { managed: false })).ok).toBe(true);
    const both = setup();
    await both.budget({ usd: "1", window: "day", includeByok: true });
    expect((await call(both.guard, USD, USD, { managed: false })).ok).toBe(true);
    expect((await call(both.guard, 1, 1, { managed: false })).ok).toBe(false);
  });

  it("a refusal names the tightest of the budgets that refused, and gives back what the others took", async () => {
    const s = setup();
    await s.budget({ usd: "5", window: "month" });
    await s.budget({ usd: "1", window: "day" });
    expect((await call(s.guard, 0.8 * USD, 0.8 * USD)).ok).toBe(true);
    const refused = refusal(await call(s.guard, 0.5 * USD, 0));
    expect(refused?.message).toContain("the project's daily budget");
    // Once this process's leases are settled (idle, or at shutdown), the monthly window counts only
    // what the first call cost: the refused call's hold on it came back.
    await s.guard.settle();
    const month = (await s.counters.list("proj")).find((b) => b.window === "month");
    expect(await s.counters.spend(`${month?.budgetId}#m2026-11`)).toEqual({
      spentMicros: 0.8 * USD,
      heldMicros: 0,
    });
  });
});

describe("a soft budget", () => {
  it("never refuses, and tells the watcher each window's spend", async () => {
    const reports: BudgetReport[] = [];
    const s = setup({ watching: async () => true, report: async (report) => void reports.push(report) });
    const budget = await s.budget({ usd: "1", window: "day", soft: true });
    for (let i = 0; i < 3; i++) {
      const admission = await s.guard.admit(claim(0.6 * USD));
      expect(admission.ok).toBe(true);
      if (!admission.ok) continue;
      await s.guard.finish(admission.holds, 0.6 * USD, 0);
      await s.guard.report({ userId: null, hideUserId: false }, admission.holds.budgets);
    }
    expect(reports.map((r) => [r.budget.budgetId, r.usedMicros, r.refusedMicros])).toEqual([
      [budget.budgetId, 0.6 * USD, undefined],
      [budget.budgetId, 1.2 * USD, undefined],
      [budget.budgetId, 1.8 * USD, undefined],
    ]);
  });
});

describe("tokens per minute", () => {
  const tpm = (limit: number, estimate: number) => ({ tpm: { limit, estimate: () => estimate } });

  it("holds the estimate in the key's minute, settles to the tokens used, and refuses 429 until the next minute", async () => {
    const s = setup();
    const first = await s.guard.admit(claim(0, tpm(1_000, 600)));
    if (!first.ok) throw first.error;
    // Used less than estimated: the rest is room again.
    await s.guard.finish(first.holds, 0, 300);
    expect((await s.guard.admit(claim(0, tpm(1_000, 600)))).ok).toBe(true);
    const refused = refusal(await s.guard.admit(claim(0, tpm(1_000, 600))));
    expect(refused).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
    expect(refused?.headers["Retry-After"]).toBe("60");
    s.at(T0 + MINUTE);
    expect((await s.guard.admit(claim(0, tpm(1_000, 600)))).ok).toBe(true);
  });

  it("wins over a budget's refusal: it passes within a minute", async () => {
    const s = setup();
    await s.budget({ usd: "1", window: "day" });
    const refused = refusal(await s.guard.admit(claim(2 * USD, tpm(10, 50))));
    expect(refused?.code).toBe("rate_limit_exceeded");
  });

  it("notes a call's tokens in batches even where budgets are noted before the call ends (Lambda), and settles them exactly", async () => {
    const s = setup();
    const budget = await s.budget({ usd: "10", window: "day" });
    const admitted = await s.guard.admit(claim(USD / 10, tpm(1_000_000, 600)));
    if (!admitted.ok) throw admitted.error;
    await s.guard.finish(admitted.holds, USD / 20, 450);
    const budgetCounter = counterId(budget, windowSpan("day", T0), null);
    const tokensCounter = tpmCounterId("abcdefghij012345", tpmSpan(T0));
    // The budget's charge is on the store when the call's after-work ends; the tokens wait for a batch.
    expect([...(await s.counters.charges(budgetCounter)).noted.values()]).toEqual([USD / 20]);
    expect([...(await s.counters.charges(tokensCounter)).noted.values()]).toEqual([0]);
    // Until settled the lease counts in full against the minute: nothing a later call could overrun.
    expect((await s.counters.spend(tokensCounter)).heldMicros).toBeGreaterThanOrEqual(600);
    await s.guard.settle();
    expect(await s.counters.spend(tokensCounter)).toEqual({ spentMicros: 450, heldMicros: 0 });
    expect(await s.counters.spend(budgetCounter)).toEqual({ spentMicros: USD / 20, heldMicros: 0 });
  });

  describe("split over shards (Lambda: thousands of containers take the new minute's leases at once)", () => {
    const MILLION = 1_000_000;
    const span = tpmSpan(T0);
    const shardIds = (n: number) =>
      Array.from({ length: n }, (_, k) => tpmCounterId("abcdefghij012345", span, k));
    const heldOn = async (s: ReturnType<typeof setup>, ids: string[]) =>
      Promise.all(ids.map(async (id) => (await s.counters.spend(id)).heldMicros));

    it("a process takes from its own shard, another process from its own", async () => {
      const s = setup();
      const a = s.sharded(16, 1);
      const b = s.sharded(16, 2);
      expect((await a.admit(claim(0, tpm(4 * MILLION, 1_000)))).ok).toBe(true);
      expect((await b.admit(claim(0, tpm(4 * MILLION, 1_000)))).ok).toBe(true);
      // 4 M tokens a minute: 4 shards (one per million), 1 M each.
      const held = await heldOn(s, shardIds(4));
      expect(held[0]).toBe(0);
      expect(held[1]).toBeGreaterThan(0);
      expect(held[2]).toBeGreaterThan(0);
      expect(held[3]).toBe(0);
      expect((await s.counters.spend(tpmCounterId("abcdefghij012345", span))).heldMicros).toBe(0);
    });

    it("uses the other shards when its own is short, never passes the limit, and refuses 429 when all are", async () => {
      const s = setup();
      const guard = s.sharded(16, 0);
      let admitted = 0;
      for (let i = 0; i < 40; i++) {
        const result = await guard.admit(claim(0, tpm(4 * MILLION, 250_000)));
        if (!result.ok) {
          expect(result.error).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
          break;
        }
        admitted++;
      }
      // The whole minute's 4 M tokens, 16 calls of 250k, from all four shards, and not one more.
      expect(admitted).toBe(16);
      expect(await heldOn(s, shardIds(4))).toEqual([MILLION, MILLION, MILLION, MILLION]);
      // Another process finds every shard full.
      const other = s.sharded(16, 3);
      expect(refusal(await other.admit(claim(0, tpm(4 * MILLION, 250_000))))?.code).toBe(
        "rate_limit_exceeded",
      );
      s.at(T0 + MINUTE);
      expect((await guard.admit(claim(0, tpm(4 * MILLION, 250_000)))).ok).toBe(true);
    });

    it("keeps a limit under a million tokens in one counter", async () => {
      const s = setup();
      expect((await s.sharded(16, 5).admit(claim(0, tpm(900_000, 1_000)))).ok).toBe(true);
      expect((await s.counters.spend(tpmCounterId("abcdefghij012345", span))).heldMicros).toBeGreaterThan(0);
    });

    it("settles each call's real tokens on the shard it held from", async () => {
      const s = setup();
      const guard = s.sharded(16, 0);
      const first = await guard.admit(claim(0, tpm(2 * MILLION, 400_000)));
      const second = await guard.admit(claim(0, tpm(2 * MILLION, 400_000)));
      const third = await guard.admit(claim(0, tpm(2 * MILLION, 400_000)));
      if (!first.ok || !second.ok || !third.ok) throw new Error("refused");
      await guard.finish(first.holds, 0, 100_000);
      await guard.finish(second.holds, 0, 100_000);
      await guard.finish(third.holds, 0, 100_000);
      await guard.settle();
      const spent = await Promise.all(shardIds(2).map((id) => s.counters.spend(id)));
      expect(spent.reduce((sum, x) => sum + x.spentMicros, 0)).toBe(300_000);
      expect(spent.every((x) => x.heldMicros === 0)).toBe(true);
    });
  });
});
