/**
 * The dashboard's Interactions and Usage API with 100 000 interactions in one project: latency of a
 * page view (p50/p95/p99) for each kind of listing, and how fast the consumer's index write goes.
 * Run: `npx tsx bench/dashboard.bench.ts` (see bench/README.md). Never part of the tests.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { importJWK, type JWK, SignJWT } from "jose";
import { DynamoInteractionIndex } from "../lambda/adapters/dynamodb/interactions";
import type { BillingMode } from "../lambda/core/billing-mode";
import { buildRecord, type InteractionRecord } from "../lambda/core/record";
import { VENDOR_NAMES, type VendorName } from "../lambda/core/vendor-names";
import { openLocalStore } from "../lambda/local/store";
import { startDmtServe } from "../test/support/cli";
import { formatTable } from "./lib/table";

const INTERACTIONS = Number(process.env.BENCH_INTERACTIONS ?? 100_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const WARMUP = 20;
const WRITE_BATCH = 500;
const DAYS = 30;
const USERS = 1000;
const MODELS: Record<string, string[]> = {
  groq: ["llama-3.3-70b-versatile", "llama-3.1-8b-instant"],
  openai: ["gpt-4o-mini", "gpt-4o", "text-embedding-3-small"],
  anthropic: ["claude-haiku-4-5", "claude-sonnet-4-5"],
  gemini: ["gemini-2.5-flash"],
};
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

/** A deterministic spread: vendors and models, 1 000 users, 5% failures, a fifth not on credits. */
function interaction(i: number, projectId: string, now: number): InteractionRecord {
  const vendor = VENDOR_NAMES[i % VENDOR_NAMES.length] as VendorName;
  const models = MODELS[vendor] as string[];
  const model = models[Math.floor(i / 4) % models.length] as string;
  const failed = i % 20 === 7;
  const status = failed ? (i % 40 === 7 ? 500 : 429) : 200;
  const billing: BillingMode = i % 10 < 8 ? "managed" : i % 10 === 8 ? "byok" : "dual";
  const prompt = `Question ${i}: summarise the quarterly report for the sales team in three bullet points.`;
  return buildRecord({
    store: "full",
    transactionId: `bench-${i.toString(36).padStart(6, "0")}`,
    projectId,
    keyId: "benchkey00000000",
    vendor,
    endpoint: "/v1/chat/completions",
    model,
    billingMode: billing,
    statusCode: status,
    ...(failed ? { error: { type: "vendor_error", code: String(status) } } : {}),
    streamed: i % 3 === 0,
    // Newest last, spread over the last DAYS days.
    startedAt: now - Math.floor(((INTERACTIONS - i) / INTERACTIONS) * DAYS * 86_400_000),
    latencyMs: 200 + (i % 900),
    usage: {
      inputTokens: 40 + (i % 500),
      outputTokens: failed ? 0 : 80 + (i % 700),
      cachedInputTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      estimated: false,
      complete: true,
    },
    costMicros: failed ? 0 : 30 + (i % 400),
    userIdHeader: `user-${i % USERS}`,
    request: {
      bytes: 160,
      text: JSON.stringify({ model, messages: [{ role: "user", content: prompt }] }),
      truncated: false,
    },
    response: {
      bytes: 400,
      text: JSON.stringify({
        choices: [
          { message: { role: "assistant", content: `- point one\n- point two\n- point three (${i})` } },
        ],
      }),
      truncated: false,
    },
  });
}

interface Shape {
  name: string;
  path: (state: { cursor?: string }) => string;
  /** Follows the cursor each page hands out (a user paging back through the list). */
  follow?: boolean;
}

interface ShapeResult {
  name: string;
  requests: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
  meanRows: number;
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;

async function main(): Promise<void> {
  const machine = { node: process.version, cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg() };
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-bench-dashboard-"));
  // The server runs in a child process, so the client's timing does not share its event loop.
  const server = await startDmtServe(dataDir);
  const results: ShapeResult[] = [];
  let write: { interactions: number; seconds: number; perSecond: number };
  try {
    const state = JSON.parse(readFileSync(join(dataDir, "oidc.json"), "utf8")) as { signingKey: JWK };
    const alg = state.signingKey.alg ?? "";
    const key = await importJWK(state.signingKey, alg);
    const now = Math.floor(Date.now() / 1000);
    const token = await new SignJWT({ client_id: "dmt-dashboard", scope: "dashboard" })
      .setProtectedHeader({ alg, typ: "at+jwt", kid: state.signingKey.kid ?? "" })
      .setSubject("bench-user")
      .setIssuer(`${server.url}/oidc`)
      .setAudience(`${server.url}/dashboard/api`)
      .setIssuedAt(now)
      .setExpirationTime(now + 3600)
      .sign(key);
    const call = async (path: string) => {
      const res = await fetch(`${server.url}/dashboard/api${path}`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      const body = (await res.json()) as Record<string, unknown>;
      if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(body)}`);
      return body;
    };
    const me = await call("/me");
    const projectId = (me.projects as { projectId: string }[])[0]?.projectId as string;
    const base = `/projects/${projectId}`;

    // The consumer's listener, as the warehouse calls it, batch by batch.
    const local = await openLocalStore(dataDir);
    const clock = Date.now();
    const started = performance.now();
    try {
      const index = new DynamoInteractionIndex(local.db, local.tables);
      for (let i = 0; i < INTERACTIONS; i += WRITE_BATCH) {
        const batch = Array.from({ length: Math.min(WRITE_BATCH, INTERACTIONS - i) }, (_, j) =>
          interaction(i + j, projectId, clock),
        );
        await index.write(batch);
        if ((i / WRITE_BATCH) % 20 === 0) process.stderr.write(`indexed ${i + batch.length}\n`);
      }
    } finally {
      await local.close();
    }
    const seconds = (performance.now() - started) / 1000;
    write = { interactions: INTERACTIONS, seconds, perSecond: INTERACTIONS / seconds };

    const day = (offset: number) => new Date(clock - offset * 86_400_000).toISOString().slice(0, 10);
    const detailId = interaction(INTERACTIONS - 1, projectId, clock).transaction_id;
    const shapes: Shape[] = [
      { name: "first page, no filter", path: () => `${base}/interactions` },
      {
        name: "next pages, following cursors",
        path: (s) => `${base}/interactions${s.cursor ? `?cursor=${s.cursor}` : ""}`,
        follow: true,
      },
      { name: "vendor=gemini", path: () => `${base}/interactions?vendor=gemini` },
      { name: "user_id (1 of 1000 users)", path: () => `${base}/interactions?user_id=user-42` },
      {
        name: "model + billing_mode=dual",
        path: () => `${base}/interactions?model=gpt-4o&billing_mode=dual`,
      },
      // No interaction matches: each page stops at the scan budget and hands out a cursor.
      {
        name: "model + byok (none match)",
        path: () => `${base}/interactions?model=gpt-4o&billing_mode=byok`,
      },
      { name: "status=error (5%)", path: () => `${base}/interactions?status=error` },
      { name: "status=500 (2.5%)", path: () => `${base}/interactions?status=500` },
      {
        name: "last 7 days + vendor",
        path: () => `${base}/interactions?from=${day(6)}&to=${day(0)}&vendor=openai`,
      },
      { name: "detail (bodies)", path: () => `${base}/interactions/${detailId}` },
      { name: "usage, 30 days", path: () => `${base}/usage` },
      { name: "usage, 90 days", path: () => `${base}/usage?from=${day(89)}&to=${day(0)}` },
    ];

    for (const shape of shapes) {
      const state: { cursor?: string } = {};
      const times: number[] = [];
      let rows = 0;
      for (let n = 0; n < WARMUP + REQUESTS; n++) {
        const t0 = performance.now();
        const body = await call(shape.path(state));
        const elapsed = performance.now() - t0;
        if (shape.follow) {
          if (typeof body.cursor === "string") state.cursor = body.cursor;
          else delete state.cursor;
        }
        if (n < WARMUP) continue;
        times.push(elapsed);
        rows += Array.isArray(body.interactions) ? body.interactions.length : 1;
      }
      times.sort((a, b) => a - b);
      results.push({
        name: shape.name,
        requests: REQUESTS,
        p50Ms: percentile(times, 50),
        p95Ms: percentile(times, 95),
        p99Ms: percentile(times, 99),
        maxMs: times.at(-1) ?? 0,
        meanRows: rows / REQUESTS,
      });
      process.stderr.write(`${shape.name}: p95 ${percentile(times, 95).toFixed(1)} ms\n`);
    }
  } finally {
    await server.stop("SIGINT");
    rmSync(dataDir, { recursive: true, force: true });
  }

  process.stdout.write(
    [
      `Dashboard API on ${server.url} (child process), ${INTERACTIONS.toLocaleString("en-US")} interactions in one project over ${DAYS} days, ${REQUESTS} sequential requests per row after ${WARMUP} warm-up`,
      formatTable(
        ["listing", "p50 ms", "p95 ms", "p99 ms", "max ms", "rows/page"],
        results.map((r) => [r.name, r.p50Ms, r.p95Ms, r.p99Ms, r.maxMs, r.meanRows]),
      ),
      "",
      `Index write (records, entries, rollups) from this process: ${write.interactions.toLocaleString("en-US")} in ${write.seconds.toFixed(1)} s = ${Math.round(write.perSecond)} interactions/s`,
      "",
    ].join("\n"),
  );
  const resultsDir = join(import.meta.dirname, "results");
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, "dashboard.json");
  writeFileSync(
    file,
    `${JSON.stringify({ date: new Date().toISOString(), machine, interactions: INTERACTIONS, requests: REQUESTS, write, results }, null, 2)}\n`,
  );
  process.stdout.write(`Wrote ${file}\n`);
}

await main();
