import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import fc from "fast-check";
import { importJWK, type JWK, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { SECURITY_HEADERS } from "../../lambda/app/security-headers";
import { createKey, createProject } from "../../lambda/core/accounts";
import { jsonLogger } from "../../lambda/core/logger";
import { VENDOR_NAMES } from "../../lambda/core/vendor-model";
import { parseLocalConfig } from "../../lambda/local/config";
import { type EmbeddedHost, startEmbeddedHost } from "../../lambda/local/host";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, testVendorKey } from "../support/host";
import { filesHoldingSecrets } from "../support/reliability";
import {
  describeRequest,
  type FuzzCredentials,
  type FuzzRequest,
  fuzzRequest,
  type RawAnswer,
  sendRaw,
} from "../support/reliability-fuzz";

/**
 * Bad input over every route of every app (the four proxies, the data API, the dashboard API and its
 * identity provider): random methods, paths, query strings, headers and bodies. Invariants: no 5xx of
 * ours (a vendor's passes through, marked by the simulator's header), our error shape on our errors,
 * the server alive, no secret in a record, a journal or a log line, and memory back where it was.
 * FUZZ_RUNS sets the number of requests (a few hundred by default; `npm run fuzz` sends 100,000),
 * FUZZ_SEED replays a run (the seed is printed), FUZZ_CONCURRENCY sends several at once. Every
 * request runs: what breaks an invariant is counted and reported at the end, not only the first.
 */
const RUNS = Number(process.env.FUZZ_RUNS ?? 500);
/** Requests in flight at once (`npm run fuzz` uses 8), and how many are generated at a time. */
const CONCURRENCY = Number(process.env.FUZZ_CONCURRENCY ?? 1);
const FUZZ_BATCH = 1000;
/** Room for a long run on a busy machine: the test proves invariants, not speed. */
const RUN_TIMEOUT_MS = 240_000 + RUNS * 200;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
/** Heap growth allowed over a run, after a full collection: what caches (keys, rate limits) may keep. */
const HEAP_GROWTH_BOUND = 64 * 1024 * 1024;
/** RSS growth allowed: the allocator keeps freed pages of large bodies (~150 MB after 4,000 requests). */
const RSS_GROWTH_BOUND = 384 * 1024 * 1024;

let sim: Simulator;
let stack: EmbeddedHost;
let dataDir: string;
let credentials: FuzzCredentials;
const logLines: string[] = [];

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

async function dashboardToken(userId: string): Promise<string> {
  const state = JSON.parse(readFileSync(join(dataDir, "oidc.json"), "utf8")) as { signingKey: JWK };
  const alg = state.signingKey.alg ?? "";
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ client_id: "dmt-dashboard", scope: "dashboard" })
    .setProtectedHeader({ alg, typ: "at+jwt", kid: state.signingKey.kid ?? "" })
    .setSubject(userId)
    .setIssuer(`${stack.url}/oidc`)
    .setAudience(`${stack.url}/dashboard/api`)
    .setIssuedAt(now - 5)
    .setExpirationTime(now + 3600)
    .sign(await importJWK(state.signingKey, alg));
}

beforeAll(async () => {
  // Not recording requests: their bodies would be memory this test holds, not the server.
  sim = await startSimulator({ record: false });
  dataDir = mkdtempSync(join(tmpdir(), "dmt-fuzz-"));
  const config = parseLocalConfig({
    ...simulatorEnv(sim.origins),
    PORT: "0",
    DMT_ACCESS_LOG: "off",
    DMT_DATA_DIR: dataDir,
    DMT_METERING: "on",
    DMT_WAREHOUSE_FLUSH_MS: "100",
    DMT_KEY_CACHE_MS: "60000",
    // Small enough that a fuzzed stream the simulator never ends cannot hold a run up.
    DMT_UPSTREAM_IDLE_TIMEOUT_MS: "5000",
  });
  stack = await startEmbeddedHost(
    config,
    jsonLogger("debug", (line) => logLines.push(line)),
  );
  const credits = new DynamoCredits(stack.db, tableNames(process.env));
  const keyOf = async (projectId: string) => {
    await createProject(stack.store, projectId, "enterprise", Date.now());
    return (await createKey(stack.store, { projectId, name: "fuzz" }, Date.now())).key;
  };
  const paid = await keyOf("fuzz-paid");
  await credits.grant("fuzz-paid", 100_000_000, "test");
  const token = await dashboardToken("fuzz-user");
  const me = await fetch(`${stack.url}/dashboard/api/me`, { headers: { authorization: `Bearer ${token}` } });
  const projects = ((await me.json()) as { projects: { projectId: string }[] }).projects;
  credentials = {
    paid,
    broke: await keyOf("fuzz-broke"),
    dashboardToken: token,
    dashboardProject: projects[0]?.projectId ?? "none",
    dualVendorKey: "sk-fuzz-dual-0123456789abcdef",
  };
});
afterAll(async () => {
  await stack?.close();
  await sim?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Why an answer breaks an invariant, or undefined when it keeps them all. */
function violation(request: FuzzRequest, answer: RawAnswer): string | undefined {
  // A vendor's own answer (the simulator marks every one) passes through as the vendor sent it.
  if (answer.headers["x-dmt-simulated"] === "true") return undefined;
  if (answer.status >= 500) return `our ${answer.status}: ${answer.body.toString().slice(0, 300)}`;
  const path = request.target.split("?")[0] ?? "";
  // The identity provider is a library with its own error format (OAuth's).
  if (answer.status < 400 || path.startsWith("/oidc") || request.method === "HEAD") return undefined;
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) {
    if (answer.headers[name.toLowerCase()] !== value) return `${answer.status} without ${name}`;
  }
  let body: unknown;
  try {
    body = JSON.parse(answer.body.toString("utf8"));
  } catch {
    return `${answer.status} with a body that is not JSON: ${answer.body.toString().slice(0, 200)}`;
  }
  const error = (body as { error?: Record<string, unknown> } | null)?.error;
  const keys = Object.keys((body ?? {}) as object);
  if (
    keys.length !== 1 ||
    !error ||
    Object.keys(error).sort().join() !== "code,message,type" ||
    Object.values(error).some((v) => typeof v !== "string" || v === "")
  ) {
    return `${answer.status} not in our error shape: ${answer.body.toString().slice(0, 200)}`;
  }
  return undefined;
}

describe("bad-input fuzzer", () => {
  it(
    `keeps every invariant over ${RUNS} random requests`,
    async () => {
      const port = Number(new URL(stack.url).port);
      const statuses = new Map<number, number>();
      let vendorAnswers = 0;
      let our5xx = 0;
      const problems: string[] = [];
      const run = (request: FuzzRequest) =>
        sendRaw(port, request).then((answer) => {
          statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
          if (answer.headers["x-dmt-simulated"] === "true") vendorAnswers++;
          return answer;
        });
      const check = async (request: FuzzRequest) => {
        const answer = await run(request);
        if (answer.status >= 500 && answer.headers["x-dmt-simulated"] !== "true") our5xx++;
        const problem = violation(request, answer);
        if (problem) problems.push(`${describeRequest(request)}: ${problem}`);
      };
      /**
       * `runs` generated requests, CONCURRENCY at a time. They are drawn in batches (seeded from SEED,
       * so a run replays) to keep memory flat; in flight together, the vendor waits of some overlap.
       */
      const fuzz = async (runs: number, seed: number) => {
        for (let done = 0, batch = 0; done < runs; batch++) {
          const size = Math.min(FUZZ_BATCH, runs - done);
          const requests = fc.sample(fuzzRequest(credentials), { numRuns: size, seed: seed + batch });
          let next = 0;
          const worker = async () => {
            for (let i = next++; i < requests.length; i = next++) await check(requests[i] as FuzzRequest);
          };
          await Promise.all(Array.from({ length: CONCURRENCY }, worker));
          done += size;
          if (runs > FUZZ_BATCH) {
            process.stdout.write(
              `fuzz: ${done}/${runs}, ${our5xx} 5xx of ours, ${problems.length} violations\n`,
            );
          }
        }
      };
      const seed = SEED ?? Date.now() % 2 ** 31;
      // A first round warms caches and pools, so the memory comparison is of steady states.
      await fuzz(50, seed + 1_000_000);
      await stack.drain();
      gc();
      const heapBefore = process.memoryUsage().heapUsed;
      const rssBefore = process.memoryUsage().rss;

      const started = performance.now();
      await fuzz(RUNS, seed);
      const seconds = (performance.now() - started) / 1000;

      // Still serving.
      const status = await fetch(`${stack.url}/api/v1/status`, {
        headers: { authorization: `Bearer ${credentials.paid}` },
      });
      expect(status.status).toBe(200);
      await stack.drain();
      gc();
      const heapGrowth = process.memoryUsage().heapUsed - heapBefore;
      const rssGrowth = process.memoryUsage().rss - rssBefore;
      process.stdout.write(
        `fuzz (seed ${seed}, ${CONCURRENCY} at a time): ${RUNS} requests in ${seconds.toFixed(0)} s, ` +
          `${our5xx} 5xx of ours, ` +
          `${problems.length} invariant violations, ${vendorAnswers} answered by the vendor; ` +
          `statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}; ` +
          `heap ${(heapGrowth / 2 ** 20).toFixed(1)} MB, RSS ${(rssGrowth / 2 ** 20).toFixed(1)} MB after\n`,
      );
      expect(problems.slice(0, 20)).toEqual([]);
      expect(our5xx).toBe(0);
      expect(heapGrowth).toBeLessThan(HEAP_GROWTH_BOUND);
      expect(rssGrowth).toBeLessThan(RSS_GROWTH_BOUND);
      // The fuzz reached past authentication and into the vendors, not only refusals.
      expect(statuses.get(200)).toBeGreaterThan(0);
      expect(vendorAnswers).toBeGreaterThan(0);

      // No secret in what was stored or logged.
      const secrets = [
        credentials.paid,
        credentials.broke,
        credentials.paid.split("_")[2] ?? credentials.paid,
        credentials.dualVendorKey,
        credentials.dashboardToken,
        ...VENDOR_NAMES.map((v) => testVendorKey(v)),
      ];
      for (const folder of ["warehouse", "warehouse-queue"]) {
        expect(filesHoldingSecrets(join(dataDir, folder), secrets)).toEqual([]);
      }
      const logs = logLines.join("\n");
      for (const secret of secrets) expect(logs.includes(secret)).toBe(false);
    },
    RUN_TIMEOUT_MS,
  );
});
