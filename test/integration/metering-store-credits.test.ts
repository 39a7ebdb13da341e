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
import type { ApiError } from "../../lambda/core/errors";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { creditStoreContract } from "../support/contracts/credits";

/** Thrown by the probe in place of a command: the process died there. */
class SimulatedCrash extends Error {}

/**
 * A real client that records the commands it sends and can "crash" at the n-th one: `before` (never
 * sent) or `after` (applied by the store, answer lost). Once crashed, it sends nothing more.
 */
function probeClient(endpoint: string, crash?: { at: number; when: "before" | "after" }) {
  const client = createDynamoClient({ endpoint });
  const commands: string[] = [];
  const answered: string[] = [];
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
      answered.push(context.commandName ?? "?");
      if (crash?.at === index) {
        dead = true;
        throw new SimulatedCrash(`crashed after command ${index}`);
      }
      return out;
    },
    { step: "initialize", name: "probe" },
  );
  return { client, commands, answered };
}

const T0 = 1_700_000_000_000;
const MINUTE = 60_000;
const now = T0;
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
  // No transient marker of a hold's take (p_) or resolution (r_) is left, and no hold is open.
  expect(Object.keys(raw ?? {}).filter((name) => /^[pr]_/.test(name))).toEqual([]);
  expect(raw?.open ?? 0).toBe(0);
  expect(raw?.held ?? 0).toBe(0);
  expect(raw?.grants ?? {}).toEqual({});
  const entries = await ledgerOf(projectId);
  const balance = await credits().balance(projectId);
  expect(balance).toMatchObject({ heldMicros: 0, openHolds: 0 });
  expect(total(entries)).toBe(balance.availableMicros);
  expect(balance.availableMicros).toBeGreaterThanOrEqual(0);
  return entries;
}

/** A hold, with its item written (the store that took it waits for that before its next step). */
async function takeHold(projectId: string, micros: number, ttl = 15 * MINUTE): Promise<Hold> {
  const store = credits();
  const result = await store.hold(projectId, newHoldId(), micros, now + ttl);
  if (!result.ok) throw new Error("hold refused");
  await store.recordCharges(result.hold, { chargedMicros: 0, uncollectedMicros: 0, calls: 0 });
  return result.hold;
}

// The port's cases (core/credits.ts), on tables of their own for each group of cases.
let contractTables = 0;
creditStoreContract("DynamoCredits over dynalite", async (contractClock) => {
  const tables = tableNames({}, `dmt-credits-contract-${++contractTables}-`);
  await ensureTables(db, tables);
  const others: DynamoDBClient[] = [];
  return {
    store: new DynamoCredits(db, tables, contractClock),
    another() {
      const client = createDynamoClient({ endpoint: dynamo.endpoint });
      others.push(client);
      return new DynamoCredits(client, tables, contractClock);
    },
    async markers(projectId) {
      const out = await db.send(
        new GetItemCommand({ TableName: tables.credits, Key: marshall({ projectId }), ConsistentRead: true }),
      );
      const raw = out.Item && unmarshall(out.Item);
      // Open holds: marked on the balance (older ones), being taken or resolved (p_, r_), or items.
      const transient = Object.keys(raw ?? {}).filter((name) => /^[pr]_/.test(name));
      const open = raw?.open ? [`${raw.open} open hold items`] : [];
      return {
        holds: [...Object.keys(raw?.holds ?? {}), ...transient, ...open],
        grants: Object.keys(raw?.grants ?? {}),
      };
    },
    async close() {
      for (const client of others) client.destroy();
    },
  };
});

describe("DynamoDB specifics", () => {
  it("takes a hold in one round trip; its item and the marker's removal follow off the caller's path", async () => {
    const p = newProject();
    await credits().grant(p, 1_000_000, "cli");
    const probe = probeClient(dynamo.endpoint);
    const store = credits(probe.client);
    const result = await store.hold(p, newHoldId(), 1000, now + MINUTE);
    expect(result.ok).toBe(true);
    // What the caller waited for: the first command, answered before the next one started.
    expect(probe.answered[0]).toBe("UpdateItemCommand");
    if (result.ok) await store.release(result.hold);
    expect(probe.commands.slice(0, 3)).toEqual(["UpdateItemCommand", "PutItemCommand", "UpdateItemCommand"]);
    probe.client.destroy();
    await expectSettledState(p);
  });

  it("keeps the balance item small however many holds are open", async () => {
    const p = newProject();
    await credits().grant(p, 100_000_000, "cli");
    const store = credits();
    const holds: Hold[] = [];
    for (let i = 0; i < 40; i++) {
      const result = await store.hold(p, newHoldId(), 1000, now + MINUTE);
      if (result.ok) holds.push(result.hold);
    }
    for (const hold of holds)
      await store.recordCharges(hold, { chargedMicros: 10, uncollectedMicros: 0, calls: 1 });
    const raw = await rawBalance(p);
    // 40 open holds, none of them on the balance: its size does not grow with them.
    expect(JSON.stringify(raw).length).toBeLessThan(400);
    expect(await credits().balance(p)).toMatchObject({
      openHolds: 40,
      heldMicros: 40 * 990,
      chargedInFlightMicros: 400,
    });
    for (const hold of holds)
      await store.settleCharges(hold, { chargedMicros: 10, uncollectedMicros: 0, calls: 1 });
    await expectSettledState(p);
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

  it("hold then settle: whatever step it died at, the hold resolves once at expiry and the ledger matches", async () => {
    await eachCrash(
      // t1, t2, t3; then the claim, the ledger's two entries, the balance, the hold's item, the marker.
      [
        "UpdateItemCommand",
        "PutItemCommand",
        "UpdateItemCommand",
        "UpdateItemCommand",
        "PutItemCommand",
        "PutItemCommand",
        "UpdateItemCommand",
        "DeleteItemCommand",
        "UpdateItemCommand",
      ],
      async () => {
        const projectId = newProject();
        await credits().grant(projectId, 10_000, "cli");
        return {
          projectId,
          operation: async (store) => {
            const result = await store.hold(projectId, newHoldId(), 4_000, now + 15 * MINUTE);
            if (result.ok) await store.settle(result.hold, 1_000);
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
        // A hold whose balance part was applied (r3) but whose item was left is finished too: counted.
        const finished = report.holdsReleased + report.settlementsCompleted;
        expect(finished, crash).toBeGreaterThanOrEqual(before.openHolds);
        expect(finished, crash).toBeLessThanOrEqual(1);
        const entries = await expectSettledState(projectId);
        const resolution = entries.find((e) => e.type === "settle" || e.type === "release");
        // Charged what reached the hold's item (the claim carries the final charge) or the ledger.
        const charged = resolution?.type === "settle" ? 1_000 : 0;
        expect((await credits().balance(projectId)).availableMicros, crash).toBe(10_000 - charged);
        expect(entries.filter((e) => e.type === "hold").length, crash).toBe(resolution ? 1 : 0);
      },
    );
  });

  it("settle: whatever step it died at, the hold resolves once and the ledger matches", async () => {
    let hold: Hold | undefined;
    await eachCrash(
      // The claim, the ledger's two entries, the balance, the hold's item, the balance's marker.
      [
        "UpdateItemCommand",
        "PutItemCommand",
        "PutItemCommand",
        "UpdateItemCommand",
        "DeleteItemCommand",
        "UpdateItemCommand",
      ],
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
        // Settled when the claim (with the charge) reached the hold's item before the crash, else released.
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
