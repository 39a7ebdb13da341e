import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DynamoDBClient, GetItemCommand, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoCredits, GRANT_REPAIR_DELAY_MS } from "../../lambda/adapters/dynamodb/credits";
import { type TableNames, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { type Hold, type LedgerEntry, MAX_BALANCE_MICROS, newHoldId } from "../../lambda/core/credits";
import { ApiError } from "../../lambda/core/errors";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";

/** Thrown by the probe in place of a command: the process died there. */
class SimulatedCrash extends Error {}

/**
 * A real client that records the commands it sends and can "crash" at the n-th one: `before` (never
 * sent) or `after` (applied by the store, answer lost). Once crashed, it sends nothing more.
 */
function probeClient(endpoint: string, crash?: { at: number; when: "before" | "after" }) {
  const client = createDynamoClient({ endpoint });
  const commands: string[] = [];
  let dead = false;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (dead) throw new SimulatedCrash("the process is gone");
      commands.push(context.commandName ?? "?");
      const index = commands.length;
      if (crash?.at === index && crash.when === "before") {
        dead = true;
        throw new SimulatedCrash(`crashed before command ${index}`);
      }
      const out = await next(args);
      if (crash?.at === index) {
        dead = true;
        throw new SimulatedCrash(`crashed after command ${index}`);
      }
      return out;
    },
    { step: "initialize", name: "probe" },
  );
  return { client, commands };
}

const T0 = 1_700_000_000_000;
const MINUTE = 60_000;
let now = T0;
const clock = () => now;

let dataDir: string;
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;
let names: TableNames;
let projects = 0;
const newProject = () => `proj-${++projects}`;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-credits-"));
  dynamo = await startEmbeddedDynamo(dataDir);
  db = createDynamoClient({ endpoint: dynamo.endpoint });
  names = tableNames({});
  await ensureTables(db, names);
});

afterAll(async () => {
  db.destroy();
  await dynamo.close();
  rmSync(dataDir, { recursive: true, force: true });
});

function credits(client: DynamoDBClient = db): DynamoCredits {
  return new DynamoCredits(client, names, clock);
}

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

async function rawBalance(projectId: string) {
  const out = await db.send(
    new GetItemCommand({ TableName: names.credits, Key: marshall({ projectId }), ConsistentRead: true }),
  );
  return out.Item && unmarshall(out.Item);
}

/** No marker left and the ledger sums to the balance: the state every crash must be repaired to. */
async function expectSettledState(projectId: string): Promise<LedgerEntry[]> {
  const raw = await rawBalance(projectId);
  expect(raw?.holds ?? {}).toEqual({});
  expect(raw?.grants ?? {}).toEqual({});
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
    expect(await credits().hold(p, newHoldId(), 1, now + MINUTE)).toEqual({ ok: false, availableMicros: 0 });
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
    const other = createDynamoClient({ endpoint: dynamo.endpoint });
    const results = await Promise.all([
      credits().settle(raced, 100),
      credits(other).settle(raced, 200),
      credits().release(raced),
      credits(other).settle(raced, 300),
    ]);
    other.destroy();
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
    await expect(credits().hold(p, holdId, 1000, now + MINUTE)).rejects.toThrow(/already in use/);
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

  it("takes a hold in one round trip", async () => {
    const p = newProject();
    await credits().grant(p, 1_000_000, "cli");
    const probe = probeClient(dynamo.endpoint);
    const result = await credits(probe.client).hold(p, newHoldId(), 1000, now + MINUTE);
    expect(result.ok).toBe(true);
    expect(probe.commands).toEqual(["UpdateItemCommand"]);
    probe.client.destroy();
    if (result.ok) await credits().release(result.hold);
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
    expect(await credits().balance(p)).toMatchObject({ availableMicros: 6_000_000, heldMicros: 3_700_000 });
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
    // Four "processes": four clients, four credit stores.
    const clients = Array.from({ length: 4 }, () => createDynamoClient({ endpoint: dynamo.endpoint }));
    const stores = clients.map((client) => credits(client));
    const store = (i: number) => stores[i % stores.length] as DynamoCredits;
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
      holds.flatMap((hold, i) => [store(i).settle(hold, actual(i)), store(i + 1).settle(hold, actual(i))]),
    );
    for (let i = 0; i < holds.length; i++) expect(settlements[2 * i]).toEqual(settlements[2 * i + 1]);
    const charged = holds.reduce((sum, _hold, i) => sum + Math.min(actual(i), unit), 0);

    const entries = await expectSettledState(p);
    expect((await credits().balance(p)).availableMicros).toBe(50 * unit - charged);
    expect(entries.filter((e) => e.type === "hold")).toHaveLength(50);
    expect(entries.filter((e) => e.type === "settle")).toHaveLength(50);
    const settledCost = entries.reduce((sum, e) => sum + (e.chargedMicros ?? 0), 0);
    expect(settledCost).toBe(charged);
    for (const client of clients) client.destroy();
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

  it("refuses a grant that would take the balance past its cap", async () => {
    const p = newProject();
    await db.send(
      new PutItemCommand({
        TableName: names.credits,
        Item: marshall({ projectId: p, available: MAX_BALANCE_MICROS - 10, holds: {}, grants: {} }),
      }),
    );
    const err = await credits()
      .grant(p, 11, "cli")
      .catch((e: unknown) => e);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).message).toContain("would take the balance above");
    await credits().grant(p, 10, "cli");
    expect((await credits().balance(p)).availableMicros).toBe(MAX_BALANCE_MICROS);
  });

  it("refuses bad pages", async () => {
    await expect(credits().ledger("x1", { limit: 0 })).rejects.toThrow(/'limit'/);
    await expect(credits().ledger("x1", { limit: 1001 })).rejects.toThrow(/'limit'/);
    await expect(credits().ledger("x1", { cursor: "bm9wZQ" })).rejects.toThrow(/'cursor'/);
  });
});

describe("crashes between the steps, repaired by the sweeper", () => {
  // Tables of its own: the sweeper works on whole tables, and its reports are checked exactly.
  beforeAll(async () => {
    names = tableNames({}, "dmt-sweep-");
    await ensureTables(db, names);
  });

  /** Runs `operation` with a client that crashes at each command in turn, before and after it. */
  async function eachCrash(
    expected: string[],
    setup: () => Promise<{ projectId: string; operation: (store: DynamoCredits) => Promise<unknown> }>,
    check: (projectId: string, crash: string) => Promise<void>,
  ): Promise<void> {
    // A dry run pins down the protocol's commands, in order.
    const dry = await setup();
    const probe = probeClient(dynamo.endpoint);
    await dry.operation(credits(probe.client));
    probe.client.destroy();
    expect(probe.commands).toEqual(expected);
    await check(dry.projectId, "none");

    for (let at = 1; at <= expected.length; at++) {
      for (const when of ["before", "after"] as const) {
        const { projectId, operation } = await setup();
        const crashing = probeClient(dynamo.endpoint, { at, when });
        await expect(operation(credits(crashing.client))).rejects.toThrow(SimulatedCrash);
        crashing.client.destroy();
        await check(projectId, `${when} ${expected[at - 1]} #${at}`);
      }
    }
  }

  it("hold: a debit without its caller is released at expiry", async () => {
    await eachCrash(
      ["UpdateItemCommand"],
      async () => {
        const projectId = newProject();
        await credits().grant(projectId, 10_000, "cli");
        return {
          projectId,
          operation: async (store) => {
            const result = await store.hold(projectId, newHoldId(), 4_000, now + 15 * MINUTE);
            // A caller that got its hold settles it; the crash runs never get here.
            if (result.ok) await credits().settle(result.hold, 1_000);
          },
        };
      },
      async (projectId, crash) => {
        const before = await credits().balance(projectId);
        // Not expired yet: the sweeper leaves it alone.
        expect(await credits().releaseExpired(now)).toEqual({
          holdsReleased: 0,
          settlementsCompleted: 0,
          grantsCompleted: 0,
        });
        expect(await credits().balance(projectId)).toEqual(before);
        const report = await credits().releaseExpired(now + 15 * MINUTE);
        expect(report.holdsReleased, crash).toBe(before.openHolds);
        const entries = await expectSettledState(projectId);
        const expected = crash === "none" ? 9_000 : 10_000;
        expect((await credits().balance(projectId)).availableMicros, crash).toBe(expected);
        expect(entries.filter((e) => e.type === "hold").length, crash).toBe(entries.length === 1 ? 0 : 1);
      },
    );
  });

  it("lease: a process that died settles at the charges it noted, at expiry", async () => {
    const projectId = newProject();
    await credits().grant(projectId, 10_000, "cli");
    const lease = await takeHold(projectId, 6_000);
    await credits().recordCharges(lease, { chargedMicros: 2_500, uncollectedMicros: 100, calls: 3 });
    // The process dies here: calls after the last note go unpaid, the rest of the lease comes back.
    expect(await credits().releaseExpired(now + 15 * MINUTE)).toEqual({
      holdsReleased: 1,
      settlementsCompleted: 0,
      grantsCompleted: 0,
    });
    const entries = await expectSettledState(projectId);
    expect(entries.find((e) => e.type === "settle")).toMatchObject({
      type: "settle",
      chargedMicros: 2_500,
      uncollectedMicros: 100,
      calls: 3,
    });
    expect((await credits().balance(projectId)).availableMicros).toBe(7_500);
  });

  it("settle: whatever step it died at, the hold resolves once and the ledger matches", async () => {
    let hold: Hold | undefined;
    await eachCrash(
      ["GetItemCommand", "PutItemCommand", "PutItemCommand", "UpdateItemCommand"],
      async () => {
        const projectId = newProject();
        await credits().grant(projectId, 10_000, "cli");
        const taken = await takeHold(projectId, 4_000);
        hold = taken;
        return { projectId, operation: (store) => store.settle(taken, 1_500) };
      },
      async (projectId, crash) => {
        if (!hold) throw new Error("no hold");
        const report = await credits().releaseExpired(now + 15 * MINUTE);
        expect(report.grantsCompleted).toBe(0);
        const entries = await expectSettledState(projectId);
        const resolution = entries.find((e) => e.type === "settle" || e.type === "release");
        expect(resolution, crash).toBeDefined();
        expect(entries.map((e) => e.type).sort(), crash).toEqual(["grant", "hold", resolution?.type].sort());
        // Settled when the settlement reached the ledger before the crash, else released in full.
        const charged = resolution?.type === "settle" ? 1_500 : 0;
        expect((await credits().balance(projectId)).availableMicros, crash).toBe(10_000 - charged);
        // The caller, back, settles again: it gets the first resolution and nothing moves.
        const again = await credits().settle(hold, 2_000);
        expect(again.chargedMicros, crash).toBe(charged);
        expect((await credits().balance(projectId)).availableMicros, crash).toBe(10_000 - charged);
      },
    );
  });

  it("settle: a settlement written but not applied is completed, not released", async () => {
    const p = newProject();
    await credits().grant(p, 10_000, "cli");
    const hold = await takeHold(p, 4_000);
    // Crash after the settlement entry (s2, the third command) reached the ledger.
    const crashing = probeClient(dynamo.endpoint, { at: 3, when: "after" });
    await expect(credits(crashing.client).settle(hold, 2_500)).rejects.toThrow(SimulatedCrash);
    crashing.client.destroy();
    expect((await credits().balance(p)).openHolds).toBe(1);
    expect(await credits().releaseExpired(now + 15 * MINUTE)).toEqual({
      holdsReleased: 0,
      settlementsCompleted: 1,
      grantsCompleted: 0,
    });
    await expectSettledState(p);
    expect((await credits().balance(p)).availableMicros).toBe(7_500);
  });

  it("grant: the balance and its ledger entry agree after the sweeper", async () => {
    await eachCrash(
      ["PutItemCommand", "UpdateItemCommand", "PutItemCommand", "UpdateItemCommand"],
      async () => {
        const projectId = newProject();
        return { projectId, operation: (store) => store.grant(projectId, 7_000, "cli", "crash test") };
      },
      async (projectId, crash) => {
        // Too young to repair: the grant's own request may still be finishing.
        await credits().releaseExpired(now);
        const pending = Object.keys((await rawBalance(projectId))?.grants ?? {}).length;
        const report = await credits().releaseExpired(now + GRANT_REPAIR_DELAY_MS);
        expect(report.grantsCompleted, crash).toBe(pending);
        const entries = await expectSettledState(projectId);
        const granted = (await credits().balance(projectId)).availableMicros;
        expect([0, 7_000], crash).toContain(granted);
        expect(entries.filter((e) => e.type === "grant").length, crash).toBe(granted / 7_000);
        if (granted > 0) expect(entries[0], crash).toMatchObject({ source: "cli", note: "crash test" });
      },
    );
  });
});
