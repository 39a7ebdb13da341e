import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../../lambda/adapters/fs/master-key";
import { counterId, setBudget, windowSpan } from "../../lambda/core/budgets";
import type { CloudEvent } from "../../lambda/core/cloudevent";
import { formatUsd, parseUsd } from "../../lambda/core/credits";
import { VENDOR_NAMES } from "../../lambda/core/vendor-model";
import { lowBalanceRule } from "../../lambda/events/alerts";
import { addWebhook } from "../../lambda/events/webhooks";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost, testVendorKey } from "../support/host";
import { warehouseRows } from "../support/reliability";
import { reconcile, runMixedWorkload } from "../support/reliability-workload";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * The books balance: a mixed workload through the official SDKs, then a count. Small here (CI);
 * `npx tsx bench/reconcile.ts` runs the same at a large size.
 */
const CALLS = Number(process.env.RELIABILITY_RECONCILE_CALLS ?? 64);
const MANAGED_GRANT = 20_000_000;
const BYOK_GRANT = 1_000_000;
const byokKey = (vendor: string) => `sk-byok-${vendor}-0123456789abcdef`;
const dualVendorKey = "sk-dual-vendor-0123456789abcdef";

let sim: Simulator;
let stack: TestHost;
let receiver: WebhookReceiver;

beforeAll(async () => {
  sim = await startSimulator();
  stack = await startTestHost({
    ...simulatorEnv(sim.origins),
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
  });
  receiver = await startWebhookReceiver();
});
afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
  await sim?.close();
});

describe("reconciliation", () => {
  // A mixed workload through four SDKs, then the warehouse read back: minutes on a busy machine.
  it("answers = records = charges: every request stored once, every managed call settled once", {
    timeout: 300_000,
  }, async () => {
    const tables = tableNames(process.env);
    const credits = new DynamoCredits(stack.db, tables);
    const managed = await stack.newKey({ tier: "enterprise" });
    const byok = await stack.newKey({ tier: "enterprise" });
    await credits.grant(managed.projectId, MANAGED_GRANT, "test");
    await credits.grant(byok.projectId, BYOK_GRANT, "test");
    const vendorKeys = new DynamoVendorKeys(stack.db, tables, LocalMasterKey.inDataDir(stack.dataDir));
    for (const vendor of VENDOR_NAMES) await vendorKeys.set(byok.projectId, vendor, byokKey(vendor));
    // Vendor failures the SDKs retry: the failed attempts are answered, recorded and not charged.
    // Budgets that never refuse here, to count against: the managed project's managed spend, and the
    // BYOK project's BYOK and dual-key spend at list price.
    const budgets = new DynamoBudgets(stack.db, tables);
    const now = Date.now();
    const managedBudget = await setBudget(
      stack.store,
      budgets,
      { projectId: managed.projectId, usd: "1000", window: "total" },
      now,
    );
    const byokBudget = await setBudget(
      stack.store,
      budgets,
      { projectId: byok.projectId, usd: "1000", window: "total", includeByok: true },
      now,
    );
    // A low-balance alert one micro-dollar under the grant: the first charge crosses it, and nothing
    // a lease holds for calls not yet made may fire it before.
    const threshold = formatUsd(MANAGED_GRANT - 1).slice(1);
    await stack.events.rules.put(lowBalanceRule(managed.projectId, threshold, now));
    stack.events.cachedRules.forget(managed.projectId);
    const { secret } = await addWebhook(
      stack.events.webhooks,
      { projectId: managed.projectId, url: receiver.url, events: ["balance.low"] },
      "public-or-loopback",
      now,
    );
    sim.inject({ vendor: "openai", fault: { kind: "status", status: 500 }, times: 2 });
    sim.inject({ vendor: "anthropic", fault: { kind: "status", status: 529 }, times: 1 });

    const run = await runMixedWorkload({
      url: stack.url,
      keys: { managed: managed.key, byok: byok.key, dualVendorKey },
      calls: CALLS,
      concurrency: 8,
      idempotentEvery: 3,
      runId: String(process.pid),
      includeCost: true,
    });
    await stack.drain();

    expect(run.failed).toEqual([]);
    const result = await reconcile(run.answered, {
      dataDir: stack.dataDir,
      credits,
      managedProject: managed.projectId,
      byokProject: byok.projectId,
      grants: { managed: MANAGED_GRANT, byok: BYOK_GRANT },
      vendorRequests: sim.requests,
      secrets: [
        managed.key,
        byok.key,
        dualVendorKey,
        ...VENDOR_NAMES.flatMap((v) => [byokKey(v), testVendorKey(v)]),
      ],
    });
    expect(result.violations).toEqual([]);
    // Each budget window's spend is the sum of its records' costs, and nothing stays held.
    const rows = await warehouseRows(stack.dataDir);
    const costOf = (projectId: string, modes: string[]) =>
      rows
        .filter((r) => r.project_id === projectId && modes.includes(r.billing_mode))
        .reduce((sum, r) => sum + (r.cost_micros ?? 0), 0);
    const total = windowSpan("total", Date.now());
    expect(await budgets.spend(counterId(managedBudget, total, null))).toEqual({
      spentMicros: costOf(managed.projectId, ["managed"]),
      heldMicros: 0,
    });
    expect(await budgets.spend(counterId(byokBudget, total, null))).toEqual({
      spentMicros: costOf(byok.projectId, ["managed", "byok", "dual"]),
      heldMicros: 0,
    });
    // Each streamed answer's cost in its last usage event is its record's cost: the charge, for a
    // managed call; a replay repeats the cost its first answer carried.
    const streamedRows = rows.filter((r) => r.streamed && r.status_code === 200 && (r.cost_micros ?? 0) > 0);
    expect(run.streamCosts.length).toBeGreaterThan(0);
    for (const { call, costUsd } of run.streamCosts) {
      const key = call.mode === "byok" ? byok.projectId : managed.projectId;
      const candidates = streamedRows.filter(
        (r) =>
          r.project_id === key &&
          r.billing_mode === call.mode &&
          (call.requestId ? r.request_id === call.requestId : r.request_id === null),
      );
      expect(
        candidates.some((r) => r.cost_micros === parseUsd(costUsd)),
        `call ${call.index} (${call.vendor}, ${call.mode}) said ${costUsd}`,
      ).toBe(true);
    }
    const streamedManaged = run.streamCosts.filter((c) => c.call.mode === "managed" && !c.call.requestId);
    const recordedManaged = streamedRows.filter(
      (r) => r.project_id === managed.projectId && r.billing_mode === "managed" && r.request_id === null,
    );
    expect(streamedManaged.reduce((sum, c) => sum + parseUsd(c.costUsd), 0)).toBe(
      recordedManaged.reduce((sum, r) => sum + (r.cost_micros ?? 0), 0),
    );

    // The alert fired once, on money really spent: what it reports is at most the threshold and at
    // least what is left at the end, never a balance lowered by holds.
    await expect.poll(() => receiver.received.length, { timeout: 60_000, interval: 100 }).toBeGreaterThan(0);
    await stack.drain();
    const alerts = receiver.received.map(
      (r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as CloudEvent,
    );
    expect(alerts.map((e) => e.type)).toEqual(["balance.low"]);
    const data = alerts[0]?.data as { available_usd?: string } | undefined;
    const reported = parseUsd(String(data?.available_usd));
    expect(reported).toBeLessThanOrEqual(MANAGED_GRANT - 1);
    expect(reported).toBeGreaterThanOrEqual((await credits.balance(managed.projectId)).availableMicros);

    const { figures } = result;
    // The mix happened: vendor errors retried, replays, all three billing modes, streams and not.
    expect(figures.recordsByStatus["500"]).toBe(2);
    expect(figures.recordsByStatus["529"]).toBe(1);
    expect(figures.replayed).toBeGreaterThan(0);
    expect(Object.keys(figures.recordsByMode).sort()).toEqual([
      "byok",
      "byok/stream",
      "dual",
      "dual/stream",
      "managed",
      "managed/stream",
    ]);
    expect(figures.settles).toBeGreaterThan(0);
    // The vendor saw each BYOK key, and never a service key.
    for (const vendor of VENDOR_NAMES) {
      expect(sim.requests.some((r) => JSON.stringify(r.headers).includes(byokKey(vendor)))).toBe(true);
    }
    expect(JSON.stringify(sim.requests.map((r) => r.headers))).not.toContain(managed.key);

    // The export route, the customer's view, counts the same rows per project.
    const today = new Date().toISOString().slice(0, 10);
    const exported = async (key: string) => {
      const res = await fetch(`${stack.url}/api/v1/exports`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ format: "json", range: { start: today, end: today } }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as unknown[]).length;
    };
    expect((await exported(managed.key)) + (await exported(byok.key))).toBe(figures.records);
  });
});
