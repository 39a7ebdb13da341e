/**
 * Deletion at scale (issue #21): one user spread over 20,000 small files, as weeks of the consumer's
 * one-file-per-batch writes leave them, deleted through the local workflow (the same step handlers as
 * the step Lambda; DuckDB finds the files with one query; the runner reads the manifest as the
 * Distributed Map's ItemReader does; hyparquet rewrites each file).
 *
 * Every file holds two rows: one of the user, and on every other file one of somebody else, so half the
 * files are rewritten and half removed. Checks at the end: one FindFiles, one manifest line per file,
 * no row of the user left, every other row kept.
 *
 * Not a `*.bench.ts` (npm run bench would spend ~20 minutes on it). Usage:
 *   npx tsx bench/deletion-scale.ts [files=20000]
 * Writes bench/results/deletion-scale.json.
 */

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DuckDBDeletionQuery } from "../lambda/adapters/duckdb/deletion-query";
import { DynamoTombstones } from "../lambda/adapters/dynamodb/tombstones";
import { localUserIdHasher } from "../lambda/adapters/fs/master-key";
import { FsObjectStore } from "../lambda/adapters/fs/object-store";
import { encodeRecords } from "../lambda/adapters/parquet/codec";
import { hashUserId, newDeletionRequest } from "../lambda/core/deletion";
import { deletionManifestKey, parseDeletionManifest } from "../lambda/core/deletion-manifest";
import { silentLogger } from "../lambda/core/logger";
import { partitionPrefix } from "../lambda/core/record";
import { startLocalDeletion } from "../lambda/local/deletion";
import { openLocalStore } from "../lambda/local/store";
import { localExportSettings } from "../lambda/local/warehouse";
import { formatTable } from "./lib/table";
import { syntheticRecord } from "./warehouse-records";

const here = dirname(fileURLToPath(import.meta.url));
const FILES = Number(process.argv[2] ?? 20_000);
const USER = "spread-user@example.com";
const OTHER = "other-user@example.com";
const DAY_MS = 86_400_000;

const dir = mkdtempSync(join(tmpdir(), "dmt-deletion-scale-"));
const objects = new FsObjectStore(join(dir, "warehouse"));

async function writeWarehouse(): Promise<number> {
  let rows = 0;
  for (let i = 0; i < FILES; i++) {
    // 30 days, files spread evenly: ~670 a day at 20,000 (a steady project's consumer writes 1,440+).
    const startMs = Date.UTC(2026, 0, 1) + Math.floor((i * 30 * DAY_MS) / FILES);
    const day = new Date(startMs).toISOString().slice(0, 10);
    const records = [
      syntheticRecord(2 * i, { projectId: "bench", startMs, overrides: { userIdHeader: USER } }),
    ];
    if (i % 2 === 0) {
      records.push(
        syntheticRecord(2 * i + 1, { projectId: "bench", startMs, overrides: { userIdHeader: OTHER } }),
      );
    }
    rows += records.length;
    await objects.put(`${partitionPrefix("bench", day)}batch-${i}.parquet`, encodeRecords(records));
  }
  return rows;
}

async function main() {
  const writeStarted = performance.now();
  const rows = await writeWarehouse();
  const writeSeconds = (performance.now() - writeStarted) / 1000;
  const local = await openLocalStore(dir);
  const entered: { name: string; at: number }[] = [];
  const deletion = await startLocalDeletion({
    db: local.db,
    requestsTable: local.tables.deletionRequests,
    tombstones: new DynamoTombstones(local.db, local.tables.deletionTombstones),
    userIds: localUserIdHasher(dir),
    objects,
    exports: {
      settings: localExportSettings(dir),
      openDestination: (d) => new FsObjectStore(d.kind === "file" ? d.path : join(dir, "buckets", d.bucket)),
    },
    waitForInFlight: async () => {},
    logger: silentLogger,
    runner: { onState: (name) => entered.push({ name, at: performance.now() }) },
  });

  const request = newDeletionRequest("bench", { userId: USER, reason: "benchmark" }, Date.now());
  await deletion.routes.requests.create(request);
  const cpu = process.cpuUsage();
  const started = performance.now();
  const outcome = await deletion.runner.run(request);
  const totalMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const done = await deletion.routes.requests.get("bench", request.requestId);
  const counts = done?.counts;
  if (outcome !== "succeeded" || done?.status !== "completed" || !counts) {
    throw new Error(`the deletion ${outcome}: ${done?.error ?? ""}`);
  }
  const phase = (name: string) =>
    entered.reduce(
      (sum, e, i) => sum + (e.name === name ? (entered[i + 1]?.at ?? started + totalMs) - e.at : 0),
      0,
    ) / 1000;

  // The checks: one find, every file listed once, nothing of the user left, everything else kept.
  const finds = entered.filter((e) => e.name === "FindFiles").length;
  const manifest = parseDeletionManifest(
    (await objects.get(deletionManifestKey("bench", request.requestId, 0))) ?? new Uint8Array(),
  );
  const query = await DuckDBDeletionQuery.open(objects.root);
  const target = { projectId: "bench", transactionIds: [], upTo: Date.now() };
  const left = await query.countMatching({ ...target, userIdHash: hashUserId("bench", USER) });
  const others = await query.countMatching({ ...target, userIdHash: hashUserId("bench", OTHER) });
  query.close();
  if (finds !== 1 || manifest.length !== FILES || left !== 0 || others !== Math.ceil(FILES / 2)) {
    throw new Error(
      `checks failed: finds ${finds}, manifest ${manifest.length}, left ${left}, others ${others}`,
    );
  }
  await deletion.close();
  await local.close();

  const rewriteSeconds = phase("RewriteFiles");
  const run = {
    files: FILES,
    rows,
    rowsDeleted: counts.rowsDeleted,
    filesRewritten: counts.filesRewritten,
    filesDeleted: counts.filesDeleted,
    findQueries: finds,
    statesEntered: entered.length,
    manifestBytes: (await objects.get(deletionManifestKey("bench", request.requestId, 0)))?.length ?? 0,
    writeSeconds,
    findSeconds: phase("FindFiles"),
    rewriteSeconds,
    msPerFileRewriting: (rewriteSeconds * 1000) / FILES,
    verifySeconds: phase("Verify"),
    totalSeconds: totalMs / 1000,
    cpuSeconds: (used.user + used.system) / 1e6,
  };
  console.log(`\nDeleting a user spread over ${FILES.toLocaleString("en-US")} files\n`);
  console.log(
    formatTable(
      [
        "files",
        "rows deleted",
        "rewritten",
        "removed",
        "finds",
        "states",
        "find s",
        "rewrite s",
        "ms/file",
        "verify s",
        "total s",
      ],
      [
        [
          run.files,
          run.rowsDeleted,
          run.filesRewritten,
          run.filesDeleted,
          run.findQueries,
          run.statesEntered,
          run.findSeconds,
          run.rewriteSeconds,
          run.msPerFileRewriting,
          run.verifySeconds,
          run.totalSeconds,
        ],
      ],
    ),
  );
  const out = join(here, "results");
  mkdirSync(out, { recursive: true });
  const results = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, loadAverage1m: Number(loadavg()[0]?.toFixed(2)), node: process.version },
    run,
  };
  writeFileSync(join(out, "deletion-scale.json"), `${JSON.stringify(results, null, 2)}\n`);
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }));
