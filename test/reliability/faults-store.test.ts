import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { counterId, setBudget, windowSpan } from "../../lambda/core/budgets";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { DEFAULT_LEASES } from "../../lambda/metering/credit-leases";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";
import { expectSecurityHeaders } from "../support/http";
import {
  allLedgerEntries,
  budgetCommands,
  creditCommands,
  injectStoreFaults,
  type StoreFaults,
  unresolvedOrDoubled,
  warehouseRows,
} from "../support/reliability";

/**
 * Store faults on the credit hold (before the vendor is called) and on the settlement (after the
 * response), and on a budget window's hold and settlement, injected on the store client inside the SDK's
 * retry loop: throttling and errors before a write applies, and answers lost after it applied
 * (docs/reliability.md).
 */
const GRANT = 5_000_000;
const HOLD_TTL_MS = 3_600_000;
/** A credit lease's hold lasts its open time plus the hold TTL. */
const LEASE_EXPIRY_MS = DEFAULT_LEASES.openMs + HOLD_TTL_MS;
let sim: Simulator;
let stack: TestHost;
let credits: DynamoCredits;
let budgets: DynamoBudgets;
let faults: StoreFaults;

beforeAll(async () => {
  sim = await startSimulator();
  stack = await startTestHost(
    {
      ...simulatorEnv(sim.origins),
      DMT_METERING: "on",
      DMT_WAREHOUSE_FLUSH_MS: "100",
      DMT_HOLD_TTL_MS: String(HOLD_TTL_MS),
    },
    undefined,
    // The faults go inside the SDK's retry loop, as DynamoDB's own would in Lambda.
    { sdkStoreClient: true },
  );
  credits = new DynamoCredits(stack.db, tableNames(process.env));
  budgets = new DynamoBudgets(stack.db, tableNames(process.env));
  faults = injectStoreFaults(stack.db);
});
afterAll(async () => {
  await stack?.stop();
  await sim?.close();
});
beforeEach(() => sim.reset());
afterEach(() => faults.clear());

async function paidProject() {
  const project = await stack.newKey({ tier: "pro" });
  await credits.grant(project.projectId, GRANT, "test");
  return project;
}

function chat(key: string) {
  return fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "one two three" }],
      max_tokens: 50,
    }),
  });
}

async function books(projectId: string) {
  await stack.drain();
  const entries = await allLedgerEntries(credits, projectId);
  const rows = (await warehouseRows(stack.dataDir)).filter((r) => r.project_id === projectId);
  return {
    rows,
    cost: rows.reduce((sum, r) => sum + (r.cost_micros ?? 0), 0),
    types: entries.map((e) => e.type).sort(),
    balance: await credits.balance(projectId),
    unresolved: unresolvedOrDoubled(entries),
  };
}

describe("store faults on the hold", () => {
  it("a throttled hold is retried by the SDK: the call goes through, charged once", async () => {
    const { key, projectId } = await paidProject();
    faults.add({ kind: "throttle", match: creditCommands.hold, times: 2 });
    const injectedBefore = faults.injected;
    const res = await chat(key);
    expect(res.status).toBe(200);
    await res.json();
    expect(faults.injected - injectedBefore).toBe(2);
    const { rows, cost, types, balance, unresolved } = await books(projectId);
    expect(rows).toHaveLength(1);
    expect(cost).toBeGreaterThan(0);
    expect(types).toEqual(["grant", "hold", "settle"]);
    expect(unresolved).toEqual([]);
    expect(balance).toMatchObject({ availableMicros: GRANT - cost, openHolds: 0 });
  });

  it.each(["throttle", "error"] as const)(
    "a hold the store keeps refusing (%s) is a 500 in our shape: nothing forwarded, nothing held or charged",
    async (kind) => {
      const { key, projectId } = await paidProject();
      faults.add({ kind, match: creditCommands.hold });
      const res = await chat(key);
      expect(res.status).toBe(500);
      expect(await res.json()).toEqual({
        error: { message: expect.any(String), type: "api_error", code: "internal_error" },
      });
      expectSecurityHeaders(res.headers);
      expect(sim.requests).toEqual([]);
      const { rows, types, balance } = await books(projectId);
      expect(rows).toEqual([
        expect.objectContaining({ status_code: 500, error_type: "api_error", cost_micros: 0 }),
      ]);
      expect(types).toEqual(["grant"]);
      expect(balance).toMatchObject({ availableMicros: GRANT, openHolds: 0 });
    },
  );

  it("a hold whose answer was lost is recognised on the SDK's retry: taken once, settled once", async () => {
    const { key, projectId } = await paidProject();
    faults.add({ kind: "lostAnswer", match: creditCommands.hold, times: 1 });
    const res = await chat(key);
    expect(res.status).toBe(200);
    await res.json();
    const { cost, types, balance, unresolved } = await books(projectId);
    expect(types).toEqual(["grant", "hold", "settle"]);
    expect(unresolved).toEqual([]);
    expect(balance).toMatchObject({ availableMicros: GRANT - cost, openHolds: 0 });
  });

  it("a hold taken whose answer never came back is left to the sweeper, which releases it in full", async () => {
    const { key, projectId } = await paidProject();
    // The first attempt applies and its answer is lost; the SDK's retries then fail.
    faults.add({ kind: "lostAnswer", match: creditCommands.hold, times: 1 });
    faults.add({ kind: "error", match: creditCommands.hold });
    const res = await chat(key);
    expect(res.status).toBe(500);
    await res.json();
    expect(sim.requests).toEqual([]);
    const during = await books(projectId);
    expect(during.balance.openHolds).toBe(1);
    expect(during.balance.availableMicros).toBe(GRANT - during.balance.heldMicros);

    faults.clear();
    // The sweeper of any process, once the hold expired.
    const swept = await credits.releaseExpired(Date.now() + LEASE_EXPIRY_MS + 1);
    expect(swept.holdsReleased).toBeGreaterThanOrEqual(1);
    const after = await books(projectId);
    expect(after.types).toEqual(["grant", "hold", "release"]);
    expect(after.balance).toMatchObject({ availableMicros: GRANT, openHolds: 0 });
  });
});

describe("store faults on the settlement", () => {
  it.each(["throttle", "error"] as const)(
    "a settlement that fails for a while (%s) is retried until it lands: charged exactly once",
    async (kind) => {
      const { key, projectId } = await paidProject();
      const injectedBefore = faults.injected;
      // As many failures as the SDK makes attempts: the first settlement fails as a whole.
      faults.add({ kind, match: creditCommands.resolutionEntry, times: 3 });
      const res = await chat(key);
      expect(res.status).toBe(200);
      await res.json();
      const { rows, cost, types, balance, unresolved } = await books(projectId);
      expect(faults.injected - injectedBefore).toBe(3);
      expect(rows).toHaveLength(1);
      expect(cost).toBeGreaterThan(0);
      expect(types).toEqual(["grant", "hold", "settle"]);
      expect(unresolved).toEqual([]);
      expect(balance).toMatchObject({ availableMicros: GRANT - cost, openHolds: 0 });
    },
  );

  it("a settlement whose ledger entry landed but whose refund did not is completed by the sweeper as a settlement", async () => {
    const { key, projectId } = await paidProject();
    faults.add({ kind: "error", match: creditCommands.refund });
    const res = await chat(key);
    expect(res.status).toBe(200);
    await res.json();
    const during = await books(projectId);
    expect(during.balance.openHolds).toBe(1);
    expect(during.types).toEqual(["grant", "hold", "settle"]);

    faults.clear();
    const swept = await credits.releaseExpired(Date.now() + LEASE_EXPIRY_MS + 1);
    expect(swept.settlementsCompleted).toBeGreaterThanOrEqual(1);
    const after = await books(projectId);
    expect(after.unresolved).toEqual([]);
    expect(after.balance).toMatchObject({ availableMicros: GRANT - after.cost, openHolds: 0 });
  });

  it("a settlement that never lands leaves the hold to the sweeper: settled at the charges noted, once", async () => {
    const { key, projectId } = await paidProject();
    faults.add({ kind: "error", match: creditCommands.resolutionEntry });
    const res = await chat(key);
    expect(res.status).toBe(200);
    await res.json();
    const during = await books(projectId);
    expect(during.balance.openHolds).toBe(1);
    // The record keeps the cost the call would have been charged.
    expect(during.cost).toBeGreaterThan(0);

    faults.clear();
    await credits.releaseExpired(Date.now() + LEASE_EXPIRY_MS + 1);
    // Sweeping again (another process, a later run) changes nothing.
    await credits.releaseExpired(Date.now() + LEASE_EXPIRY_MS + 1);
    const after = await books(projectId);
    expect(after.types).toEqual(["grant", "hold", "settle"]);
    expect(after.unresolved).toEqual([]);
    expect(after.balance).toMatchObject({ availableMicros: GRANT - during.cost, openHolds: 0 });
  });
});

describe("store faults on a budget's counter", () => {
  /** A paid project with a monthly project budget and a total budget on its key, neither ever reached. */
  async function budgetedProject() {
    const project = await paidProject();
    const now = Date.now();
    const perProject = await setBudget(
      stack.store,
      budgets,
      { projectId: project.projectId, usd: "1000", window: "month" },
      now,
    );
    const perKey = await setBudget(
      stack.store,
      budgets,
      { projectId: project.projectId, keyId: project.keyId, usd: "1000", window: "total" },
      now,
    );
    return { ...project, windows: [perProject, perKey] };
  }

  /** Each budget's current window: what it spent and what it still holds. */
  function windowSpends(windows: Awaited<ReturnType<typeof budgetedProject>>["windows"]) {
    return Promise.all(
      windows.map((budget) => budgets.spend(counterId(budget, windowSpan(budget.window, Date.now()), null))),
    );
  }

  it.each(["throttle", "lostAnswer"] as const)(
    "a budget hold that fails once (%s) is retried by the SDK: each window spends the record's cost, once",
    async (kind) => {
      const { key, projectId, windows } = await budgetedProject();
      const injectedBefore = faults.injected;
      faults.add({ kind, match: budgetCommands.hold, times: 1 });
      const res = await chat(key);
      expect(res.status).toBe(200);
      await res.json();
      expect(faults.injected - injectedBefore).toBe(1);
      const { rows, cost, unresolved, balance } = await books(projectId);
      expect(rows).toHaveLength(1);
      expect(cost).toBeGreaterThan(0);
      expect(unresolved).toEqual([]);
      expect(balance).toMatchObject({ availableMicros: GRANT - cost, openHolds: 0 });
      expect(await windowSpends(windows)).toEqual([
        { spentMicros: cost, heldMicros: 0 },
        { spentMicros: cost, heldMicros: 0 },
      ]);
    },
  );

  it("a budget hold the store keeps refusing is a 500 in our shape: nothing forwarded, held or charged", async () => {
    const { key, projectId, windows } = await budgetedProject();
    faults.add({ kind: "error", match: budgetCommands.hold });
    const res = await chat(key);
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({
      error: { message: expect.any(String), type: "api_error", code: "internal_error" },
    });
    expect(sim.requests).toEqual([]);
    const { rows, unresolved, balance } = await books(projectId);
    expect(rows).toEqual([expect.objectContaining({ status_code: 500, cost_micros: 0 })]);
    expect(unresolved).toEqual([]);
    expect(balance).toMatchObject({ availableMicros: GRANT, openHolds: 0 });
    expect(await windowSpends(windows)).toEqual([
      { spentMicros: 0, heldMicros: 0 },
      { spentMicros: 0, heldMicros: 0 },
    ]);
  });

  it("a budget settlement that never lands leaves the holds to the sweeper: each window settled at the charges noted, once", async () => {
    const { key, projectId, windows } = await budgetedProject();
    faults.add({ kind: "error", match: budgetCommands.settle });
    const res = await chat(key);
    expect(res.status).toBe(200);
    await res.json();
    const during = await books(projectId);
    expect(during.cost).toBeGreaterThan(0);
    // The charges were noted on the holds, which stay open.
    for (const spend of await windowSpends(windows)) {
      expect(spend.spentMicros).toBe(during.cost);
      expect(spend.heldMicros).toBeGreaterThan(0);
    }

    faults.clear();
    const swept = await budgets.releaseExpired(Date.now() + LEASE_EXPIRY_MS + 1);
    expect(swept.holdsSettled).toBe(2);
    // Sweeping again (another process, a later run) changes nothing.
    expect(await budgets.releaseExpired(Date.now() + LEASE_EXPIRY_MS + 1)).toEqual({ holdsSettled: 0 });
    const after = await books(projectId);
    expect(after.cost).toBe(during.cost);
    expect(after.unresolved).toEqual([]);
    expect(after.balance).toMatchObject({ availableMicros: GRANT - after.cost, openHolds: 0 });
    expect(await windowSpends(windows)).toEqual([
      { spentMicros: after.cost, heldMicros: 0 },
      { spentMicros: after.cost, heldMicros: 0 },
    ]);
  });
});
