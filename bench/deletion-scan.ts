/**
 * What a deletion request's Athena queries scan (issue #21). The find and verify queries read four
 * columns of every file of the project (`project_id`, `started_at`, `user_id`, `transaction_id`: see
 * lambda/adapters/sql/deletion-condition.ts) plus each file's footer; Athena bills the bytes it reads
 * from S3, at least 10 MB per query.
 *
 * One day of a steady project (100 calls a minute: 144,000 rows) is written as the consumer leaves it
 * with the AWS batching settings (a 60 s window, 2 pollers: up to 2,880 files of 50 rows), and as one
 * file (what compaction would make of it). DuckDB's `parquet_metadata` gives the compressed size of the
 * column chunks the queries read; the footer is what a file holds besides its column chunks. A month is
 * 30 such days.
 *
 * Usage: npx tsx bench/deletion-scan.ts [filesPerDay=2880]
 * Writes bench/results/deletion-scan.json.
 */

import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { DuckDBInstance, LIST, listValue, VARCHAR } from "@duckdb/node-api";
import { encodeRecords } from "../lambda/adapters/parquet/codec";
import type { InteractionRecord } from "../lambda/core/record";
import { formatTable } from "./lib/table";
import { syntheticRecord } from "./warehouse-records";

const here = dirname(fileURLToPath(import.meta.url));
const FILES_PER_DAY = Number(process.argv[2] ?? 2880);
const ROWS_PER_DAY = 144_000;
const QUERIED = ["project_id", "started_at", "user_id", "transaction_id"];
const ATHENA_MINIMUM = 10 * 2 ** 20;
const DAYS = 30;

const dir = mkdtempSync(join(tmpdir(), "dmt-deletion-scan-"));

function day(): InteractionRecord[] {
  const rows: InteractionRecord[] = [];
  for (let i = 0; i < ROWS_PER_DAY; i++) {
    rows.push(
      syntheticRecord(i, {
        projectId: "bench",
        startMs: Date.UTC(2026, 0, 15),
        stepMs: 600,
        overrides: { userIdHeader: `user-${i % 500}@example.com` },
      }),
    );
  }
  return rows;
}

async function measure(files: string[]) {
  const instance = await DuckDBInstance.create(":memory:", { threads: "1" });
  const connection = await instance.connect();
  const result = await connection.runAndReadAll(
    `SELECT path_in_schema AS col, sum(total_compressed_size)::BIGINT AS bytes FROM parquet_metadata(?) GROUP BY 1`,
    [listValue(files)],
    [LIST(VARCHAR)],
  );
  connection.closeSync();
  instance.closeSync();
  const byColumn = new Map(result.getRowObjects().map((r) => [String(r.col), Number(r.bytes)]));
  const fileBytes = files.reduce((sum, f) => sum + statSync(f).size, 0);
  const chunkBytes = [...byColumn.values()].reduce((a, b) => a + b, 0);
  const queriedBytes = QUERIED.reduce((sum, c) => sum + (byColumn.get(c) ?? 0), 0);
  const footerBytes = fileBytes - chunkBytes;
  return {
    files: files.length,
    fileBytes,
    queriedBytes,
    footerBytes,
    scannedPerQuery: queriedBytes + footerBytes,
  };
}

async function main() {
  const rows = day();
  const perFile = Math.ceil(ROWS_PER_DAY / FILES_PER_DAY);
  const small: string[] = [];
  for (let i = 0; i < FILES_PER_DAY; i++) {
    const path = join(dir, `small-${i}.parquet`);
    writeFileSync(path, encodeRecords(rows.slice(i * perFile, (i + 1) * perFile)));
    small.push(path);
  }
  const one = join(dir, "day.parquet");
  writeFileSync(one, encodeRecords(rows));

  const layouts = [
    { layout: `${FILES_PER_DAY} files a day (consumer)`, ...(await measure(small)) },
    { layout: "1 file a day (compacted)", ...(await measure([one])) },
  ].map((m) => {
    const monthPerQuery = m.scannedPerQuery * DAYS;
    // find + verify: two queries per request (a Verify round adds two more).
    const perRequest = 2 * Math.max(ATHENA_MINIMUM, monthPerQuery);
    return { ...m, monthPerQuery, perRequest, dollarsPerRequest: (perRequest / 2 ** 40) * 5 };
  });
  const mb = (b: number) => Number((b / 2 ** 20).toFixed(2));
  console.log(`\nAthena bytes scanned per deletion request, a project of 100 calls/min over ${DAYS} days\n`);
  console.log(
    formatTable(
      [
        "layout",
        "files/day",
        "MB/day (files)",
        "MB/day queried cols",
        "MB/day footers",
        "MB/query (month)",
        "MB/request",
        "$/request",
      ],
      layouts.map((l) => [
        l.layout,
        l.files,
        mb(l.fileBytes),
        mb(l.queriedBytes),
        mb(l.footerBytes),
        mb(l.monthPerQuery),
        mb(l.perRequest),
        Number(l.dollarsPerRequest.toFixed(5)),
      ]),
    ),
  );
  const out = join(here, "results");
  mkdirSync(out, { recursive: true });
  writeFileSync(
    join(out, "deletion-scan.json"),
    `${JSON.stringify(
      {
        date: new Date().toISOString(),
        machine: {
          cpus: cpus().length,
          loadAverage1m: Number(loadavg()[0]?.toFixed(2)),
          node: process.version,
        },
        rowsPerDay: ROWS_PER_DAY,
        days: DAYS,
        columnsQueried: QUERIED,
        layouts,
      },
      null,
      2,
    )}\n`,
  );
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => rmSync(dir, { recursive: true, force: true }));
