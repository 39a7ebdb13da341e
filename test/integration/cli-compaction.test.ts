import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { encodeRecords } from "../../lambda/adapters/parquet/codec";
import type { CompactionReport } from "../../lambda/core/compaction";
import { partitionPrefix } from "../../lambda/core/record";
import { dmtJson, runDmt } from "../support/cli";

/** `dmt compaction run` over a data dir with no server: yesterday's three files become one. */
let dir: string;
const DAY = 86_400_000;
const yesterday = new Date(Date.now() - DAY).toISOString().slice(0, 10);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-cli-compaction-"));
  await dmtJson(["projects", "create", "acme"], dir);
  const objects = new FsObjectStore(join(dir, "warehouse"));
  const noon = Date.parse(`${yesterday}T12:00:00Z`);
  for (let file = 0; file < 3; file++) {
    const records = [0, 1].map((i) =>
      syntheticRecord(file * 2 + i, { projectId: "acme", startMs: noon + file * 60_000 }),
    );
    await objects.put(
      `${partitionPrefix("acme", yesterday)}2026${file}-batch.parquet`,
      encodeRecords(records),
    );
  }
}, 300_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("compaction from the CLI", () => {
  it("merges a closed day's files, says what it did, and refuses an unknown project", async () => {
    const report = await dmtJson<CompactionReport>(["compaction", "run", "--project", "acme"], dir);
    expect(report.runId).toMatch(/^cmp_[0-9a-f]{16}$/);
    expect(report.partitions).toEqual([
      { projectId: "acme", day: yesterday, outcome: "compacted", filesBefore: 3, filesAfter: 1, rows: 6 },
    ]);
    const again = await runDmt(["compaction", "run"], dir);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/^Compaction run cmp_[0-9a-f]{16}: no closed day had files to merge\.$/m);

    const unknown = await runDmt(["compaction", "run", "--project", "nope"], dir);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe("");
    expect(unknown.stderr).toMatch("Project 'nope' does not exist.");
  }, 300_000);
});
