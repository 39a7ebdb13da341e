/**
 * The credit sweeper's Lambda handler as Lambda runs it: configuration from the environment at import,
 * the real DynamoDB adapter over dynalite, its metrics as Embedded Metric Format lines.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Context } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { newHoldId, type SweepReport } from "../../lambda/core/credits";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";

const HOUR = 3_600_000;
const dataDir = mkdtempSync(join(tmpdir(), "dmt-sweeper-"));
const tables = tableNames({}, "sweeper-");
let dynamo: EmbeddedDynamo;
let credits: DynamoCredits;
let sweep: (event: unknown, context?: Context) => Promise<SweepReport>;

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(dataDir);
  Object.assign(process.env, {
    ...Object.fromEntries(
      Object.entries(tables).map(([name, table]) => [`DMT_TABLE_${name.toUpperCase()}`, table]),
    ),
    DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
    DMT_LOG_LEVEL: "silent",
    DMT_METRICS_NAMESPACE: "dmt/SweeperTest",
    AWS_REGION: "eu-west-1",
  });
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  await ensureTables(db, tables);
  credits = new DynamoCredits(db, tables);
  sweep = (await import("../../lambda/handlers/sweeper")).handler;
});

afterAll(async () => {
  await dynamo?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("credit sweeper handler", () => {
  it("releases expired holds in full, leaves running ones, and counts what it did", async () => {
    // Two hours ago: the grant, then a hold for one hour whose call crashed and nobody settled.
    const earlier = new DynamoCredits(
      createDynamoClient({ endpoint: dynamo.endpoint }),
      tables,
      () => Date.now() - 2 * HOUR,
    );
    await earlier.grant("swept", 5_000_000, "test");
    const expired = await earlier.hold("swept", newHoldId(), 1_000_000, Date.now() - HOUR);
    const running = await credits.hold("swept", newHoldId(), 500_000, Date.now() + HOUR);
    expect(expired.ok && running.ok).toBe(true);
    expect((await credits.balance("swept")).availableMicros).toBe(3_500_000);

    const written: string[] = [];
    const stdout = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
      written.push(String(chunk));
      return true;
    });
    let report: SweepReport;
    try {
      report = await sweep({}, { awsRequestId: "sweep-1", functionName: "sweeper" } as Context);
    } finally {
      stdout.mockRestore();
    }

    expect(report).toEqual({
      holdsReleased: 1,
      settlementsCompleted: 0,
      grantsCompleted: 0,
      budgetHoldsSettled: 0,
    });
    const balance = await credits.balance("swept");
    expect(balance.availableMicros).toBe(4_500_000);
    expect(balance.heldMicros).toBe(500_000);
    expect((await credits.ledger("swept")).entries.map((e) => e.type)).toContain("release");

    const metrics = written
      .flatMap((chunk) => chunk.split("\n"))
      .filter((line) => line.includes('"_aws"'))
      .map((line) => JSON.parse(line));
    expect(metrics).toHaveLength(1);
    expect(metrics[0]).toMatchObject({
      function: "sweeper",
      HoldsReleased: 1,
      SettlementsCompleted: 0,
      GrantsCompleted: 0,
      BudgetHoldsSettled: 0,
    });
    expect(metrics[0]._aws.CloudWatchMetrics[0].Namespace).toBe("dmt/SweeperTest");

    // Run again: nothing left to release.
    expect(await sweep({})).toEqual({
      holdsReleased: 0,
      settlementsCompleted: 0,
      grantsCompleted: 0,
      budgetHoldsSettled: 0,
    });
  });
});
