import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DynamoDBClient, GetItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { type TableNames, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { CLOSED_WINDOW_KEPT_MS, counterId, newBudget, windowSpan } from "../../lambda/core/budgets";
import { type Hold, newHoldId } from "../../lambda/core/credits";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";

/**
 * Holds as items of their own (lambda/adapters/dynamodb/hold-items.ts) over dynalite: the balance and
 * the window counters stay small however many holds are open, throttled writes retried by the SDK
 * never charge twice, the sweeper reads the open holds through the index (never a Scan), and a closed
 * window's counter carries its expiry.
 */

const T0 = Date.UTC(2026, 11, 7, 12);
const MINUTE = 60_000;
let now = T0;
const clock = () => now;
let dir: string;
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;
let names: TableNames;
let projects = 0;
const newProject = () => `proj-holds-${++projects}`;

/**
 * A client that refuses the first attempt of every write as DynamoDB refuses one over its limits, and
 * counts them. Each write's retry goes through (the attempts of one command share its input), so no
 * interleaving of concurrent writes can exhaust the SDK's attempts.
 */
function throttlingClient(): { client: DynamoDBClient; throttled: () => number; commands: string[] } {
  const client = createDynamoClient({ endpoint: dynamo.endpoint });
  const refused = new WeakSet<object>();
  let throttled = 0;
  const commands: string[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = context.commandName ?? "?";
      commands.push(name);
      const input = (args as { input: object }).input;
      if (/^(Put|Update|Delete)Item/.test(name) && !refused.has(input)) {
        refused.add(input);
        throttled++;
        const err = new Error("Rate of requests exceeds the allowed throughput.");
        err.name = "ProvisionedThroughputExceededException";
        Object.assign(err, { $fault: "client", $metadata: {} });
        throw err;
      }
      return next(args);
    },
    // Inside the SDK's retry loop, as a real throttle is: the SDK backs off and sends it again.
    { step: "deserialize", name: "throttle" },
  );
  return { client, throttled: () => throttled, commands };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-holds-"));
  dynamo = await startEmbeddedDynamo(dir);
  db = createDynamoClient({ endpoint: dynamo.endpoint });
  names = tableNames({}, "holds-");
  await ensureTables(db, names);
});

afterAll(async () => {
  db.destroy();
  await dynamo.close();
  rmSync(dir, { recursive: true, force: true });
});

async function raw(table: string, key: Record<string, string>) {
  const out = await db.send(
    new GetItemCommand({ TableName: table, Key: marshall(key), ConsistentRead: true }),
  );
  return out.Item && unmarshall(out.Item);
}

describe("throttled writes", () => {
  it("are retried with backoff and never charge twice: holds, notes and settlements come out exact", async () => {
    const p = newProject();
    await new DynamoCredits(db, names, clock).grant(p, 10_000_000, "cli");
    const throttling = throttlingClient();
    const store = new DynamoCredits(throttling.client, names, clock);
    const holds: Hold[] = [];
    for (let i = 0; i < 5; i++) {
      const result = await store.hold(p, newHoldId(), 1_000_000, now + 15 * MINUTE);
      expect(result.ok).toBe(true);
      if (result.ok) holds.push(result.hold);
    }
    for (const [i, hold] of holds.entries()) {
      expect(
        await store.recordCharges(hold, { chargedMicros: 100_000, uncollectedMicros: 0, calls: 1 }),
      ).toBe(true);
      // A repeat of the same total (a retry of the whole step) changes nothing.
      await store.recordCharges(hold, { chargedMicros: 100_000, uncollectedMicros: 0, calls: 1 });
      await store.settleCharges(hold, { chargedMicros: 200_000 + i, uncollectedMicros: 0, calls: 2 });
      await store.settleCharges(hold, { chargedMicros: 200_000 + i, uncollectedMicros: 0, calls: 2 });
    }
    expect(throttling.throttled()).toBeGreaterThan(20);
    throttling.client.destroy();
    const balance = await new DynamoCredits(db, names, clock).balance(p);
    expect(balance).toEqual({
      projectId: p,
      availableMicros: 10_000_000 - (5 * 200_000 + 10),
      heldMicros: 0,
      chargedInFlightMicros: 0,
      openHolds: 0,
    });
    const { entries } = await new DynamoCredits(db, names, clock).ledger(p, { limit: 100 });
    expect(entries.reduce((sum, e) => sum + e.deltaMicros, 0)).toBe(balance.availableMicros);
    expect(entries.filter((e) => e.type === "settle")).toHaveLength(5);
  });

  it("on a budget window too: its spend is the charges, once", async () => {
    const budget = newBudget({ projectId: newProject(), usd: "10", window: "month" }, T0);
    const id = counterId(budget, windowSpan("month", T0), null);
    const throttling = throttlingClient();
    const counters = new DynamoBudgets(throttling.client, names, clock);
    for (let i = 0; i < 4; i++) {
      const held = await counters.hold(id, newHoldId(), 1_000_000, now + 15 * MINUTE, 10_000_000);
      if (!held.ok) throw new Error("refused");
      await counters.recordCharges(held.hold, { chargedMicros: 5_000, uncollectedMicros: 0, calls: 1 });
      await counters.settleCharges(held.hold, { chargedMicros: 250_000, uncollectedMicros: 1, calls: 3 });
    }
    expect(throttling.throttled()).toBeGreaterThan(10);
    throttling.client.destroy();
    expect(await new DynamoBudgets(db, names, clock).spend(id)).toEqual({
      spentMicros: 4 * 250_001,
      heldMicros: 0,
    });
  });
});

describe("no hot item", () => {
  it("a window's counter stays small with many holds open, and a closed day or month window expires", async () => {
    const budget = newBudget({ projectId: newProject(), usd: "1000", window: "month" }, T0);
    const id = counterId(budget, windowSpan("month", T0), null);
    const counters = new DynamoBudgets(db, names, clock);
    const holds: Hold[] = [];
    for (let i = 0; i < 30; i++) {
      const held = await counters.hold(id, newHoldId(), 1_000_000, now + 15 * MINUTE, 1_000_000_000);
      if (held.ok) holds.push(held.hold);
    }
    for (const hold of holds)
      await counters.recordCharges(hold, { chargedMicros: 7, uncollectedMicros: 0, calls: 1 });
    const item = await raw(names.budgetCounters, { counterId: id });
    expect(JSON.stringify(item).length).toBeLessThan(400);
    expect(item?.open).toBe(30);
    expect(await counters.spend(id)).toEqual({ spentMicros: 30 * 7, heldMicros: 30 * (1_000_000 - 7) });
    // TTL: the month closes on 2027-01-01; its counter goes 90 days later (DynamoDB TTL, in seconds).
    expect(item?.gcAt).toBe((Date.UTC(2027, 0, 1) + CLOSED_WINDOW_KEPT_MS) / 1000);
    const total = newBudget({ projectId: newProject(), usd: "1000", window: "total" }, T0);
    const totalId = counterId(total, windowSpan("total", T0), null);
    const forGood = await counters.hold(totalId, newHoldId(), 1_000, now + MINUTE, 1_000_000);
    expect((await raw(names.budgetCounters, { counterId: totalId }))?.gcAt).toBeUndefined();
    if (forGood.ok)
      await counters.settleCharges(forGood.hold, { chargedMicros: 0, uncollectedMicros: 0, calls: 0 });
    for (const hold of holds)
      await counters.settleCharges(hold, { chargedMicros: 7, uncollectedMicros: 0, calls: 1 });
    expect(await counters.spend(id)).toEqual({ spentMicros: 30 * 7, heldMicros: 0 });
  });
});

describe("the sweeper", () => {
  it("reads open holds through the index, never a Scan, and settles a dead process's holds exactly", async () => {
    const p = newProject();
    await new DynamoCredits(db, names, clock).grant(p, 10_000_000, "cli");
    const budget = newBudget({ projectId: p, usd: "100", window: "day" }, T0);
    const id = counterId(budget, windowSpan("day", T0), null);
    // A "process" takes leases, notes a call's charge on each, and dies without settling them.
    const credits = new DynamoCredits(db, names, clock);
    const counters = new DynamoBudgets(db, names, clock);
    const lease = await credits.hold(p, newHoldId(), 2_000_000, now + 15 * MINUTE);
    const window = await counters.hold(id, newHoldId(), 2_000_000, now + 15 * MINUTE, 100_000_000);
    if (!lease.ok || !window.ok) throw new Error("refused");
    await credits.recordCharges(lease.hold, { chargedMicros: 300_000, uncollectedMicros: 0, calls: 2 });
    await counters.recordCharges(window.hold, { chargedMicros: 300_000, uncollectedMicros: 0, calls: 2 });

    const probe = recordingClient();
    const sweeper = {
      credits: new DynamoCredits(probe.client, names, clock),
      counters: new DynamoBudgets(probe.client, names, clock),
    };
    // Not expired: nothing to do, and nothing scanned.
    expect(await sweeper.credits.releaseExpired(now)).toMatchObject({ holdsReleased: 0 });
    expect((await sweeper.counters.releaseExpired(now)).holdsSettled).toBe(0);
    now += 16 * MINUTE;
    expect(await sweeper.credits.releaseExpired(now)).toMatchObject({ holdsReleased: 1 });
    expect((await sweeper.counters.releaseExpired(now)).holdsSettled).toBe(1);
    expect(probe.commands).not.toContain("ScanCommand");
    expect(probe.commands).toContain("QueryCommand");
    probe.client.destroy();

    expect(await new DynamoCredits(db, names, clock).balance(p)).toMatchObject({
      availableMicros: 10_000_000 - 300_000,
      openHolds: 0,
      heldMicros: 0,
    });
    expect(await new DynamoBudgets(db, names, clock).spend(id)).toEqual({
      spentMicros: 300_000,
      heldMicros: 0,
    });
    // Out of the index once nothing is open: a later sweep reads no item of this project.
    const again = recordingClient();
    await new DynamoCredits(again.client, names, clock).releaseExpired(now + 60 * MINUTE);
    expect(again.commands.filter((c) => c === "GetItemCommand")).toEqual([]);
    again.client.destroy();
  });
});

/** A client that only records its commands. */
function recordingClient(): { client: DynamoDBClient; commands: string[] } {
  const client = createDynamoClient({ endpoint: dynamo.endpoint });
  const commands: string[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      commands.push(context.commandName ?? "?");
      return next(args);
    },
    { step: "initialize", name: "record" },
  );
  return { client, commands };
}

/**
 * A client whose every DeleteItem fails, as a process that stops after applying a resolution to the
 * owner (r3) and before deleting its hold item (r4). Last in the file: the sweeper's test above counts
 * every owner the index shows, and these leave theirs for a sweeper to finish.
 */
function stopsBeforeDelete(): DynamoDBClient {
  const client = createDynamoClient({ endpoint: dynamo.endpoint });
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === "DeleteItemCommand") {
        const err = new Error("the process stopped");
        err.name = "ValidationException";
        Object.assign(err, { $fault: "client", $metadata: {} });
        throw err;
      }
      return next(args);
    },
    { step: "deserialize", name: "stop" },
  );
  return client;
}

describe("a resolution stopped between the owner and the hold item", () => {
  it("counts the hold's charges once in the balance: applied on the owner, left out of the open holds", async () => {
    const p = newProject();
    await new DynamoCredits(db, names, clock).grant(p, 10_000_000, "cli");
    const stopping = stopsBeforeDelete();
    const store = new DynamoCredits(stopping, names, clock);
    const held = await store.hold(p, newHoldId(), 1_000_000, now + 15 * MINUTE);
    // Another hold stays open with a charge noted, so the balance reads the open holds' items.
    const other = await store.hold(p, newHoldId(), 1_000_000, now + 15 * MINUTE);
    if (!held.ok || !other.ok) throw new Error("refused");
    await store.recordCharges(other.hold, { chargedMicros: 50_000, uncollectedMicros: 0, calls: 1 });
    await store
      .settleCharges(held.hold, { chargedMicros: 300_000, uncollectedMicros: 0, calls: 1 })
      .catch(() => false);
    stopping.destroy();
    const balance = await new DynamoCredits(db, names, clock).balance(p);
    expect(balance.availableMicros).toBe(10_000_000 - 300_000 - 1_000_000);
    expect(balance.chargedInFlightMicros).toBe(50_000);
    expect(balance.heldMicros).toBe(1_000_000 - 50_000);
  });

  it("and once in a budget window's spend", async () => {
    const budget = newBudget({ projectId: newProject(), usd: "10", window: "month" }, T0);
    const id = counterId(budget, windowSpan("month", T0), null);
    const stopping = stopsBeforeDelete();
    const counters = new DynamoBudgets(stopping, names, clock);
    const held = await counters.hold(id, newHoldId(), 1_000_000, now + 15 * MINUTE, 10_000_000);
    const other = await counters.hold(id, newHoldId(), 1_000_000, now + 15 * MINUTE, 10_000_000);
    if (!held.ok || !other.ok) throw new Error("refused");
    await counters.recordCharges(other.hold, { chargedMicros: 40_000, uncollectedMicros: 0, calls: 1 });
    await counters
      .settleCharges(held.hold, { chargedMicros: 250_000, uncollectedMicros: 0, calls: 2 })
      .catch(() => false);
    stopping.destroy();
    expect(await new DynamoBudgets(db, names, clock).spend(id)).toEqual({
      spentMicros: 250_000 + 40_000,
      heldMicros: 1_000_000 - 40_000,
    });
  });
});
