/**
 * The proxy's own CPU per call, as the Lambda handler runs it: what sets the proxy functions' memory
 * on standard compute (Lambda gives CPU in proportion to memory) and the calls per environment on
 * managed instances (lib/proxy.ts, lib/proxy-compute.ts; docs/aws.md).
 *
 *   npx tsx bench/proxy-cpu.ts [--calls 2000] [--concurrency 64] [--json bench/results/proxy-cpu.json]
 *
 * The streaming handler (`createProxyHandler`) with the record's and the metrics' hooks serves chat
 * calls, half streamed, half whole, from the vendor simulator in a child process, so that this thread's
 * CPU time (`process.threadCpuUsage`) is the handler's alone: routing, the body's checks, the relay and
 * its usage parsing, the captured bodies, the record. Not counted: TLS to the vendor (the simulator
 * speaks HTTP) and the AWS SDK's signing and sending of the store's, the queue's and the bus's requests
 * (a handful per call, cached clients): both are added as an allowance in docs/aws.md.
 */
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import type { Context } from "aws-lambda";
import { callMetrics, vendorApps, warehouseHooks } from "../lambda/compose/proxy";
import { combineHooks, PendingWork } from "../lambda/core/call";
import { silentLogger } from "../lambda/core/logger";
import { grantedContext } from "../lambda/handlers/runtime/authorizer-context";
import { parseProxyConfig } from "../lambda/handlers/runtime/config";
import { createProxyHandler } from "../lambda/handlers/runtime/proxy-stream";
import {
  CollectedResponse,
  gatewayProxyEvent,
  installStreamingRuntime,
  type StreamingHandler,
  startSecretsEndpoint,
} from "../test/infra/lambda-runtime";

/** Node 23.9+: the CPU time of this thread alone (@types/node here predates it). */
const threadCpuUsage = (previous?: NodeJS.CpuUsage): NodeJS.CpuUsage =>
  (process as unknown as { threadCpuUsage(previous?: NodeJS.CpuUsage): NodeJS.CpuUsage }).threadCpuUsage(
    previous,
  );

const { values } = parseArgs({
  options: {
    calls: { type: "string", default: "2000" },
    concurrency: { type: "string", default: "64" },
    json: { type: "string" },
  },
});
const CALLS = Number(values.calls);
const CONCURRENCY = Number(values.concurrency);

/** The simulator in a child process: its CPU is not this thread's. */
async function startSimulatorProcess(): Promise<{ origin: string; stop: () => void }> {
  const code = `import("./lambda/local/simulator/index.ts").then(async (m) => {
    const s = await m.startSimulator({ port: 0 });
    process.stdout.write(JSON.stringify(s.origins) + "\\n");
  });`;
  const child = spawn(process.execPath, ["--import", "tsx", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((resolve) => {
    let buffered = "";
    child.stdout.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      if (buffered.includes("\n")) resolve(buffered.split("\n")[0] ?? "");
    });
  });
  return { origin: (JSON.parse(line) as { openai: string }).openai, stop: () => child.kill() };
}

const KEY_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:VendorKeyOpenai-bench";
const simulator = await startSimulatorProcess();
const secrets = await startSecretsEndpoint();
secrets.secrets.set(KEY_ARN, { AWSCURRENT: "sk-bench" });
installStreamingRuntime();

const pending = new PendingWork();
const records = { sent: 0 };
const hooks = combineHooks(
  [
    warehouseHooks(
      {
        send: async () => {
          records.sent++;
        },
        close: async () => {},
      },
      { keyed: async (_project, user) => `hmac:${user}` },
    ),
    callMetrics({ add: () => {} }),
  ],
  silentLogger,
);
const handler = createProxyHandler({
  config: parseProxyConfig({
    DMT_VENDORS: "openai",
    DMT_VENDOR_KEY_SECRET_ARN_OPENAI: KEY_ARN,
    DMT_SECRETS_ENDPOINT: secrets.url,
    DMT_UPSTREAM_URL_OPENAI: simulator.origin,
    DMT_LOG_LEVEL: "silent",
  }),
  logger: silentLogger,
  proxy: { pending, app: vendorApps({ hooks, pending, logger: silentLogger }) },
}) as unknown as StreamingHandler;

const identity = grantedContext({
  projectId: "bench",
  keyId: "a".repeat(16),
  tier: "pro",
  rateLimit: { rpm: 1_000_000, burst: 1_000_000 },
  store: "full",
});
const event = (index: number) =>
  gatewayProxyEvent(
    {
      method: "POST",
      path: "/openai/v1/chat/completions",
      headers: {
        authorization: `Bearer dmt_${"a".repeat(16)}_${"B".repeat(43)}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: `Say hello, call ${index}` }],
        stream: index % 2 === 0,
      }),
    },
    identity,
  );

async function run(calls: number): Promise<{ cpuMicros: number; wallMs: number; failed: number }> {
  let next = 0;
  let failed = 0;
  const cpu = threadCpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < calls) {
        const index = next++;
        const stream = new CollectedResponse();
        await handler(event(index), stream, { awsRequestId: `bench-${index}` } as Context);
        if (stream.prelude?.statusCode !== 200) failed++;
      }
    }),
  );
  const used = threadCpuUsage(cpu);
  return { cpuMicros: used.user + used.system, wallMs: performance.now() - start, failed };
}

await run(Math.min(500, CALLS)); // warm-up: JIT, connections, the secret's first read
const rounds = [];
for (let round = 0; round < 3; round++) rounds.push(await run(CALLS));
simulator.stop();
await secrets.close();

const perCall = rounds.map((r) => r.cpuMicros / CALLS).sort((a, b) => a - b);
const median = perCall[1] ?? 0;
const result = {
  calls: CALLS,
  concurrency: CONCURRENCY,
  cpuMicrosPerCall: { median: Math.round(median), rounds: perCall.map(Math.round) },
  failed: rounds.reduce((sum, r) => sum + r.failed, 0),
  records: records.sent,
  machine: { node: process.version, cpus: cpus().length, model: cpus()[0]?.model, loadavg: loadavg() },
};
console.log(
  `proxy handler CPU per call (median of 3 rounds of ${CALLS} at c=${CONCURRENCY}): ${(median / 1000).toFixed(2)} ms`,
);
console.log(
  `rounds: ${perCall.map((m) => (m / 1000).toFixed(2)).join(", ")} ms; failed ${result.failed}; load ${loadavg()[0]?.toFixed(2)}`,
);
if (values.json) writeFileSync(values.json, `${JSON.stringify(result, null, 2)}\n`);
