import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { MemoryCredits } from "../../../lambda/adapters/memory/credits";
import type { LedgerEntry } from "../../../lambda/core/credits";
import { silentLogger } from "../../../lambda/core/logger";
import { CreditLeases, type LeaseOptions, type Reservation } from "../../../lambda/metering/credit-leases";

/**
 * Credit leases over the credits port (the memory adapter, which passes the same contract as DynamoDB):
 * what calls take, note, settle and are refused.
 */
let now = 1_700_000_000_000;
const clock = () => now;
const credits = new MemoryCredits(clock);
let projects = 0;

const OPTIONS: LeaseOptions = {
  callsPerLease: 4,
  openMs: 30_000,
  idleMs: 60_000,
  noteMs: 60_000,
  holdTtlMs: 3_600_000,
};

async function funded(micros: number): Promise<string> {
  const projectId = `lease-${++projects}`;
  await credits.grant(projectId, micros, "test");
  return projectId;
}

function leases(options: Partial<LeaseOptions> = {}): CreditLeases {
  return new CreditLeases(credits, clock, silentLogger, { ...OPTIONS, ...options });
}

async function reserve(book: CreditLeases, projectId: string, micros: number): Promise<Reservation> {
  const result = await book.reserve(projectId, micros);
  if (!result.ok) throw new Error(`refused with ${result.availableMicros} available`);
  return result.reservation;
}

async function resolutions(projectId: string): Promise<LedgerEntry[]> {
  const { entries } = await credits.ledger(projectId, { limit: 100 });
  return entries.filter((e) => e.type === "settle" || e.type === "release");
}

describe("credit leases", () => {
  it("takes several calls' holds from one lease and settles it once at their total", async () => {
    const projectId = await funded(10_000);
    const book = leases();
    const calls = [];
    for (let i = 0; i < 3; i++) calls.push(await reserve(book, projectId, 100));
    // One hold of four calls' worth in the store; the calls took theirs in memory.
    expect(await credits.balance(projectId)).toMatchObject({
      availableMicros: 9_600,
      heldMicros: 400,
      openHolds: 1,
    });
    await Promise.all(calls.map((call, i) => book.finish(call, i === 2 ? 150 : 60)));
    await book.settleAll();
    expect(await resolutions(projectId)).toEqual([
      expect.objectContaining({ type: "settle", chargedMicros: 220, uncollectedMicros: 50, calls: 3 }),
    ]);
    expect(await credits.balance(projectId)).toMatchObject({ availableMicros: 9_780, openHolds: 0 });
  });

  it("takes the next lease in the background before the current one runs out", async () => {
    const projectId = await funded(10_000);
    // Counts the holds the book asks the store for.
    let holds = 0;
    const counted = {
      hold: (...args: Parameters<MemoryCredits["hold"]>) => {
        holds++;
        return credits.hold(...args);
      },
      recordCharges: credits.recordCharges.bind(credits),
      settleCharges: credits.settleCharges.bind(credits),
    };
    const book = new CreditLeases(counted, clock, silentLogger, OPTIONS);
    const calls = [];
    // The fourth call leaves the lease empty: the next one is taken meanwhile, and the fifth uses it.
    for (let i = 0; i < 4; i++) calls.push(await reserve(book, projectId, 100));
    await book.idle();
    expect((await credits.balance(projectId)).openHolds).toBe(2);
    calls.push(await reserve(book, projectId, 100));
    expect(holds).toBe(2);
    for (const call of calls) await book.finish(call, 10);
    await book.settleAll();
    const settled = await resolutions(projectId);
    expect(settled.reduce((sum, e) => sum + (e.calls ?? 0), 0)).toBe(5);
    expect(await credits.balance(projectId)).toMatchObject({ availableMicros: 9_950, openHolds: 0 });
  });

  it("opens a new lease when a call does not fit, settling the full one once its calls ended", async () => {
    const projectId = await funded(10_000);
    const book = leases();
    const first = await reserve(book, projectId, 100);
    const larger = await reserve(book, projectId, 350);
    expect((await credits.balance(projectId)).openHolds).toBe(2);
    await book.finish(first, 40);
    await book.idle();
    // The first lease took no new call and its last one ended: settled.
    expect(await resolutions(projectId)).toEqual([expect.objectContaining({ chargedMicros: 40, calls: 1 })]);
    await book.finish(larger, 0);
    await book.settleAll();
    expect(await credits.balance(projectId)).toMatchObject({ availableMicros: 9_960, openHolds: 0 });
  });

  it("leases whole calls' worth of what is left when the balance is short, and refuses what it cannot cover", async () => {
    const projectId = await funded(1_000);
    const book = leases();
    // Four calls of 300 would want 1,200: short, the lease takes half of the 1,000 in whole calls.
    const first = await reserve(book, projectId, 300);
    // That lease is full: the next is taken at once, a quarter of the 700 left but at least a call.
    await book.idle();
    expect(await credits.balance(projectId)).toMatchObject({
      availableMicros: 400,
      heldMicros: 600,
      openHolds: 2,
    });
    const second = await reserve(book, projectId, 300);
    await book.idle();
    const third = await reserve(book, projectId, 300);
    await book.idle();
    expect((await credits.balance(projectId)).availableMicros).toBe(100);
    expect(await book.reserve(projectId, 300)).toEqual({ ok: false, availableMicros: 100 });
    // Concurrent calls too large for the balance share one refusal.
    const refused = await Promise.all([book.reserve(projectId, 400), book.reserve(projectId, 500)]);
    expect(refused).toEqual([
      { ok: false, availableMicros: 100 },
      { ok: false, availableMicros: 100 },
    ]);
    for (const call of [first, second, third]) await book.finish(call, 300);
    await book.settleAll();
    expect(await credits.balance(projectId)).toMatchObject({ availableMicros: 100, openHolds: 0 });
  });

  it("stops using a lease once it has been open `openMs`", async () => {
    const projectId = await funded(10_000);
    const book = leases();
    const early = await reserve(book, projectId, 100);
    now += OPTIONS.openMs;
    const late = await reserve(book, projectId, 100);
    expect((await credits.balance(projectId)).openHolds).toBe(2);
    await book.finish(early, 10);
    await book.finish(late, 20);
    await book.settleAll();
    expect((await resolutions(projectId)).map((e) => e.chargedMicros).sort()).toEqual([10, 20]);
  });

  it("with noteMs 0, a call's charge is on the store once `finish` resolves", async () => {
    const projectId = await funded(10_000);
    const book = leases({ noteMs: 0 });
    const call = await reserve(book, projectId, 1_000);
    await book.finish(call, 250);
    // Spent, though the lease is still open: a process frozen from here on loses none of it.
    expect(await credits.balance(projectId)).toMatchObject({
      availableMicros: 6_000,
      heldMicros: 3_750,
      openHolds: 1,
    });
    await book.settleAll();
  });

  it("notes charges within noteMs and settles a lease idle for idleMs, on its own", async () => {
    const projectId = await funded(10_000);
    const book = leases({ noteMs: 20, idleMs: 200 });
    const running = await reserve(book, projectId, 100);
    const done = await reserve(book, projectId, 100);
    await book.finish(done, 70);
    let balance = await credits.balance(projectId);
    while (balance.availableMicros + balance.heldMicros === 10_000) {
      await sleep(10);
      balance = await credits.balance(projectId);
    }
    expect(balance).toMatchObject({ availableMicros: 9_600, heldMicros: 330, openHolds: 1 });
    await book.finish(running, 5);
    while ((await credits.balance(projectId)).openHolds > 0) {
      await sleep(20);
      now += 50;
    }
    expect(await credits.balance(projectId)).toMatchObject({ availableMicros: 9_925, heldMicros: 0 });
  });

  it("two processes reserving at once never hold more than the balance, and settle to what their calls cost", async () => {
    const projectId = await funded(3_000);
    const books = [leases(), leases()];
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) => (books[i % 2] as CreditLeases).reserve(projectId, 100)),
    );
    // Each call's reservation, with the process that took it (and finishes it).
    const taken = results.flatMap((r, i) =>
      r.ok ? [{ book: books[i % 2] as CreditLeases, r: r.reservation }] : [],
    );
    expect(taken.length).toBeGreaterThan(0);
    expect(taken.length * 100).toBeLessThanOrEqual(3_000);
    for (const { book, r } of taken) await book.finish(r, 70);
    await Promise.all(books.map((book) => book.settleAll()));
    expect(await credits.balance(projectId)).toMatchObject({
      availableMicros: 3_000 - 70 * taken.length,
      openHolds: 0,
    });
  });
});
