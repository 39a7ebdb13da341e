/**
 * The warehouse's Lambda handlers as Lambda runs them: configuration from the environment at import,
 * the real AWS SDK clients, and small local stand-ins speaking S3's, SQS's and Athena's wire protocols
 * (DynamoDB is dynalite). The consumer answers SQS events, the spool re-sender empties the spool, and
 * the data API serves exports through Athena and to a project's bucket.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PutItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { APIGatewayProxyEvent, SQSBatchResponse, SQSEvent } from "aws-lambda";
import type { Hono } from "hono";
import { handle } from "hono/aws-lambda";
import { parquetReadObjects } from "hyparquet";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoExportSettings } from "../../lambda/adapters/dynamodb/export-settings";
import { DynamoInteractionIndex } from "../../lambda/adapters/dynamodb/interactions";
import { DynamoDeliveryLedger } from "../../lambda/adapters/dynamodb/ledger";
import { DynamoPrivacySettings } from "../../lambda/adapters/dynamodb/privacy-settings";
import { DynamoStore } from "../../lambda/adapters/dynamodb/store";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoTombstones } from "../../lambda/adapters/dynamodb/tombstones";
import { exportRoutes } from "../../lambda/app/data-api/exports";
import type { AppEnv } from "../../lambda/app/env";
import { mountRoutes } from "../../lambda/app/routing";
import { appShell } from "../../lambda/app/shell";
import { createProject } from "../../lambda/core/accounts";
import type { CompactionReport } from "../../lambda/core/compaction";
import { errors } from "../../lambda/core/errors";
import { DestinationError } from "../../lambda/core/export-destination";
import { STREAMED_EXPORT_MAX_ROWS } from "../../lambda/core/export-estimate";
import { CSV_HEADER } from "../../lambda/core/export-format";
import { silentLogger } from "../../lambda/core/logger";
import { TIER_LIMITS } from "../../lambda/core/model";
import { updatePrivacySettings } from "../../lambda/core/privacy";
import type { InteractionRecord } from "../../lambda/core/record";
import type { RetentionAudit } from "../../lambda/core/retention";
import { grantedContext } from "../../lambda/handlers/runtime/authorizer-context";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { startLocalWarehouse } from "../../lambda/local/warehouse";
import { FakeAthena, FakeS3, FakeSqs, listen } from "../support/aws-stand-ins";
import {
  CollectedResponse,
  installStreamingRuntime,
  invokeRest,
  lambdaContext,
  type StreamedResult,
  type StreamingHandler,
} from "./lambda-runtime";

const WAREHOUSE_BUCKET = "dmt-warehouse-data";
const dir = mkdtempSync(join(tmpdir(), "dmt-warehouse-handlers-"));
const tables = tableNames({}, "wh-handlers-");

const s3 = new FakeS3();
const sqs = new FakeSqs();
const athena = new FakeAthena();
const servers: Server[] = [];
let dynamo: EmbeddedDynamo;
let consumer: (event: SQSEvent) => Promise<SQSBatchResponse>;
let resendSpool: () => Promise<void>;
let compact: (event: unknown) => Promise<CompactionReport>;
let api: (event: APIGatewayProxyEvent) => Promise<StreamedResult>;
let apiStream: StreamingHandler;
let dataApiApp: Hono<AppEnv>;
const savedEnv = { ...process.env };

beforeAll(async () => {
  const [s3Server, sqsServer, athenaServer] = await Promise.all([
    listen(s3.handle),
    listen(sqs.handle),
    listen(athena.handle),
  ]);
  servers.push(s3Server.server, sqsServer.server, athenaServer.server);
  dynamo = await startEmbeddedDynamo(join(dir, "dynamo"));
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  await ensureTables(db, tables);
  db.destroy();

  // The environment the stack gives each function, pointed at the stand-ins; read at import.
  Object.assign(process.env, {
    AWS_REGION: "eu-west-1",
    AWS_ACCESS_KEY_ID: "test",
    AWS_SECRET_ACCESS_KEY: "test",
    DMT_LOG_LEVEL: "silent",
    DMT_S3_ENDPOINT: s3Server.url,
    DMT_SQS_ENDPOINT: sqsServer.url,
    DMT_ATHENA_ENDPOINT: athenaServer.url,
    DMT_DYNAMODB_ENDPOINT: dynamo.endpoint,
    DMT_WAREHOUSE_BUCKET: WAREHOUSE_BUCKET,
    DMT_QUEUE_URL: `${sqsServer.url}/123456789012/records`,
    DMT_DEAD_LETTER_QUEUE_URL: `${sqsServer.url}/123456789012/dead-letters`,
    DMT_TABLE_WAREHOUSEDELIVERIES: tables.warehouseDeliveries,
    DMT_TABLE_PROJECTSETTINGS: tables.projectSettings,
    DMT_TABLE_RATELIMITS: tables.rateLimits,
    DMT_TABLE_DELETIONREQUESTS: tables.deletionRequests,
    DMT_TABLE_DELETIONTOMBSTONES: tables.deletionTombstones,
    DMT_TABLE_INTERACTIONS: tables.interactions,
    DMT_TABLE_USAGEROLLUPS: tables.usageRollups,
    DMT_TABLE_BUDGETS: tables.budgets,
    DMT_TABLE_BUDGETCOUNTERS: tables.budgetCounters,
    // Every table, as the stack sets them (the compaction function's configuration asks for all).
    ...Object.fromEntries(
      Object.entries(tables).map(([name, table]) => [`DMT_TABLE_${name.toUpperCase()}`, table]),
    ),
    DMT_ATHENA_WORKGROUP: "Dmt-warehouse",
    DMT_WAREHOUSE_DATABASE: "dmt_warehouse",
    DMT_WAREHOUSE_TABLE: "interactions",
  });
  consumer = (await import("../../lambda/handlers/consumer")).handler;
  resendSpool = (await import("../../lambda/handlers/spool")).handler;
  // No partition queue configured: one invocation does the whole run, as locally.
  compact = (await import("../../lambda/handlers/compaction")).handler as (
    event: unknown,
  ) => Promise<CompactionReport>;
  installStreamingRuntime();
  const apiHandler = (await import("../../lambda/handlers/api")).handler;
  // Streaming, as API Gateway's streaming Lambda proxy integration invokes it.
  apiStream = apiHandler as unknown as StreamingHandler;
  api = (event) => invokeRest(apiStream, event);
  dataApiApp = (await import("../../lambda/handlers/api")).app;
});

afterAll(async () => {
  process.env = savedEnv;
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  sqs.down = undefined;
  s3.refuse = () => false;
  athena.failAfterPages = undefined;
  athena.pagesRead = 0;
});

let nextMessage = 0;
/** An SQS event as the event source mapping delivers it. */
function sqsEvent(bodies: string[]): SQSEvent {
  return {
    Records: bodies.map((body) => ({
      messageId: `msg-${++nextMessage}`,
      receiptHandle: `rh-${nextMessage}`,
      body,
      attributes: {
        ApproximateReceiveCount: "1",
        SentTimestamp: "0",
        SenderId: "sender",
        ApproximateFirstReceiveTimestamp: "0",
      },
      messageAttributes: {},
      md5OfBody: createHash("md5").update(body).digest("hex"),
      eventSource: "aws:sqs",
      eventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:records",
      awsRegion: "eu-west-1",
    })),
  };
}

/** The transaction ids stored in the Parquet files under a prefix of the warehouse bucket. */
async function storedIds(prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (const key of s3.keys(`${WAREHOUSE_BUCKET}/${prefix}`)) {
    const bytes = s3.objects.get(key) as Buffer;
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const rows = await parquetReadObjects({ file, columns: ["transaction_id"] });
    ids.push(...rows.map((r) => r.transaction_id as string));
  }
  return ids.sort();
}

const records = (projectId: string, count: number) =>
  Array.from({ length: count }, (_, i) => syntheticRecord(i, { projectId }));
const ids = (list: InteractionRecord[]) => list.map((r) => r.transaction_id).sort();

describe("consumer handler", () => {
  it("writes a batch as Parquet per project and day, once, and dead-letters poison records with their error", async () => {
    const a = records("wh-a", 3);
    const b = records("wh-b", 2);
    const event = sqsEvent([
      ...[...a, ...b].map((r) => JSON.stringify(r)),
      JSON.stringify(a[0]),
      "not json {",
      JSON.stringify({ transaction_id: "half a record" }),
    ]);
    expect(await consumer(event)).toEqual({ batchItemFailures: [] });

    expect(s3.keys(`${WAREHOUSE_BUCKET}/interactions/project=wh-a/dt=2026-01-15/`)).toHaveLength(1);
    expect(await storedIds("interactions/project=wh-a/")).toEqual(ids(a));
    expect(await storedIds("interactions/project=wh-b/")).toEqual(ids(b));

    const letters = sqs.on("dead-letters");
    expect(letters.map((l) => l.body)).toEqual([
      "not json {",
      JSON.stringify({ transaction_id: "half a record" }),
    ]);
    expect(letters[0]?.attributes.error?.StringValue).toBe("the message body is not JSON");
    expect(letters[0]?.attributes.source_message_id?.StringValue).toBe(event.Records[6]?.messageId);
    expect(letters[1]?.attributes.error?.StringValue).toMatch(/.+/);

    const ledger = new DynamoDeliveryLedger(
      createDynamoClient({ endpoint: dynamo.endpoint }),
      tables.warehouseDeliveries,
    );
    const deliveries = await ledger.lookup(ids([...a, ...b]));
    expect([...deliveries.values()].every((d) => d.state === "written")).toBe(true);
    expect([...deliveries.keys()].sort()).toEqual(ids([...a, ...b]));
    // The dashboard's index has each written record.
    const index = new DynamoInteractionIndex(createDynamoClient({ endpoint: dynamo.endpoint }), tables);
    for (const record of [...a, ...b]) {
      expect(await index.get(record.project_id, record.transaction_id)).toEqual(record);
    }

    // Delivered again (SQS is at least once): nothing is written twice.
    const files = s3.keys(`${WAREHOUSE_BUCKET}/interactions/`);
    expect(await consumer(sqsEvent([...a, ...b].map((r) => JSON.stringify(r))))).toEqual({
      batchItemFailures: [],
    });
    expect(s3.keys(`${WAREHOUSE_BUCKET}/interactions/`)).toEqual(files);
    expect(await storedIds("interactions/project=wh-a/")).toEqual(ids(a));
  });

  it("returns exactly the messages whose file could not be written, and lands the rest", async () => {
    const failing = records("wh-c", 3);
    const landing = records("wh-d", 2);
    s3.refuse = (path) => path.startsWith(`${WAREHOUSE_BUCKET}/interactions/project=wh-c/`);
    const event = sqsEvent([...failing, ...landing].map((r) => JSON.stringify(r)));
    const result = await consumer(event);
    expect(result.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(
      event.Records.slice(0, 3)
        .map((r) => r.messageId)
        .sort(),
    );
    expect(await storedIds("interactions/project=wh-d/")).toEqual(ids(landing));
    expect(s3.keys(`${WAREHOUSE_BUCKET}/interactions/project=wh-c/`)).toEqual([]);

    // Redelivered once the bucket takes them: they land, and nothing else is written again.
    s3.refuse = () => false;
    const retried = { Records: event.Records.slice(0, 3) };
    expect(await consumer(retried)).toEqual({ batchItemFailures: [] });
    expect(await storedIds("interactions/project=wh-c/")).toEqual(ids(failing));
  });

  it("drops the records a deletion's tombstone covers, from the files and the index", async () => {
    const kept = records("wh-t", 1);
    const deleted = syntheticRecord(1, { projectId: "wh-t" });
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    await new DynamoTombstones(db, tables.deletionTombstones).put({
      projectId: "wh-t",
      requestId: "del_tombstoned",
      upTo: deleted.started_at,
      transactionIds: [deleted.transaction_id],
    });
    expect(await consumer(sqsEvent([...kept, deleted].map((r) => JSON.stringify(r))))).toEqual({
      batchItemFailures: [],
    });
    expect(await storedIds("interactions/project=wh-t/")).toEqual(ids(kept));
    const index = new DynamoInteractionIndex(db, tables);
    expect(await index.get("wh-t", deleted.transaction_id)).toBeUndefined();
    expect(await index.get("wh-t", kept[0]?.transaction_id ?? "")).toEqual(kept[0]);
  });

  it("returns the poison messages when the dead-letter queue refuses them, so SQS keeps them", async () => {
    const good = records("wh-e", 2);
    sqs.down = "dead-letters";
    const event = sqsEvent([JSON.stringify(good[0]), "{poison", JSON.stringify(good[1]), "[]"]);
    const result = await consumer(event);
    expect(result.batchItemFailures.map((f) => f.itemIdentifier)).toEqual([
      event.Records[1]?.messageId,
      event.Records[3]?.messageId,
    ]);
    expect(await storedIds("interactions/project=wh-e/")).toEqual(ids(good));
  });
});

describe("compaction handler", () => {
  it("merges yesterday's consumer files into one; a record delivered again is not written twice", async () => {
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    await createProject(new DynamoStore(db, tables), "wh-compact", "free", Date.now());
    db.destroy();
    const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
    const noon = Date.parse(`${yesterday}T12:00:00Z`);
    const batches = [0, 1, 2].map((b) =>
      Array.from({ length: 3 }, (_, i) =>
        syntheticRecord(b * 3 + i, { projectId: "wh-compact", startMs: noon + b * 60_000 }),
      ),
    );
    for (const batch of batches) {
      expect(await consumer(sqsEvent(batch.map((r) => JSON.stringify(r))))).toEqual({
        batchItemFailures: [],
      });
    }
    const day = `${WAREHOUSE_BUCKET}/interactions/project=wh-compact/dt=${yesterday}/`;
    expect(s3.keys(day)).toHaveLength(3);

    const report = await compact({ projectId: "wh-compact" });
    expect(report.partitions).toEqual([
      {
        projectId: "wh-compact",
        day: yesterday,
        outcome: "compacted",
        filesBefore: 3,
        filesAfter: 1,
        rows: 9,
      },
    ]);
    const [merged, ...rest] = s3.keys(day);
    expect(rest).toEqual([]);
    expect(merged).toMatch(/\/compact-[0-9a-f]{24}\.parquet$/);
    expect(await storedIds(`interactions/project=wh-compact/`)).toEqual(ids(batches.flat()));

    expect(await consumer(sqsEvent([JSON.stringify(batches[0]?.[0])]))).toEqual({ batchItemFailures: [] });
    expect(s3.keys(day)).toEqual([merged]);
  });
});

describe("compaction handler, fanned out (DMT_PARTITION_QUEUE_URL, as the stack deploys it)", () => {
  it("queues one message per partition from the schedule's invocation, and each message merges its partition once", async () => {
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    await createProject(new DynamoStore(db, tables), "wh-fanout", "free", Date.now());
    db.destroy();
    const dayMs = 86_400_000;
    const days = [1, 2].map((back) => new Date(Date.now() - back * dayMs).toISOString().slice(0, 10));
    for (const [d, day] of days.entries()) {
      const noon = Date.parse(`${day}T12:00:00Z`);
      for (const b of [0, 1]) {
        // Ids of their own (the ledger writes a transaction once): 900 + day, batch and record.
        const batch = [0, 1].map((i) =>
          syntheticRecord(900 + d * 4 + b * 2 + i, { projectId: "wh-fanout", startMs: noon + b * 60_000 }),
        );
        expect(await consumer(sqsEvent(batch.map((r) => JSON.stringify(r))))).toEqual({
          batchItemFailures: [],
        });
      }
    }
    // The deployed function: its configuration read at a cold start of its own, with the queue.
    const queueUrl = `${process.env.DMT_SQS_ENDPOINT}/123456789012/partitions`;
    process.env.DMT_PARTITION_QUEUE_URL = queueUrl;
    vi.resetModules();
    const fanned = (await import("../../lambda/handlers/compaction")).handler as (
      event: unknown,
    ) => Promise<unknown>;
    delete process.env.DMT_PARTITION_QUEUE_URL;

    const planned = (await fanned({ projectId: "wh-fanout" })) as { runId: string; planned: number };
    expect(planned.planned).toBe(2);
    const messages = sqs.on("partitions");
    expect(messages.map((m) => JSON.parse(m.body))).toEqual(
      days.map((day) => ({ projectId: "wh-fanout", day, dropBodies: false })),
    );
    // Nothing merged yet: planning only lists.
    for (const day of days) {
      expect(s3.keys(`${WAREHOUSE_BUCKET}/interactions/project=wh-fanout/dt=${day}/`)).toHaveLength(2);
    }
    // Each message, as Lambda's SQS event source hands it over (one per invocation); then one again.
    const deliver = (index: number) => fanned(sqsEvent([messages[index]?.body ?? ""]));
    expect(await deliver(0)).toEqual({ batchItemFailures: [] });
    expect(await deliver(1)).toEqual({ batchItemFailures: [] });
    expect(await deliver(0)).toEqual({ batchItemFailures: [] });
    for (const day of days) {
      const [merged, ...rest] = s3.keys(`${WAREHOUSE_BUCKET}/interactions/project=wh-fanout/dt=${day}/`);
      expect(rest).toEqual([]);
      expect(merged).toMatch(/\/compact-[0-9a-f]{24}\.parquet$/);
    }
  });
});

describe("retention handler, fanned out (DMT_PROJECT_QUEUE_URL, as the stack deploys it)", () => {
  it("queues one message per project with a limit, and each message retains its project with an audit entry of its own", async () => {
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    const store = new DynamoStore(db, tables);
    const index = new DynamoInteractionIndex(db, tables);
    const dayMs = 86_400_000;
    const old = Date.now() - 5 * dayMs;
    const recent = Date.now() - 60_000;
    const written = new Map<string, string[]>();
    for (const projectId of ["wh-ret", "wh-ret-none"]) {
      await createProject(store, projectId, "free", Date.now());
      // An entry 5 days old (past a limit of 2) and one from a minute ago.
      const records = [old, recent].map((startMs, i) => syntheticRecord(950 + i, { projectId, startMs }));
      await index.write(records);
      written.set(
        projectId,
        records.map((r) => r.transaction_id),
      );
    }
    await updatePrivacySettings(store, new DynamoPrivacySettings(db, tables), "wh-ret", { retentionDays: 2 });
    const entries = async (projectId: string) =>
      Promise.all(
        (written.get(projectId) ?? []).map(async (id) => (await index.get(projectId, id)) !== undefined),
      );
    expect(await entries("wh-ret")).toEqual([true, true]);

    // The deployed function: its configuration read at a cold start of its own, with the queue.
    const queueUrl = `${process.env.DMT_SQS_ENDPOINT}/123456789012/projects`;
    process.env.DMT_PROJECT_QUEUE_URL = queueUrl;
    vi.resetModules();
    const fanned = (await import("../../lambda/handlers/retention")).handler as (
      event: unknown,
    ) => Promise<unknown>;
    delete process.env.DMT_PROJECT_QUEUE_URL;

    // A dry run answers with its report, as before: nothing queued, nothing removed.
    const dry = (await fanned({ projectId: "wh-ret", dryRun: true })) as RetentionAudit;
    expect(dry).toMatchObject({ dryRun: true, status: "completed", projects: [{ projectId: "wh-ret" }] });
    expect(sqs.on("projects")).toEqual([]);

    const planned = (await fanned({})) as { runId: string; planned: number };
    const messages = sqs.on("projects");
    // Every project with a limit, and no other.
    expect(messages.map((m) => JSON.parse(m.body))).toContainEqual({ projectId: "wh-ret" });
    expect(messages.map((m) => JSON.parse(m.body))).not.toContainEqual({ projectId: "wh-ret-none" });
    expect(planned.planned).toBe(messages.length);
    // Nothing retained yet: planning only lists.
    expect(await entries("wh-ret")).toEqual([true, true]);
    const auditKeys = () => s3.keys(`${WAREHOUSE_BUCKET}/retention-audit/`);
    expect(auditKeys()).toEqual([]);

    // The project's message, as Lambda's SQS event source hands it over; then once again.
    const body = JSON.stringify({ projectId: "wh-ret" });
    expect(await fanned(sqsEvent([body]))).toEqual({ batchItemFailures: [] });
    expect(await entries("wh-ret")).toEqual([false, true]);
    expect(await entries("wh-ret-none")).toEqual([true, true]);
    expect(await fanned(sqsEvent([body]))).toEqual({ batchItemFailures: [] });
    const audits = auditKeys().map(
      (key) => JSON.parse((s3.objects.get(key) as Buffer).toString("utf8")) as RetentionAudit,
    );
    expect(audits.map((a) => a.projects[0]?.indexRemoved).sort()).toEqual([0, 1]);
    expect(audits.every((a) => a.status === "completed" && a.projects.length === 1)).toBe(true);
    // A project without a limit by the time its message comes: nothing to do.
    expect(await fanned(sqsEvent([JSON.stringify({ projectId: "wh-ret-none" })]))).toEqual({
      batchItemFailures: [],
    });
    expect(auditKeys()).toHaveLength(2);
    db.destroy();
  });
});

describe("spool re-sender", () => {
  it("sends every spooled record to the queue and empties the spool", async () => {
    const spooled = records("wh-spool", 3).map((r) => JSON.stringify(r));
    s3.objects.set(
      `${WAREHOUSE_BUCKET}/queue-spool/20260115T120000000Z-a.jsonl`,
      Buffer.from(spooled.slice(0, 2).join("\n")),
    );
    s3.objects.set(
      `${WAREHOUSE_BUCKET}/queue-spool/20260115T120500000Z-b.jsonl`,
      Buffer.from(spooled[2] as string),
    );
    await resendSpool();
    expect(
      sqs
        .on("records")
        .map((r) => r.body)
        .filter((b) => b.includes("wh-spool")),
    ).toEqual(spooled);
    expect(s3.keys(`${WAREHOUSE_BUCKET}/queue-spool/`)).toEqual([]);
  });

  it("keeps the spool when the queue refuses, for the next run", async () => {
    const body = JSON.stringify(syntheticRecord(1, { projectId: "wh-spool-kept" }));
    const key = `${WAREHOUSE_BUCKET}/queue-spool/20260115T121000000Z-c.jsonl`;
    s3.objects.set(key, Buffer.from(body));
    sqs.down = "records";
    await resendSpool();
    expect(s3.objects.get(key)?.toString()).toBe(body);
    sqs.down = undefined;
    await resendSpool();
    expect(s3.keys(`${WAREHOUSE_BUCKET}/queue-spool/`)).toEqual([]);
    expect(sqs.on("records").some((r) => r.body === body)).toBe(true);
  });
});

/** A POST to `/api/v1/exports`. */
const exportEvent = (projectId: string, body: unknown) => dataApiEvent(projectId, "POST", "exports", body);

/** A request the data API gets from API Gateway, with the authorizer's context for a key of `projectId`. */
function dataApiEvent(
  projectId: string,
  method: "GET" | "POST",
  subPath: string,
  body?: unknown,
): APIGatewayProxyEvent {
  const context = grantedContext({
    projectId,
    keyId: "whkey00000000000",
    tier: "pro",
    rateLimit: TIER_LIMITS.pro,
    store: "full",
  });
  return {
    resource: "/api/v1/{proxy+}",
    path: `/api/v1/${subPath}`,
    httpMethod: method,
    headers: { Host: "abc123.execute-api.eu-west-1.amazonaws.com", "Content-Type": "application/json" },
    multiValueHeaders: {
      Host: ["abc123.execute-api.eu-west-1.amazonaws.com"],
      "Content-Type": ["application/json"],
    },
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: { proxy: subPath },
    stageVariables: null,
    body: body === undefined ? null : JSON.stringify(body),
    isBase64Encoded: false,
    requestContext: {
      stage: "prod",
      path: `/prod/api/v1/${subPath}`,
      domainName: "abc123.execute-api.eu-west-1.amazonaws.com",
      authorizer: {
        ...Object.fromEntries(Object.entries(context).map(([k, v]) => [k, String(v)])),
        principalId: "whkey00000000000",
      },
    } as unknown as APIGatewayProxyEvent["requestContext"],
  };
}

const contentType = (response: StreamedResult) => response.multiValueHeaders?.["content-type"]?.[0];

describe("data API exports", () => {
  const range = { start: "2026-01-15", end: "2026-01-15" };

  it("queries Athena through the workgroup, scoped to the caller's project, with parameters", async () => {
    const rows = records("wh-x", 4);
    athena.rows.set("wh-x", rows);
    const response = await api(
      exportEvent("wh-x", { format: "json", range, filters: { model: "gpt-4o-mini" } }),
    );
    expect(response.statusCode).toBe(200);
    expect(contentType(response)).toMatch(/^application\/json/);
    const body = JSON.parse(response.body) as Record<string, unknown>[];
    expect(body.map((r) => r.transaction_id)).toEqual(rows.map((r) => r.transaction_id));
    expect(body[0]?.started_at).toBe(new Date(rows[0]?.started_at as number).toISOString());

    const query = athena.started.at(-1) as {
      QueryString: string;
      WorkGroup: string;
      ExecutionParameters: string[];
      QueryExecutionContext: { Database: string };
    };
    expect(query.WorkGroup).toBe("Dmt-warehouse");
    expect(query.QueryExecutionContext.Database).toBe("dmt_warehouse");
    expect(query.QueryString).toContain('FROM "dmt_warehouse"."interactions" WHERE');
    expect(query.QueryString).not.toContain("wh-x");
    expect(query.ExecutionParameters).toEqual([
      "'wh-x'",
      "'2026-01-15'",
      "'2026-01-15'",
      "'wh-x'",
      "'gpt-4o-mini'",
      // Each row once while a compaction swaps files: the same partitions again.
      "'wh-x'",
      "'2026-01-15'",
      "'2026-01-15'",
    ]);
  });

  it("writes the export to the project's s3:// destination and answers its URL and a presigned download", async () => {
    const rows = records("wh-y", 3);
    athena.rows.set("wh-y", rows);
    const settings = new DynamoExportSettings(
      createDynamoClient({ endpoint: dynamo.endpoint }),
      tables.projectSettings,
    );
    await settings.setExportDestination("wh-y", "s3://acme-exports/dmt/wh-y");
    const response = await api(exportEvent("wh-y", { format: "csv", range }));
    expect(response.statusCode).toBe(200);
    const answer = JSON.parse(response.body) as {
      export_url: string;
      download_url: string;
      expires_at: string;
    };
    expect(answer.export_url).toMatch(
      /^s3:\/\/acme-exports\/dmt\/wh-y\/\d{8}T\d{9}Z-dmt-export-wh-y-2026-01-15-to-2026-01-15\.csv$/,
    );
    const key = answer.export_url.slice("s3://".length);
    const csv = s3.objects.get(key)?.toString() ?? "";
    expect(csv.trimEnd().split("\r\n")).toHaveLength(1 + rows.length);
    const download = new URL(answer.download_url);
    expect(download.host).toBe("acme-exports.s3.eu-west-1.amazonaws.com");
    expect(download.pathname).toBe(`/${key.slice("acme-exports/".length)}`);
    expect(download.searchParams.get("X-Amz-Expires")).toBe("3600");
    expect(Date.parse(answer.expires_at)).toBeGreaterThan(Date.now());

    // Cleared, exports stream back again.
    await settings.setExportDestination("wh-y", undefined);
    const streamed = await api(exportEvent("wh-y", { format: "csv", range }));
    expect(contentType(streamed)).toMatch(/^text\/csv/);
  });

  it("answers bad requests in the service's error shape before querying", async () => {
    const before = athena.started.length;
    const response = await api(exportEvent("wh-x", { format: "xml", range }));
    expect(response.statusCode).toBe(400);
    expect(JSON.parse(response.body)).toMatchObject({ error: { type: "invalid_request_error" } });
    expect(athena.started.length).toBe(before);
  });
});

describe("data API deletion requests", () => {
  it("stores a request (the table's stream starts the workflow) and answers it to its project only", async () => {
    const created = await api(
      dataApiEvent("wh-del", "POST", "data", { reason: "user asked", transaction_ids: ["txn_wh-del_0"] }),
    );
    expect(created.statusCode).toBe(202);
    const { request_id } = JSON.parse(created.body) as { request_id: string };
    expect(request_id).toMatch(/^del_/);

    const read = await api(dataApiEvent("wh-del", "GET", `data/${request_id}`));
    expect(read.statusCode).toBe(200);
    expect(JSON.parse(read.body)).toMatchObject({ request_id, status: "queued", transaction_ids: 1 });

    const other = await api(dataApiEvent("wh-other", "GET", `data/${request_id}`));
    expect(other.statusCode).toBe(404);
    expect(JSON.parse(other.body)).toMatchObject({ error: { code: expect.any(String) } });
  });
});

describe("DynamoDB export settings", () => {
  it("keep only s3:// destinations, normalized, and clear them", async () => {
    const settings = new DynamoExportSettings(
      createDynamoClient({ endpoint: dynamo.endpoint }),
      tables.projectSettings,
    );
    expect(await settings.getExportDestination("wh-none")).toBeUndefined();
    await settings.setExportDestination("wh-s", "s3://bucket-one/a/b");
    expect(await settings.getExportDestination("wh-s")).toEqual({
      kind: "s3",
      url: "s3://bucket-one/a/b/",
      bucket: "bucket-one",
      prefix: "a/b/",
    });
    await expect(settings.setExportDestination("wh-s", "file:///tmp/exports")).rejects.toThrow(
      DestinationError,
    );
    await expect(settings.setExportDestination("wh-s", "s3://Not_A_Bucket/")).rejects.toThrow(
      DestinationError,
    );
    expect((await settings.getExportDestination("wh-s"))?.url).toBe("s3://bucket-one/a/b/");
    await settings.setExportDestination("wh-s", undefined);
    expect(await settings.getExportDestination("wh-s")).toBeUndefined();
  });
});

describe("data API streaming (API Gateway's streaming Lambda proxy integration)", () => {
  const range = { start: "2026-01-15", end: "2026-01-15" };

  it("streams an export over 6 MB page by page, the same rows as the local server's export of the same data", async () => {
    const rows = records("wh-big", 12_000);
    athena.rows.set("wh-big", rows);
    const streamed = await api(exportEvent("wh-big", { format: "json", range }));
    expect(streamed.statusCode).toBe(200);
    // Over Lambda's 6 MB response payload, which a buffered integration could not return.
    expect(streamed.bytes.length).toBeGreaterThan(6 * 1024 * 1024);
    // Athena's pages of 1000 rows, each passed on as it came.
    expect(athena.pagesRead).toBe(13);

    const localDir = mkdtempSync(join(tmpdir(), "dmt-stream-local-"));
    const local = await startLocalWarehouse({ dataDir: localDir, logger: silentLogger });
    try {
      for (const record of rows) await local.queue.send(record);
      await local.queue.deliver();
      const app = appShell(silentLogger);
      app.use("/api/*", async (c, next) => {
        c.set("auth", {
          projectId: "wh-big",
          keyId: "whkey00000000000",
          tier: "pro",
          rateLimit: TIER_LIMITS.pro,
          store: "full",
        });
        await next();
      });
      mountRoutes(app, exportRoutes(local.exports));
      const response = await app.request("/api/v1/exports", {
        method: "POST",
        body: JSON.stringify({ format: "json", range }),
      });
      expect(response.status).toBe(200);
      const byId = (list: Record<string, unknown>[]) =>
        [...list].sort((a, b) => String(a.transaction_id).localeCompare(String(b.transaction_id)));
      const lambdaRows = JSON.parse(streamed.body) as Record<string, unknown>[];
      const localRows = (await response.json()) as Record<string, unknown>[];
      expect(lambdaRows).toHaveLength(rows.length);
      expect(byId(lambdaRows)).toEqual(byId(localRows));
    } finally {
      await local.close();
      rmSync(localDir, { recursive: true, force: true });
    }
  });

  it("ends a JSON export whose query fails halfway unterminated, its last element the error", async () => {
    athena.rows.set("wh-fail", records("wh-fail", 3_500));
    athena.failAfterPages = 2;
    const response = await api(exportEvent("wh-fail", { format: "json", range }));
    expect(response.statusCode).toBe(200);
    expect(() => JSON.parse(response.body)).toThrow();
    expect(response.body.endsWith("]\n")).toBe(false);
    const lines = response.body.trimEnd().split("\n");
    expect(JSON.parse(lines.at(-1) as string)).toEqual(errors.exportInterrupted().toBody());
    // The rows before it are whole: the two pages read.
    expect(lines.filter((line) => line.includes('"transaction_id"'))).toHaveLength(1_999);
    expect(athena.stopped).toContain(`q-${athena.started.length}`);
  });

  it("ends a CSV export whose query fails halfway with the #error line", async () => {
    athena.rows.set("wh-fail", records("wh-fail", 3_500));
    athena.failAfterPages = 1;
    const response = await api(exportEvent("wh-fail", { format: "csv", range }));
    expect(response.statusCode).toBe(200);
    const lines = response.body.split("\r\n").filter((line) => line !== "");
    const error = errors.exportInterrupted();
    expect(lines.at(-1)).toBe(`#error,${error.type},${error.code},${error.message}`);
    expect(`${lines[0]}\r\n`).toBe(CSV_HEADER);
    expect(athena.stopped).toContain(`q-${athena.started.length}`);
  });

  it("stops the query and ends the invocation when the client leaves mid-export", async () => {
    athena.rows.set("wh-leave", records("wh-leave", 5_000));
    // The client reads one chunk and hangs up: the runtime's stream closes under the handler.
    const stream = new CollectedResponse();
    const write = stream._write.bind(stream);
    stream._write = (chunk, encoding, callback) => {
      write(chunk, encoding, callback);
      if (stream.chunks.length === 1) stream.destroy();
    };
    await apiStream(exportEvent("wh-leave", { format: "csv", range }), stream, lambdaContext());
    expect(athena.stopped).toContain(`q-${athena.started.length}`);
    expect(athena.pagesRead).toBeLessThan(5);
  });

  it("ends a stream that reaches the integration's time limit with the marker naming the bucket destination", async () => {
    athena.rows.set("wh-late", records("wh-late", 3_000));
    // An invocation with 9 s left: inside the 10 s kept at the end, so the stream stops after its first chunk.
    const response = await invokeRest(
      apiStream,
      exportEvent("wh-late", { format: "json", range }),
      lambdaContext(9_000),
    );
    expect(response.statusCode).toBe(200);
    const last = JSON.parse(response.body.trimEnd().split("\n").at(-1) as string) as {
      error: { code: string; message: string };
    };
    expect(last).toEqual(errors.exportTimeLimit(15).toBody());
    expect(last.error.message).toContain("--export-bucket s3://");
    expect(athena.stopped).toContain(`q-${athena.started.length}`);
  });

  /** A day's rollup of `requests` calls to `model`, as the consumer leaves it in the rollups table. */
  async function putRollup(projectId: string, day: string, model: string, requests: number) {
    const db = createDynamoClient({ endpoint: dynamo.endpoint });
    await db.send(
      new PutItemCommand({
        TableName: tables.usageRollups,
        Item: marshall({
          projectId,
          rollupId: `${day}#openai#managed#${model}`,
          day,
          vendor: "openai",
          billing_mode: "managed",
          model,
          requests,
        }),
      }),
    );
  }

  it("refuses up front, in the service's error shape naming the bucket destination, an export over the rows 15 minutes stream; streams one at the limit", async () => {
    const twoDays = { start: "2026-01-14", end: "2026-01-15" };
    athena.rows.set("wh-huge", records("wh-huge", 5));
    // Exactly the limit over two days and two models: streamed.
    await putRollup("wh-huge", "2026-01-14", "gpt-4o-mini", STREAMED_EXPORT_MAX_ROWS - 10);
    await putRollup("wh-huge", "2026-01-15", "gpt-4o", 10);
    const started = athena.started.length;
    const atLimit = await api(exportEvent("wh-huge", { format: "csv", range: twoDays }));
    expect(atLimit.statusCode).toBe(200);
    expect(atLimit.body.trimEnd().split("\r\n")).toHaveLength(1 + 5);
    expect(athena.started.length).toBe(started + 1);

    // One call more: refused before any query.
    await putRollup("wh-huge", "2026-01-15", "gpt-4o", 11);
    const refused = await api(exportEvent("wh-huge", { format: "csv", range: twoDays }));
    expect(refused.statusCode).toBe(400);
    expect(contentType(refused)).toMatch(/^application\/json/);
    const error = errors.exportTooLarge(STREAMED_EXPORT_MAX_ROWS + 1, STREAMED_EXPORT_MAX_ROWS, 15);
    expect(JSON.parse(refused.body)).toEqual(error.toBody());
    expect(error.code).toBe("export_too_large");
    expect(error.message).toContain("2,000,001 rows");
    expect(error.message).toContain("--export-bucket s3://");
    expect(athena.started.length).toBe(started + 1);

    // Filters the rollups know narrow the estimate: one model's 11 calls stream.
    const oneModel = await api(
      exportEvent("wh-huge", { format: "json", range: twoDays, filters: { model: "gpt-4o" } }),
    );
    expect(oneModel.statusCode).toBe(200);
    // A user filter is not in the rollups: the whole range's count is its upper bound.
    const oneUser = await api(
      exportEvent("wh-huge", { format: "json", range: twoDays, filters: { user_id: "u-1" } }),
    );
    expect(oneUser.statusCode).toBe(400);

    // With a bucket destination, the same export is written there, as before.
    const settings = new DynamoExportSettings(
      createDynamoClient({ endpoint: dynamo.endpoint }),
      tables.projectSettings,
    );
    await settings.setExportDestination("wh-huge", "s3://acme-exports/dmt/wh-huge");
    try {
      const written = await api(exportEvent("wh-huge", { format: "csv", range: twoDays }));
      expect(written.statusCode).toBe(200);
      expect(JSON.parse(written.body)).toMatchObject({
        export_url: expect.stringMatching(/^s3:\/\/acme-exports\//),
      });
    } finally {
      await settings.setExportDestination("wh-huge", undefined);
    }
  });

  it("answers every other route byte for byte as the buffered integration did", async () => {
    const created = await api(
      dataApiEvent("wh-bytes", "POST", "data", { reason: "user asked", transaction_ids: ["txn_1"] }),
    );
    const { request_id } = JSON.parse(created.body) as { request_id: string };
    const buffered = handle(dataApiApp);
    const events = [
      dataApiEvent("wh-bytes", "GET", "status"),
      dataApiEvent("wh-bytes", "GET", "openapi.json"),
      dataApiEvent("wh-bytes", "GET", `data/${request_id}`),
      dataApiEvent("wh-other", "GET", `data/${request_id}`),
      dataApiEvent("wh-bytes", "POST", "data", { reason: "" }),
      dataApiEvent("wh-bytes", "GET", "budgets"),
      dataApiEvent("wh-bytes", "GET", "transactions/txn_missing"),
      dataApiEvent("wh-bytes", "GET", "nothing-here"),
      exportEvent("wh-bytes", { format: "xml", range }),
    ];
    // The rate limit's remaining allowance and reset second differ by the one call in between.
    const comparable = (headers: Record<string, string[] | undefined> | undefined) =>
      Object.fromEntries(
        Object.entries(headers ?? {}).filter(
          ([name]) => !name.startsWith("x-ratelimit-remaining") && name !== "x-ratelimit-reset",
        ),
      );
    for (const event of events) {
      const before = (await buffered(event as never)) as {
        statusCode: number;
        body: string;
        isBase64Encoded: boolean;
        multiValueHeaders?: Record<string, string[]>;
      };
      const after = await api(event);
      expect(after.statusCode).toBe(before.statusCode);
      expect(after.bytes).toEqual(Buffer.from(before.body, before.isBase64Encoded ? "base64" : "utf8"));
      expect(comparable(after.multiValueHeaders)).toEqual(comparable(before.multiValueHeaders));
    }
  });
});
