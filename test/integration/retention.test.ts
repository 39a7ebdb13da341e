import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoInteractionIndex } from "../../lambda/adapters/dynamodb/interactions";
import { DynamoPrivacySettings } from "../../lambda/adapters/dynamodb/privacy-settings";
import { FsWarehouseFiles } from "../../lambda/adapters/fs/deletion-files";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { decodeRecords, encodeRecords } from "../../lambda/adapters/parquet/codec";
import { erasedUsageCodec } from "../../lambda/adapters/parquet/erased-usage";
import { createProject } from "../../lambda/core/accounts";
import type { WarehouseFiles } from "../../lambda/core/deletion";
import { erasedUsageKey } from "../../lambda/core/erased-usage";
import { silentLogger } from "../../lambda/core/logger";
import { updatePrivacySettings } from "../../lambda/core/privacy";
import { type InteractionRecord, partitionPrefix } from "../../lambda/core/record";
import type { RetentionAudit } from "../../lambda/core/retention";
import { runLocalRetention } from "../../lambda/local/retention";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import {
  planRetention,
  RETENTION_AUDIT_PREFIX,
  type RetentionDeps,
  retainPlanned,
  runRetention,
} from "../../lambda/warehouse/retention";
import { chatRecord } from "../support/records";

/**
 * The retention run over a real data dir: Parquet files in day partitions, the dashboard's index and
 * rollups in dynalite, run at a fixed "now". Each project gets the same 8 days of calls, two files a day.
 */
const NOW = Date.UTC(2026, 10, 26, 5, 0, 0);
const DAY = 86_400_000;
const DAYS = 8;

let dataDir: string;
let local: LocalStore;
let objects: FsObjectStore;
let index: DynamoInteractionIndex;

const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

function record(projectId: string, startedAt: number, n: number): InteractionRecord {
  return chatRecord({
    transactionId: `tx-${projectId}-${startedAt}-${n}`,
    projectId,
    startedAt,
    request: { text: `{"prompt":"secret ${n}"}`, bytes: 20, truncated: false },
    response: { text: `{"answer":"reply ${n}"}`, bytes: 20, truncated: false },
  });
}

/** 8 days (today back to 7 days ago) of two files with two records each, in the warehouse and the index. */
async function seed(projectId: string): Promise<void> {
  await createProject(local.store, projectId, "free", NOW);
  const all: InteractionRecord[] = [];
  for (let d = 0; d < DAYS; d++) {
    const noon = Math.floor((NOW - d * DAY) / DAY) * DAY + DAY / 2;
    for (const file of [0, 1]) {
      const records = [
        record(projectId, noon + file * 60_000, 0),
        record(projectId, noon + file * 60_000, 1),
      ];
      await objects.put(
        `${partitionPrefix(projectId, dayOf(noon))}seed-${file}.parquet`,
        encodeRecords(records),
      );
      all.push(...records);
    }
  }
  await index.write(all);
}

async function days(projectId: string): Promise<string[]> {
  const found = new Set<string>();
  for await (const o of objects.list(`interactions/project=${projectId}/`)) {
    found.add(/dt=(\d{4}-\d{2}-\d{2})/.exec(o.key)?.[1] ?? "");
  }
  return [...found].sort();
}

async function rowsOf(projectId: string, day: string): Promise<InteractionRecord[]> {
  const rows: InteractionRecord[] = [];
  for await (const o of objects.list(partitionPrefix(projectId, day))) {
    rows.push(...(await decodeRecords((await objects.get(o.key)) as Uint8Array)));
  }
  return rows;
}

async function audits(): Promise<RetentionAudit[]> {
  const found: RetentionAudit[] = [];
  for await (const o of objects.list(RETENTION_AUDIT_PREFIX)) {
    found.push(JSON.parse(Buffer.from((await objects.get(o.key)) as Uint8Array).toString("utf8")));
  }
  return found;
}

const settings = () => new DynamoPrivacySettings(local.db, local.tables);
const run = (options: { projectId?: string; dryRun?: boolean } = {}) =>
  runLocalRetention({ dataDir, ...local }, silentLogger, options, () => NOW);
const allDays = Array.from({ length: DAYS }, (_, d) => dayOf(NOW - d * DAY)).sort();

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-retention-"));
  local = await openLocalStore(dataDir);
  objects = new FsObjectStore(join(dataDir, "warehouse"));
  index = new DynamoInteractionIndex(local.db, local.tables);
});
afterAll(async () => {
  await local?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("the retention run", () => {
  it("removes exactly the day partitions past the limit, drops older bodies, keeps the rollups, and audits it", async () => {
    await seed("ret-a");
    await seed("ret-keep");
    await updatePrivacySettings(local.store, settings(), "ret-a", { retentionDays: 5, bodyRetentionDays: 2 });
    const rollupsBefore = await index.rollups.query("ret-a", allDays[0] as string, allDays.at(-1) as string);

    const dry = await run({ dryRun: true });
    expect(await days("ret-a")).toEqual(allDays);
    expect(await audits()).toEqual([]);

    const audit = await run();
    // Now is 2026-11-26 05:00: with 5 days, 2026-11-21 is the oldest day kept; bodies from 2026-11-24.
    const kept = allDays.filter((d) => d >= "2026-11-21");
    expect(await days("ret-a")).toEqual(kept);
    expect(kept).toHaveLength(6);
    expect(await days("ret-keep")).toEqual(allDays);

    for (const day of kept) {
      const rows = await rowsOf("ret-a", day);
      expect(rows).toHaveLength(4);
      const bodies = day >= "2026-11-24";
      for (const row of rows) {
        expect(row.request_body !== null).toBe(bodies);
        expect(row.response_body !== null).toBe(bodies);
        expect(row.store_level).toBe(bodies ? "full" : "metadata");
        expect(row).toMatchObject({ input_tokens: 10, output_tokens: 5, cost_micros: 7, user_id: "u-1" });
      }
    }
    // The index holds the same: expired entries gone, older bodies dropped.
    const firstKept = Date.parse("2026-11-21T12:00:00Z");
    expect(await index.get("ret-a", `tx-ret-a-${firstKept - DAY}-0`)).toBeUndefined();
    expect(await index.get("ret-a", `tx-ret-a-${firstKept}-0`)).toMatchObject({ request_body: null });
    const recent = Date.parse("2026-11-24T12:00:00Z");
    expect((await index.get("ret-a", `tx-ret-a-${recent}-0`))?.request_body).toContain("secret");
    expect((await index.get("ret-keep", `tx-ret-keep-${firstKept - DAY}-0`))?.request_body).toContain(
      "secret",
    );
    // Billing totals outlive the records.
    expect(await index.rollups.query("ret-a", allDays[0] as string, allDays.at(-1) as string)).toEqual(
      rollupsBefore,
    );

    const expired = allDays.filter((d) => d < "2026-11-21");
    const expected = {
      projectId: "ret-a",
      retentionDays: 5,
      bodyRetentionDays: 2,
      partitionsRemoved: expired,
      filesRemoved: 4,
      rowsRemoved: 8,
      bodyPartitions: kept.filter((d) => d < "2026-11-24"),
      filesRewritten: 6,
      rowsBlanked: 12,
    };
    expect(audit).toMatchObject({ status: "completed", dryRun: false, projects: [expected] });
    expect(audit.projects[0]).toMatchObject({ indexRemoved: 8, indexBlanked: 12 });
    // The dry run foresaw the same, and changed nothing.
    expect(dry).toMatchObject({ dryRun: true, projects: [expected] });
    expect(await audits()).toEqual([audit]);

    // A second run finds nothing left to do, and reads no body-free file again.
    const again = await run();
    expect(again.projects[0]).toMatchObject({ partitionsRemoved: [], filesRewritten: 0, indexRemoved: 0 });
    expect(await audits()).toHaveLength(2);
  }, 120_000);

  it("finishes the work of a run interrupted halfway when run again, counting every row once", async () => {
    await seed("ret-b");
    await updatePrivacySettings(local.store, settings(), "ret-b", { retentionDays: 2 });
    const files = new FsWarehouseFiles(objects);
    let removals = 0;
    const crashing: WarehouseFiles = {
      read: (key) => files.read(key),
      replace: (key, bytes, version) => files.replace(key, bytes, version),
      async remove(key, version) {
        if (++removals > 4) throw new Error("the process died");
        await files.remove(key, version);
      },
    };
    const interrupted = runRetention(
      {
        projects: local.store,
        objects,
        files: crashing,
        codec: { decode: decodeRecords, encode: encodeRecords },
        index,
        logger: silentLogger,
        clock: () => NOW,
      },
      { projectId: "ret-b" },
    );
    await expect(interrupted).rejects.toThrow("the process died");
    const halfway = (await days("ret-b")).filter((d) => d < "2026-11-24");
    expect(halfway.length).toBeGreaterThan(0);
    const failed = (await audits()).find((a) => a.status === "failed");
    expect(failed).toMatchObject({ error: "the process died", projects: [] });

    const rerun = await run({ projectId: "ret-b" });
    expect(await days("ret-b")).toEqual(allDays.filter((d) => d >= "2026-11-24"));
    // 5 expired days of 2 files: 4 removed before the crash, the other 6 by the second run.
    expect(rerun.projects[0]).toMatchObject({
      filesRemoved: 6,
      rowsRemoved: 12,
      partitionsRemoved: halfway,
    });
    expect(await index.get("ret-b", `tx-ret-b-${Date.parse("2026-11-23T12:00:00Z")}-0`)).toBeUndefined();
  }, 120_000);

  it("fanned out as in AWS: the plan lists the projects with a limit, and each worker retains one under its limits of now", async () => {
    await seed("ret-fan");
    await seed("ret-fan-none");
    await updatePrivacySettings(local.store, settings(), "ret-fan", { retentionDays: 2 });
    const steps: RetentionDeps = {
      projects: local.store,
      objects,
      files: new FsWarehouseFiles(objects),
      codec: { decode: decodeRecords, encode: encodeRecords },
      index,
      logger: silentLogger,
      clock: () => NOW,
    };
    const planned = await planRetention(steps);
    // Only projects with a limit; planning changes nothing.
    expect(planned).toContainEqual({ projectId: "ret-fan" });
    expect(planned.map((p) => p.projectId)).not.toContain("ret-fan-none");
    expect(await planRetention(steps, { projectId: "ret-fan" })).toEqual([{ projectId: "ret-fan" }]);
    expect(await days("ret-fan")).toEqual(allDays);
    const before = (await audits()).length;

    // The limit raised after the plan: the worker reads it again and keeps what is now wanted.
    await updatePrivacySettings(local.store, settings(), "ret-fan", { retentionDays: 4 });
    const audit = await retainPlanned(steps, { projectId: "ret-fan" });
    // With 4 days, 2026-11-22 is the oldest day kept.
    expect(await days("ret-fan")).toEqual(allDays.filter((d) => d >= "2026-11-22"));
    expect(await days("ret-fan-none")).toEqual(allDays);
    expect(audit).toMatchObject({
      status: "completed",
      projects: [{ projectId: "ret-fan", retentionDays: 4, filesRemoved: 6, rowsRemoved: 12 }],
    });
    // Each worker leaves its own audit entry; a message delivered twice removes nothing more.
    const again = await retainPlanned(steps, { projectId: "ret-fan" });
    expect(again?.projects[0]).toMatchObject({ partitionsRemoved: [], filesRemoved: 0, indexRemoved: 0 });
    expect(await audits()).toHaveLength(before + 2);
    // A project planned and then gone, or without a limit by now: nothing to do, no audit entry.
    expect(await retainPlanned(steps, { projectId: "ret-fan-none" })).toBeUndefined();
    expect(await retainPlanned(steps, { projectId: "ret-gone" })).toBeUndefined();
    expect(await audits()).toHaveLength(before + 2);
  }, 120_000);

  it("removes a day's erased usage with its records, also where a deletion left no record of the day", async () => {
    await seed("ret-erased");
    await updatePrivacySettings(local.store, settings(), "ret-erased", { retentionDays: 5 });
    const erased = (day: string, name: string) => erasedUsageKey("ret-erased", day, "del_x", name);
    const row = {
      key_id: "abcdefghijklmnop",
      vendor: "openai",
      model: "gpt-4o-mini",
      billing_mode: "managed",
      price_version: null,
      calls: 1,
      priced_calls: 1,
      failed_calls: 0,
      input_tokens: 10,
      output_tokens: 5,
      cached_input_tokens: 0,
      cache_write_tokens: 0,
      reasoning_tokens: 0,
      cost_micros: 7,
      list_micros: 7,
    };
    const oldest = allDays[0] as string;
    const newest = allDays.at(-1) as string;
    // A day whose records were all erased: its erased usage stands alone.
    const erasedOnly = dayOf(NOW - (DAYS + 2) * DAY);
    for (const [day, name] of [
      [oldest, "a"],
      [erasedOnly, "b"],
      [newest, "c"],
    ] as const) {
      await objects.put(erased(day, name), erasedUsageCodec.encode([row]));
    }
    const audit = await run({ projectId: "ret-erased" });
    const left: string[] = [];
    for await (const o of objects.list("erased-usage/project=ret-erased/")) left.push(o.key);
    expect(left).toEqual([erased(newest, "c")]);
    const done = audit.projects.find((p) => p.projectId === "ret-erased");
    expect(done?.partitionsRemoved).toContain(erasedOnly);
    expect(done?.partitionsRemoved).toContain(oldest);
  });
});
