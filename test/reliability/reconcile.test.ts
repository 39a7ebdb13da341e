import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../../lambda/adapters/fs/master-key";
import { VENDOR_NAMES } from "../../lambda/core/vendor-model";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { reconcile, runMixedWorkload } from "../support/reliability-workload";
import { simulatorEnv, startTestStack, type TestStack, testVendorKey } from "../support/stack";

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
let stack: TestStack;

beforeAll(async () => {
  sim = await startSimulator();
  stack = await startTestStack({
    ...simulatorEnv(sim.origins),
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
  });
});
afterAll(async () => {
  await stack?.stop();
  await sim?.close();
});

describe("reconciliation", () => {
  it("answers = records = charges: every request stored once, every managed call settled once", async () => {
    const tables = tableNames(process.env);
    const credits = new DynamoCredits(stack.db, tables);
    const managed = await stack.newKey({ tier: "enterprise" });
    const byok = await stack.newKey({ tier: "enterprise" });
    await credits.grant(managed.projectId, MANAGED_GRANT, "test");
    await credits.grant(byok.projectId, BYOK_GRANT, "test");
    const vendorKeys = new DynamoVendorKeys(stack.db, tables, LocalMasterKey.inDataDir(stack.dataDir));
    for (const vendor of VENDOR_NAMES) await vendorKeys.set(byok.projectId, vendor, byokKey(vendor));
    // Vendor failures the SDKs retry: the failed attempts are answered, recorded and not charged.
    sim.inject({ vendor: "openai", fault: { kind: "status", status: 500 }, times: 2 });
    sim.inject({ vendor: "anthropic", fault: { kind: "status", status: 529 }, times: 1 });

    const run = await runMixedWorkload({
      url: stack.url,
      keys: { managed: managed.key, byok: byok.key, dualVendorKey },
      calls: CALLS,
      concurrency: 8,
      idempotentEvery: 3,
      runId: String(process.pid),
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
