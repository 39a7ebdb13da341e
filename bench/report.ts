/**
 * Writes bench/REPORT.md from bench/results/*.json (and the PNG charts beside them): one section per
 * benchmark, the machine and the run's log (bench/results/run.json, written by bench/run.ts).
 * `npx tsx bench/report.ts` rewrites the report from the results already there.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { barChart, type ChartSpec, COLORS, renderCharts } from "./report-charts";
import type { Machine } from "./report-machine";

const BENCH = import.meta.dirname;
const RESULTS = join(BENCH, "results");

/** What bench/run.ts records of a run. */
export interface RunLog {
  started: string;
  finished: string;
  machineAtStart: Machine;
  machineAtEnd: Machine;
  benchmarks: { name: string; file: string; exitCode: number | null; seconds: number; finished: string }[];
}

type Cell = string | number | boolean | null | undefined;

function fmt(value: Cell, digits = 2): string {
  if (value === null || value === undefined) return "–";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "string") return value;
  if (!Number.isFinite(value)) return "–";
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString("en-US");
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(digits);
}

function table(columns: string[], rows: Cell[][]): string {
  const align = columns.map((_, i) => (rows.some((r) => typeof r[i] === "number") ? "---:" : "---"));
  return [
    `| ${columns.join(" | ")} |`,
    `| ${align.join(" | ")} |`,
    ...rows.map((r) => `| ${r.map((c) => fmt(c)).join(" | ")} |`),
  ].join("\n");
}

const image = (file: string, alt: string) => `![${alt}](results/${file})`;
const color = (i: number) => COLORS[i % COLORS.length] as string;

interface Section {
  markdown: string;
  charts: ChartSpec[];
}

function read<T>(name: string): T | undefined {
  const file = join(RESULTS, `${name}.json`);
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as T) : undefined;
}

// What each benchmark writes (the fields the report reads).
interface LoadRow {
  target: string;
  connections: number;
  requestsPerSecond: number | null;
  p50Ms: number;
  p99Ms: number;
}
interface ProxyResult {
  loads: (LoadRow & { errors: number; non2xx: number })[];
  streams: { target: string; streams: number; ttfbP50Ms: number; ttfbP99Ms: number }[];
  targets: { addedP50AtC1Ms: number; throughputRatioVsPortkeyAtC50: number };
}
interface MeteringResult {
  summary: (LoadRow & { failures: number })[];
  targets: Record<string, number | boolean>;
}
interface StatusResult {
  http: (LoadRow & { errors: number; non2xx: number })[];
  auth: { opsPerSecond: number; cpuMicrosPerOp: number };
}
interface WarehouseResult {
  consumer: { records: number; recordsPerSecond: number; files: number; bytesPerRecord: number };
  exports: {
    format: string;
    rows: number;
    rowsPerSecond: number;
    megabytes: number;
    idleRssMb: number;
    peakRssMb: number;
  }[];
  targets: { consumerRecordsPerSecond: number; exportRowsPerSecond: number; exportPeakRssMb: number };
}
interface InitStats {
  p50: number;
}
interface BundlesResult {
  runs: number;
  results: {
    function: string;
    bundleBytes: number;
    gzipBytes: number;
    init: InitStats;
    initWithoutSourceMaps: InitStats;
    processReady: InitStats;
  }[];
}
interface DeletionResult {
  warehouse: { rows: number; files: number; matchingShare: number };
  runs: {
    scenario: string;
    rowsDeleted: number;
    filesRewritten: number;
    filesDeleted: number;
    totalSeconds: number;
    rowsDeletedPerSecondTotal: number;
    peakRssMb: number;
  }[];
}
interface DashboardResult {
  interactions: number;
  write: { perSecond: number };
  results: {
    name: string;
    requests: number;
    p50Ms: number;
    p95Ms: number;
    p99Ms: number;
    meanRows: number;
  }[];
}
interface ReconcileResult {
  calls: number;
  concurrency: number;
  failedCalls: number;
  figures: Record<string, number | Record<string, number>>;
  violations: string[];
}
interface SoakResult {
  seconds: number;
  ratePerSecond: number;
  chunkDelayMs: number;
  sent: number;
  completed: number;
  failed: number;
  records: number;
  intervals: {
    at: number;
    p50Ms: number;
    p99Ms: number;
    ttfbP99Ms: number;
    rssMb: number;
    cpuPercent: number;
  }[];
  flatness: Record<string, number>;
  verdict: Record<string, boolean>;
}

function proxySection(r: ProxyResult): Section {
  const direct = (c: number) => r.loads.find((l) => l.target === "simulator (direct)" && l.connections === c);
  const targets = [...new Set(r.loads.map((l) => l.target))];
  const at = (t: string, c: number) => r.loads.find((l) => l.target === t && l.connections === c);
  const directStream = r.streams.find((s) => s.target === "simulator (direct)");
  return {
    markdown: [
      "## Proxy overhead: dmt vs a bare pass-through vs Portkey",
      "",
      "Non-streaming chat completions, all four in front of the same simulator, each server a process of its",
      "own, in one run (`bench/proxy.bench.ts`). `dmt` relays with metering off here, like the other targets",
      "(the next section measures what metering adds). Added = minus the simulator called directly.",
      "Every call still becomes a record: locally the warehouse consumer (Parquet files, the dashboard's",
      "interaction index in the embedded store) runs in the server's process and takes its CPU, where in",
      "AWS it is a function of its own.",
      "",
      table(
        ["target", "connections", "req/s", "p50 ms", "p99 ms", "added p50 ms", "added p99 ms", "errors"],
        r.loads.map((l) => [
          l.target,
          l.connections,
          l.requestsPerSecond,
          l.p50Ms,
          l.p99Ms,
          l.p50Ms - (direct(l.connections)?.p50Ms ?? Number.NaN),
          l.p99Ms - (direct(l.connections)?.p99Ms ?? Number.NaN),
          l.errors + l.non2xx,
        ]),
      ),
      "",
      `dmt's added p50 at c=1: **${fmt(r.targets.addedP50AtC1Ms, 3)} ms** (target < 1 ms); dmt / Portkey ` +
        `throughput at c=50: **${fmt(r.targets.throughputRatioVsPortkeyAtC50)}x** (target ≥ 3x).`,
      "",
      image("proxy-throughput.png", "requests per second by target"),
      "",
      "### Streaming: time to first byte",
      "",
      table(
        ["target", "streams", "TTFB p50 ms", "TTFB p99 ms", "added p50 ms"],
        r.streams.map((s) => [
          s.target,
          s.streams,
          s.ttfbP50Ms,
          s.ttfbP99Ms,
          s.ttfbP50Ms - (directStream?.ttfbP50Ms ?? Number.NaN),
        ]),
      ),
      "",
      image("proxy-ttfb.png", "time to first byte by target"),
    ].join("\n"),
    charts: [
      {
        file: join(RESULTS, "proxy-throughput.png"),
        config: barChart({
          title: "Throughput, non-streaming chat (req/s, higher is better)",
          labels: targets,
          yLabel: "requests per second",
          series: [1, 50].map((c, i) => ({
            label: `${c} connection${c > 1 ? "s" : ""}`,
            data: targets.map((t) => at(t, c)?.requestsPerSecond ?? null),
            color: color(i),
          })),
        }),
      },
      {
        file: join(RESULTS, "proxy-ttfb.png"),
        config: barChart({
          title: "Streams: time to first byte (ms, lower is better)",
          labels: r.streams.map((s) => s.target),
          yLabel: "ms",
          series: [
            { label: "p50", data: r.streams.map((s) => s.ttfbP50Ms), color: color(0) },
            { label: "p99", data: r.streams.map((s) => s.ttfbP99Ms), color: color(1) },
          ],
        }),
      },
    ],
  };
}

function meteringSection(r: MeteringResult): Section {
  const label = (c: number) => (c === 0 ? "isolated (one at a time, paused)" : `c=${c}`);
  const targets = [...new Set(r.summary.map((s) => s.target))];
  const levels = [...new Set(r.summary.map((s) => s.connections))];
  return {
    markdown: [
      "## Metering on vs off",
      "",
      "The same proxy with metering off, on (rate limit, credit hold, settlement), and on with an",
      "X-Request-ID on every call; medians over rounds taken in turn (`bench/metering.bench.ts`).",
      "",
      table(
        ["target", "load", "req/s", "p50 ms", "p99 ms", "failures"],
        r.summary.map((s) => [
          s.target,
          label(s.connections),
          s.requestsPerSecond,
          s.p50Ms,
          s.p99Ms,
          s.failures,
        ]),
      ),
      "",
      table(
        ["figure", "value"],
        Object.entries(r.targets).map(([k, v]) => [k, v]),
      ),
      "",
      image("metering.png", "p50 latency with metering off and on"),
    ].join("\n"),
    charts: [
      {
        file: join(RESULTS, "metering.png"),
        config: barChart({
          title: "Metering: p50 latency by load (ms, log scale)",
          labels: levels.map(label),
          yLabel: "ms",
          logarithmic: true,
          series: targets.map((t, i) => ({
            label: t,
            data: levels.map(
              (c) => r.summary.find((s) => s.target === t && s.connections === c)?.p50Ms ?? null,
            ),
            color: color(i),
          })),
        }),
      },
    ],
  };
}

function statusSection(r: StatusResult): Section {
  return {
    markdown: [
      "## Status endpoint and authentication",
      "",
      "`GET /api/v1/status` with a key (`bench/status.bench.ts`), and the CPU cost of a cached authentication.",
      "",
      table(
        ["connections", "req/s", "p50 ms", "p99 ms", "errors"],
        r.http.map((h) => [h.connections, h.requestsPerSecond, h.p50Ms, h.p99Ms, h.errors + h.non2xx]),
      ),
      "",
      `Cached authentication: ${fmt(r.auth.opsPerSecond)} ops/s, ${fmt(r.auth.cpuMicrosPerOp)} µs of CPU each.`,
    ].join("\n"),
    charts: [],
  };
}

function warehouseSection(r: WarehouseResult): Section {
  return {
    markdown: [
      "## Warehouse: write rate, export rate and memory",
      "",
      "Consumer batches of 10k records into Parquet; then a streamed export of every row through",
      "`POST /api/v1/exports`, the server a process of its own (`bench/warehouse.bench.ts`).",
      "",
      table(
        ["consumer records", "records/s", "files", "bytes/record", "target records/s"],
        [
          [
            r.consumer.records,
            r.consumer.recordsPerSecond,
            r.consumer.files,
            r.consumer.bytesPerRecord,
            r.targets.consumerRecordsPerSecond,
          ],
        ],
      ),
      "",
      table(
        ["export", "rows", "rows/s", "MB", "idle RSS MB", "peak RSS MB"],
        r.exports.map((e) => [e.format, e.rows, e.rowsPerSecond, e.megabytes, e.idleRssMb, e.peakRssMb]),
      ),
      "",
      `Targets: ≥ ${fmt(r.targets.exportRowsPerSecond)} rows/s and < ${fmt(r.targets.exportPeakRssMb)} MB peak RSS.`,
      "",
      image("warehouse-export.png", "export rate and peak memory"),
    ].join("\n"),
    charts: [
      {
        file: join(RESULTS, "warehouse-export.png"),
        config: barChart({
          title: "Export of every row: peak server RSS (MB) against the 300 MB target",
          labels: r.exports.map((e) => `${e.format} (${fmt(e.rowsPerSecond)} rows/s)`),
          yLabel: "MB",
          series: [
            { label: "idle RSS", data: r.exports.map((e) => e.idleRssMb), color: color(2) },
            { label: "peak RSS", data: r.exports.map((e) => e.peakRssMb), color: color(1) },
          ],
        }),
      },
    ],
  };
}

function bundlesSection(r: BundlesResult): Section {
  return {
    markdown: [
      "## Lambda bundles: size and cold initialisation",
      "",
      `The bundles \`cdk synth\` makes; \`import()\` of each in a fresh Node process, median of ${r.runs} runs (\`bench/bundles.ts\`).`,
      "",
      table(
        [
          "function",
          "bundle KB",
          "gzip KB",
          "init p50 ms",
          "init without source maps ms",
          "process ready p50 ms",
        ],
        r.results.map((b) => [
          b.function,
          b.bundleBytes / 1024,
          b.gzipBytes / 1024,
          b.init.p50,
          b.initWithoutSourceMaps.p50,
          b.processReady.p50,
        ]),
      ),
      "",
      image("bundles.png", "bundle size and cold init"),
    ].join("\n"),
    charts: [
      {
        file: join(RESULTS, "bundles.png"),
        config: barChart({
          title: "Lambda bundles: gzip size (KB) and cold import (ms)",
          labels: r.results.map((b) => b.function),
          yLabel: "KB / ms",
          series: [
            { label: "gzip KB", data: r.results.map((b) => b.gzipBytes / 1024), color: color(0) },
            { label: "init p50 ms", data: r.results.map((b) => b.init.p50), color: color(3) },
          ],
        }),
      },
    ],
  };
}

function deletionSection(r: DeletionResult): Section {
  return {
    markdown: [
      "## Deletion",
      "",
      `A warehouse of ${fmt(r.warehouse.rows)} rows in ${r.warehouse.files} files; the local workflow deletes a user's rows (\`bench/deletion.bench.ts\`).`,
      "",
      table(
        [
          "scenario",
          "rows deleted",
          "files rewritten",
          "files deleted",
          "seconds",
          "rows deleted/s",
          "peak RSS MB",
        ],
        r.runs.map((d) => [
          d.scenario,
          d.rowsDeleted,
          d.filesRewritten,
          d.filesDeleted,
          d.totalSeconds,
          d.rowsDeletedPerSecondTotal,
          d.peakRssMb,
        ]),
      ),
    ].join("\n"),
    charts: [],
  };
}

function dashboardSection(r: DashboardResult): Section {
  return {
    markdown: [
      "## Dashboard API",
      "",
      `Interactions and usage listings over ${fmt(r.interactions)} interactions in one project; the index was written at ${fmt(r.write.perSecond)} interactions/s (\`bench/dashboard.bench.ts\`).`,
      "",
      table(
        ["listing", "requests", "p50 ms", "p95 ms", "p99 ms", "rows"],
        r.results.map((d) => [d.name, d.requests, d.p50Ms, d.p95Ms, d.p99Ms, d.meanRows]),
      ),
    ].join("\n"),
    charts: [],
  };
}

function reconcileSection(r: ReconcileResult): Section {
  const f = r.figures;
  const n = (k: string) => f[k] as number;
  return {
    markdown: [
      "## Reconciliation under load",
      "",
      `${fmt(r.calls)} calls, ${r.concurrency} at a time, through the official SDKs (all four vendors, streams and not,`,
      "managed / BYOK / dual keys, X-Request-ID retries, vendor 5xx the SDKs retry), then counted",
      "(`bench/reconcile.ts`; `test/reliability/reconcile.test.ts` runs the same small in CI).",
      "",
      table(
        ["figure", "value"],
        [
          ["responses answered (retries and replays included)", n("answered")],
          ["warehouse records / distinct ids", `${fmt(n("records"))} / ${fmt(n("distinctRecordIds"))}`],
          ["replayed (X-Request-ID) / refused by us", `${fmt(n("replayed"))} / ${fmt(n("refusedByUs"))}`],
          [
            "vendor calls by the records / seen by the vendor",
            `${fmt(n("vendorCalls"))} / ${fmt(n("vendorRequests"))}`,
          ],
          [
            "managed records / holds / settlements + releases",
            `${fmt(n("managedRecords"))} / ${fmt(n("holds"))} / ${fmt(n("settles"))} + ${fmt(n("releases"))}`,
          ],
          ["open holds after the run", n("openHolds")],
          ["records' cost / charged (µUSD)", `${fmt(n("recordCostMicros"))} / ${fmt(n("chargedMicros"))}`],
          [
            "balance / grant − records' cost (µUSD)",
            `${fmt(n("managedBalanceMicros"))} / ${fmt(n("expectedManagedBalanceMicros"))}`,
          ],
          ["SDK calls that failed", r.failedCalls],
        ],
      ),
      "",
      r.violations.length === 0
        ? "**Every invariant holds.**"
        : `**Violations:**\n${r.violations.map((v) => `- ${v}`).join("\n")}`,
    ].join("\n"),
    charts: [],
  };
}

function soakSection(r: SoakResult): Section {
  return {
    markdown: [
      "## Soak",
      "",
      `${r.ratePerSecond} streaming calls a second for ${r.seconds} s against \`dmt serve\` (metering and warehouse on), the four`,
      `vendors' streams in turn, ${r.chunkDelayMs} ms between simulated chunks (\`bench/soak.ts\`).`,
      "",
      image("soak.png", "soak: latency and RSS per interval"),
      "",
      table(
        ["figure", "value"],
        [
          ["calls sent / completed / failed", `${fmt(r.sent)} / ${fmt(r.completed)} / ${fmt(r.failed)}`],
          ["warehouse records after the stop", r.records],
          ["p99 early / late (ms)", `${fmt(r.flatness.p99EarlyMs)} / ${fmt(r.flatness.p99LateMs)}`],
          ["server RSS early / late (MB)", `${fmt(r.flatness.rssEarlyMb)} / ${fmt(r.flatness.rssLateMb)}`],
          [
            "RSS slope (MB/min) / p99 slope (ms/min)",
            `${fmt(r.flatness.rssSlopeMbPerMinute)} / ${fmt(r.flatness.p99SlopeMsPerMinute)}`,
          ],
          ...Object.entries(r.verdict).map(([k, v]): Cell[] => [k, v]),
        ],
      ),
    ].join("\n"),
    charts: [],
  };
}

const RENDERERS: Record<string, (result: never) => Section> = {
  proxy: proxySection,
  metering: meteringSection,
  status: statusSection,
  warehouse: warehouseSection,
  bundles: bundlesSection,
  deletion: deletionSection,
  dashboard: dashboardSection,
  reconcile: reconcileSection,
  soak: soakSection,
};

/** A result no renderer knows (a new benchmark): its top-level figures as they are. */
function genericSection(name: string, result: unknown, why?: string): Section {
  const text = JSON.stringify(result, null, 2);
  return {
    markdown: [
      `## ${name}`,
      "",
      ...(why ? [`(Not laid out as a table: ${why}.)`, ""] : []),
      "```json",
      text.length > 4000 ? `${text.slice(0, 4000)}\n...` : text,
      "```",
    ].join("\n"),
    charts: [],
  };
}

function machineLine(m: Machine | undefined): string {
  if (!m) return "unknown";
  return `${m.cpus} × ${m.cpu ?? "CPU"}, ${m.memoryGb} GB, Node ${m.node}, load average ${m.loadavg.join(" / ")}`;
}

export async function writeReport(): Promise<void> {
  const run = read<RunLog>("run");
  const names = readdirSync(RESULTS)
    .filter((f) => f.endsWith(".json") && f !== "run.json")
    .map((f) => f.slice(0, -5));
  const order = Object.keys(RENDERERS);
  names.sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99) || a.localeCompare(b));
  const sections: Section[] = names.map((name) => {
    const result = read<unknown>(name);
    const render = RENDERERS[name];
    let section: Section;
    try {
      section = render ? render(result as never) : genericSection(name, result);
    } catch (err) {
      section = genericSection(name, result, (err as Error).message);
    }
    // When its results were written: a benchmark that failed in this run leaves an older file.
    const written = statSync(join(RESULTS, `${name}.json`)).mtime.toISOString();
    return {
      ...section,
      markdown: section.markdown.replace(/^(## .*)$/m, `$1\n\n_Results written ${written}._`),
    };
  });

  const header = [
    "# Benchmark report",
    "",
    run
      ? `Generated by \`npm run bench\` (\`bench/run.ts\`), ${run.started} to ${run.finished}.`
      : "Generated by `npx tsx bench/report.ts` from the results in `bench/results/`.",
    "",
    `- Machine at the start: ${machineLine(run?.machineAtStart)}`,
    `- Machine at the end: ${machineLine(run?.machineAtEnd)}`,
    "",
    "**Read the figures with care.** The machine is shared by several engineers working at the same time,",
    "so its load (the load average above, on 2 cores) changes from minute to minute and every figure carries",
    "that noise; benchmarks that compare targets run them in the same run, side by side or in turns, so",
    "their ratios are fairer than their absolute values. Everything runs on loopback against the built-in",
    "vendor simulator: no network, no real vendor.",
    "",
    ...(run
      ? [
          "## The run",
          "",
          table(
            ["benchmark", "file", "exit code", "seconds", "finished"],
            run.benchmarks.map((b) => [b.name, `\`bench/${b.file}\``, b.exitCode, b.seconds, b.finished]),
          ),
          "",
          "A non-zero exit code means the benchmark failed or reported errors (see its output); a section whose",
          "results were written before its benchmark finished in this run shows the figures of an earlier run.",
          "",
        ]
      : []),
  ];
  writeFileSync(join(BENCH, "REPORT.md"), `${[...header, ...sections.map((s) => s.markdown)].join("\n")}\n`);
  await renderCharts(sections.flatMap((s) => s.charts));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await writeReport();
