/**
 * What a local query's read snapshot costs (docs/warehouse.md, "Readers during a swap"): one hard link
 * per file of the day folders it reads. A day at the AWS batching settings before compaction holds
 * 2,880 consumer files, the most a day folder holds; its export takes about a minute ("Figures").
 *
 * Usage: npx tsx bench/read-snapshot.ts [files=2880] [rounds=5]. Prints the milliseconds per snapshot
 * (taken and released) and the load average.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { ReadSnapshots } from "../lambda/adapters/duckdb/read-snapshot";

async function main() {
  const files = Number(process.argv[2] ?? 2880);
  const rounds = Number(process.argv[3] ?? 5);
  const root = mkdtempSync(join(tmpdir(), "dmt-read-snapshot-"));
  try {
    const day = join(root, "interactions", "project=p", "dt=2026-11-25");
    mkdirSync(day, { recursive: true });
    for (let i = 0; i < files; i++) {
      writeFileSync(join(day, `20261125T${String(i).padStart(9, "0")}Z-bench.parquet`), "x");
    }
    const snapshots = new ReadSnapshots(root);
    const ms: number[] = [];
    for (let round = 0; round < rounds; round++) {
      const started = performance.now();
      const snapshot = await snapshots.take([day]);
      await snapshot.release();
      ms.push(Math.round(performance.now() - started));
      if (snapshot.files.length !== files) throw new Error("a file was left out");
    }
    console.log(
      JSON.stringify({ files, snapshotMs: ms, loadAverage: loadavg().map((l) => Math.round(l * 10) / 10) }),
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

void main();
