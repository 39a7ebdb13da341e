/**
 * A 1-million-row export through the data API's Lambda handler as Lambda runs it: the streaming
 * runtime's response stream, API Gateway's REST event, Athena and DynamoDB stand-ins (Athena paged
 * 1000 rows at a time, rows made as each page is asked for). Rows a second, time to the first byte and
 * peak RSS, beside the local server's figures (bench/results/warehouse.json). One run.
 * Usage: npx tsx bench/lambda-export.ts [rows] [csv|json]
 * The process holds the stand-ins too, so its peak RSS counts one Athena page on both sides.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import type { APIGatewayProxyEvent, Context } from "aws-lambda";
import { createDynamoClient, ensureTables } from "../lambda/adapters/dynamodb/client";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { TIER_LIMITS } from "../lambda/core/model";
import { RECORD_COLUMNS } from "../lambda/core/record";
import { grantedContext } from "../lambda/handlers/runtime/authorizer-context";
import { startEmbeddedDynamo } from "../lambda/local/embedded-dynamo";
import { syntheticRecord } from "./warehouse-records";

const ROWS = Number(process.argv[2] ?? 1_000_000);
const FORMAT = (process.argv[3] ?? "csv") as "csv" | "json";

function athenaCells(i: number) {
  const record = syntheticRecord(i, { projectId: "bench", stepMs: 50 });
  return {
    Data: RECORD_COLUMNS.map((c) => {
      const value = record[c.name];
      if (value === null) return {};
      if (c.kind === "timestamp") {
        return { VarCharValue: new Date(value as number).toISOString().replace("T", " ").replace("Z", "") };
      }
      return { VarCharValue: String(value) };
    }),
  };
}

const athena = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const action = String(req.headers["x-amz-target"]).replace("AmazonAthena.", "");
    const body = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
    let reply: unknown = {};
    if (action === "StartQueryExecution") reply = { QueryExecutionId: "q-1" };
    else if (action === "GetQueryExecution") {
      reply = { QueryExecution: { QueryExecutionId: "q-1", Status: { State: "SUCCEEDED" } } };
    } else if (action === "GetQueryResults") {
      // Row 0 is the header; row n is record n - 1.
      const from = Number(body.NextToken ?? 0);
      const to = Math.min(from + Number(body.MaxResults ?? 1000), ROWS + 1);
      const rows = [];
      for (let n = from; n < to; n++) {
        rows.push(
          n === 0 ? { Data: RECORD_COLUMNS.map((c) => ({ VarCharValue: c.name })) } : athenaCells(n - 1),
        );
      }
      reply = { ResultSet: { Rows: rows }, ...(to < ROWS + 1 && { NextToken: String(to) }) };
    }
    res.writeHead(200, { "content-type": "application/x-amz-json-1.1" });
    res.end(JSON.stringify(reply));
  });
});
await new Promise<void>((resolve) => athena.listen(0, "127.0.0.1", resolve));
const dir = mkdtempSync(join(tmpdir(), "dmt-lambda-export-"));
const dynamo = await startEmbeddedDynamo(join(dir, "dynamo"));
const tables = tableNames({}, "bench-");
await ensureTables(createDynamoClient({ endpoint: dynamo.endpoint }), tables);
Object.assign(process.env, {
  AWS_REGION: "eu-west-1",
  AWS_ACCESS_KEY_ID: "bench",
  AWS_SECRET_ACCESS_KEY: "bench",
  DMT_LOG_LEVEL: "silent",
  DMT_ATHENA_ENDPOINT: `http://127.0.0.1:${(athena.address() as AddressInfo).port}`,
  DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
  DMT_S3_ENDPOINT: "http://127.0.0.1:9",
  ...Object.fromEntries(
    Object.entries(tables).map(([name, table]) => [`DMT_TABLE_${name.toUpperCase()}`, table]),
  ),
  DMT_ATHENA_WORKGROUP: "bench",
  DMT_WAREHOUSE_DATABASE: "dmt_warehouse",
  DMT_WAREHOUSE_TABLE: "interactions",
});
// The Node.js runtime's `awslambda` global: the handler's metadata goes first, then the body.
(globalThis as unknown as { awslambda: unknown }).awslambda = {
  streamifyResponse: <T>(handler: T): T => handler,
  HttpResponseStream: { from: (stream: Writable) => stream },
};
const { handler } = await import("../lambda/handlers/api");

const context = grantedContext({
  projectId: "bench",
  keyId: "benchkey00000000",
  tier: "enterprise",
  rateLimit: TIER_LIMITS.pro,
  store: "full",
});
const event = {
  resource: "/api/v1/{proxy+}",
  path: "/api/v1/exports",
  httpMethod: "POST",
  headers: { Host: "abc.execute-api.eu-west-1.amazonaws.com", "Content-Type": "application/json" },
  multiValueHeaders: {
    Host: ["abc.execute-api.eu-west-1.amazonaws.com"],
    "Content-Type": ["application/json"],
  },
  queryStringParameters: null,
  multiValueQueryStringParameters: null,
  pathParameters: { proxy: "exports" },
  stageVariables: null,
  body: JSON.stringify({ format: FORMAT, range: { start: "2026-01-15", end: "2026-01-15" } }),
  isBase64Encoded: false,
  requestContext: {
    stage: "prod",
    path: "/prod/api/v1/exports",
    authorizer: {
      ...Object.fromEntries(Object.entries(context).map(([k, v]) => [k, String(v)])),
      principalId: "benchkey00000000",
    },
  },
} as unknown as APIGatewayProxyEvent;

let bytes = 0;
let firstByteMs: number | undefined;
let peakRss = process.memoryUsage().rss;
const idleRss = peakRss;
const sampler = setInterval(() => {
  peakRss = Math.max(peakRss, process.memoryUsage().rss);
}, 50);
const start = performance.now();
const stream = new Writable({
  write(chunk: Buffer, _encoding, callback) {
    firstByteMs ??= performance.now() - start;
    bytes += chunk.length;
    callback();
  },
});
const deadline = Date.now() + 15 * 60_000;
await (handler as unknown as (e: unknown, s: Writable, c: Context) => Promise<void>)(event, stream, {
  awsRequestId: "bench",
  getRemainingTimeInMillis: () => deadline - Date.now(),
} as Context);
const seconds = (performance.now() - start) / 1000;
clearInterval(sampler);

const local = JSON.parse(readFileSync("bench/results/warehouse.json", "utf8")) as {
  exports: { format: string; rowsPerSecond: number; peakRssMb: number; seconds: number }[];
};
const localRun = local.exports.find((e) => e.format === FORMAT);
const result = {
  date: new Date().toISOString(),
  machine: { loadAverage1mAtStart: loadavg()[0], node: process.version },
  lambda: {
    format: FORMAT,
    rows: ROWS,
    seconds,
    rowsPerSecond: ROWS / seconds,
    megabytes: bytes / 1e6,
    timeToFirstByteMs: firstByteMs,
    idleRssMb: idleRss / 2 ** 20,
    peakRssMb: peakRss / 2 ** 20,
  },
  local: localRun && { source: "bench/results/warehouse.json", ...localRun },
};
writeFileSync(`bench/results/lambda-export-${FORMAT}.json`, `${JSON.stringify(result, null, 2)}\n`);
console.log(`| host | rows | rows/s | peak RSS MB | first byte ms | MB |`);
console.log(`| --- | --- | --- | --- | --- | --- |`);
console.log(
  `| Lambda handler (stand-ins) | ${ROWS} | ${Math.round(ROWS / seconds)} | ${Math.round(peakRss / 2 ** 20)} | ${Math.round(firstByteMs ?? 0)} | ${Math.round(bytes / 1e6)} |`,
);
if (localRun) {
  console.log(
    `| local server | 1000000 | ${Math.round(localRun.rowsPerSecond)} | ${Math.round(localRun.peakRssMb)} | - | - |`,
  );
}
athena.close();
await dynamo.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
