/**
 * The reconciliation of test/reliability/reconcile.test.ts at a large size: a mixed workload through the
 * official SDKs (all four vendors, streams and not, managed / BYOK / dual, X-Request-ID retries, vendor
 * 5xx the SDKs retry), then a count of answers against warehouse records, holds, settlements and the
 * balance. Run: `npx tsx bench/reconcile.ts` (RECONCILE_CALLS, default 5000; RECONCILE_CONCURRENCY,
 * default 32). The stack, the simulator and the clients share this process: this measures correctness
 * under load, not speed. Prints the figures, writes bench/results/reconcile.json, exits 1 if any
 * invariant fails.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../lambda/adapters/fs/master-key";
import { VENDOR_NAMES } from "../lambda/core/vendor-model";
import { startSimulator } from "../lambda/local/simulator";
import { simulatorEnv, startTestHost, testVendorKey } from "../test/support/host";
import { reconcile, runMixedWorkload } from "../test/support/reliability-workload";
import { formatTable } from "./lib/table";
import { machine } from "./report-machine";

const CALLS = Number(process.env.RECONCILE_CALLS ?? 5000);
const CONCURRENCY = Number(process.env.RECONCILE_CONCURRENCY ?? 32);
const MANAGED_GRANT = 1_000_000_000;
const BYOK_GRANT = 1_000_000;
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

const byokKey = (vendor: string) => `sk-byok-${vendor}-0123456789abcdef`;
const dualVendorKey = "sk-dual-vendor-0123456789abcdef";

async function main(): Promise<void> {
  const startedOn = machine();
  const sim = await startSimulator();
  const stack = await startTestHost({
    ...simulatorEnv(sim.origins),
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "1000",
  });
  try {
    const tables = tableNames(process.env);
    const credits = new DynamoCredits(stack.db, tables);
    const managed = await stack.newKey({ tier: "enterprise" });
    const byok = await stack.newKey({ tier: "enterprise" });
    await credits.grant(managed.projectId, MANAGED_GRANT, "bench");
    await credits.grant(byok.projectId, BYOK_GRANT, "bench");
    const vendorKeys = new DynamoVendorKeys(stack.db, tables, LocalMasterKey.inDataDir(stack.dataDir));
    for (const vendor of VENDOR_NAMES) await vendorKeys.set(byok.projectId, vendor, byokKey(vendor));
    // One vendor failure every ~200 calls, retried by the SDKs.
    const faults = Math.max(1, Math.floor(CALLS / 400));
    sim.inject({ vendor: "openai", fault: { kind: "status", status: 500 }, times: faults });
    sim.inject({ vendor: "anthropic", fault: { kind: "status", status: 529 }, times: faults });

    process.stdout.write(`reconciliation: ${CALLS} calls, ${CONCURRENCY} at a time...\n`);
    const run = await runMixedWorkload({
      url: stack.url,
      keys: { managed: managed.key, byok: byok.key, dualVendorKey },
      calls: CALLS,
      concurrency: CONCURRENCY,
      idempotentEvery: 7,
      runId: `bench-${Date.now()}`,
    });
    const drainStarted = performance.now();
    await stack.drain();
    const drainSeconds = (performance.now() - drainStarted) / 1000;
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
    const { figures } = result;
    const rows: [string, number | string][] = [
      ["calls planned", CALLS],
      ["SDK calls that failed", run.failed.length],
      ["responses answered (retries and replays included)", figures.answered],
      ["warehouse records", figures.records],
      ["distinct transaction ids in the warehouse", figures.distinctRecordIds],
      ["replayed responses (X-Request-ID)", figures.replayed],
      ["refused by us before the vendor", figures.refusedByUs],
      ["vendor calls (records) / seen by the vendor", `${figures.vendorCalls} / ${figures.vendorRequests}`],
      ["managed records / holds", `${figures.managedRecords} / ${figures.holds}`],
      ["settlements + releases", `${figures.settles} + ${figures.releases}`],
      ["open holds", figures.openHolds],
      ["records' cost / charged (micro-USD)", `${figures.recordCostMicros} / ${figures.chargedMicros}`],
      [
        "balance / grant - cost (micro-USD)",
        `${figures.managedBalanceMicros} / ${figures.expectedManagedBalanceMicros}`,
      ],
      [
        "calls per second (client, stack and simulator in one process)",
        (run.answered.length / run.seconds).toFixed(0),
      ],
      ["drain after the last answer (s)", drainSeconds.toFixed(2)],
    ];
    process.stdout.write(
      `${formatTable(
        ["figure", "value"],
        rows.map(([name, value]) => [name, String(value)]),
      )}\n\nrecords by mode: ${JSON.stringify(figures.recordsByMode)}\nrecords by status: ${JSON.stringify(figures.recordsByStatus)}\n`,
    );
    process.stdout.write(
      result.violations.length === 0
        ? "All invariants hold.\n"
        : `VIOLATIONS:\n${result.violations.map((v) => `  - ${v}`).join("\n")}\n`,
    );
    const dir = join(import.meta.dirname, "results");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "reconcile.json"),
      `${JSON.stringify(
        {
          date: new Date().toISOString(),
          machine: startedOn,
          calls: CALLS,
          concurrency: CONCURRENCY,
          seconds: run.seconds,
          drainSeconds,
          failedCalls: run.failed.length,
          figures,
          violations: result.violations,
        },
        null,
        2,
      )}\n`,
    );
    if (result.violations.length > 0 || run.failed.length > 0) process.exitCode = 1;
  } finally {
    await stack.stop();
    await sim.close();
  }
}

await main();
