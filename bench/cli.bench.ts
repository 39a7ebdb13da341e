/**
 * Start time of the `dmt` CLI as a whole process: the median of 10 runs of `dmt --version` and of
 * `dmt keys list --project <id>`, from the bundle `npm install` builds and from the TypeScript sources through tsx (what every
 * command ran before the bundle). `keys list` runs two ways: with `dmt serve` running on the data dir
 * (the README's path: the command talks to the server's store) and without (it starts the embedded
 * store itself, which dominates). Run: `npx tsx bench/cli.bench.ts`. Never part of the tests.
 *
 * Each run is timed twice: wall time, and the CPU time (user + system) the process used, which a busy
 * machine moves far less (Linux: the children's times in /proc/self/stat; elsewhere only wall time).
 * It also times `keys list` (no server) against `--version`, both from the bundle, run in turn (one of
 * each, `RUNS` times), and reports the median of the pairs' ratios: a figure a busy machine moves less
 * than either time, since both runs of a pair see about the same load. The goal (issue #18) is a
 * `keys list` under 0.5 s on a quiet machine.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { startDmtServe } from "../test/support/cli";
import { formatTable } from "./lib/table";

const RUNS = Number(process.env.BENCH_RUNS ?? 10);
const ROOT = join(import.meta.dirname, "..");
const DMT = join(ROOT, "bin", "dmt.mjs");

/**
 * CPU time (user + system, ms) of this process's children that have been waited for: cutime and cstime
 * of /proc/self/stat, in clock ticks of 10 ms. Undefined where there is no /proc.
 */
function childrenCpuMs(): number | undefined {
  try {
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ") ?? [];
    // After the command name, fields[0] is the state (field 3 of proc(5)): cutime is 16, cstime 17.
    return (Number(fields[13]) + Number(fields[14])) * 10;
  } catch {
    return undefined;
  }
}

function run(args: string[], env: Record<string, string>): { wallMs: number; cpuMs: number | undefined } {
  const cpuBefore = childrenCpuMs();
  const started = process.hrtime.bigint();
  const out = spawnSync(process.execPath, [DMT, ...args], {
    env: { ...process.env, ...env },
    encoding: "utf8",
  });
  const wallMs = Number(process.hrtime.bigint() - started) / 1e6;
  const cpuAfter = childrenCpuMs();
  if (out.status !== 0) throw new Error(`dmt ${args.join(" ")} failed: ${out.stderr}`);
  return {
    wallMs,
    cpuMs: cpuBefore === undefined || cpuAfter === undefined ? undefined : cpuAfter - cpuBefore,
  };
}

/** The median CPU time of runs, if every run had one. */
const medianCpu = (runs: { cpuMs: number | undefined }[]) =>
  runs.every((r) => r.cpuMs !== undefined) ? median(runs.map((r) => r.cpuMs ?? 0)) : undefined;

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const build = spawnSync(process.execPath, [join(ROOT, "bin", "build-cli.mjs")], { encoding: "utf8" });
  if (build.status !== 0) throw new Error(`the bundle could not be built: ${build.stderr}`);
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-bench-cli-"));
  const env = { DMT_DATA_DIR: dataDir };
  const results: {
    command: string;
    from: string;
    medianMs: number;
    minMs: number;
    maxMs: number;
    medianCpuMs: number | undefined;
  }[] = [];
  let ratio:
    | {
        medianRatio: number;
        listMedianMs: number;
        versionMedianMs: number;
        listMedianCpuMs: number | undefined;
        versionMedianCpuMs: number | undefined;
      }
    | undefined;
  try {
    run(["projects", "create", "bench"], env);
    run(["keys", "create", "--project", "bench", "--name", "a"], env);
    const measure = (label: string, args: string[]) => {
      for (const [from, extra] of [
        ["bundle", {}],
        ["sources (tsx)", { DMT_CLI_FROM_SOURCE: "1" }],
      ] as const) {
        run(args, { ...env, ...extra }); // warm the file cache and tsx's transform cache
        const runs = Array.from({ length: RUNS }, () => run(args, { ...env, ...extra }));
        const times = runs.map((r) => r.wallMs);
        results.push({
          command: label,
          from,
          medianMs: median(times),
          minMs: Math.min(...times),
          maxMs: Math.max(...times),
          medianCpuMs: medianCpu(runs),
        });
      }
    };
    measure("dmt --version", ["--version"]);
    measure("dmt keys list (no server)", ["keys", "list", "--project", "bench"]);
    // Paired: `keys list` without a server and `--version`, from the bundle, one after the other.
    const pairs = Array.from({ length: RUNS }, () => {
      const list = run(["keys", "list", "--project", "bench"], env);
      const version = run(["--version"], env);
      return { list, version };
    });
    ratio = {
      medianRatio: median(pairs.map((p) => p.list.wallMs / p.version.wallMs)),
      listMedianMs: median(pairs.map((p) => p.list.wallMs)),
      versionMedianMs: median(pairs.map((p) => p.version.wallMs)),
      listMedianCpuMs: medianCpu(pairs.map((p) => p.list)),
      versionMedianCpuMs: medianCpu(pairs.map((p) => p.version)),
    };
    const server = await startDmtServe(dataDir);
    try {
      measure("dmt keys list (server running)", ["keys", "list", "--project", "bench"]);
    } finally {
      await server.stop("SIGINT");
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
  const loadAfter = loadavg();
  const load = (l: number[]) => l.map((n) => n.toFixed(1)).join(" ");
  const cpu = (ms: number | undefined) => (ms === undefined ? "-" : Math.round(ms));
  process.stdout.write(
    [
      `dmt start time, whole process, ${RUNS} runs each (load average ${load(machine.loadavg)} at the start, ${load(loadAfter)} at the end)`,
      formatTable(
        ["command", "from", "median CPU ms", "median ms", "min ms", "max ms"],
        results.map((r) => [
          r.command,
          r.from,
          cpu(r.medianCpuMs),
          Math.round(r.medianMs),
          Math.round(r.minMs),
          Math.round(r.maxMs),
        ]),
      ),
      ...(ratio
        ? [
            "",
            `keys list (no server) / --version, bundle, ${RUNS} pairs run in turn: median ratio ${ratio.medianRatio.toFixed(2)} ` +
              `(medians ${Math.round(ratio.listMedianMs)} ms / ${Math.round(ratio.versionMedianMs)} ms; ` +
              `CPU ${cpu(ratio.listMedianCpuMs)} ms / ${cpu(ratio.versionMedianCpuMs)} ms)`,
          ]
        : []),
      "",
    ].join("\n"),
  );
  mkdirSync(join(import.meta.dirname, "results"), { recursive: true });
  writeFileSync(
    join(import.meta.dirname, "results", "cli.json"),
    `${JSON.stringify({ date: new Date().toISOString(), machine, loadavgAfter: loadAfter, runs: RUNS, results, ratio }, null, 2)}\n`,
  );
}

await main();
