import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQSClient } from "@aws-sdk/client-sqs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FileDeliveryLedger } from "../../lambda/adapters/fs/ledger";
import { localUserIdHasher } from "../../lambda/adapters/fs/master-key";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../../lambda/adapters/in-process/dead-letters";
import { parquetCodec } from "../../lambda/adapters/parquet/codec";
import { SqsRecordQueue } from "../../lambda/adapters/sqs/queue";
import { RecordSpool, SPOOL_PREFIX } from "../../lambda/adapters/sqs/spool";
import { warehouseHooks } from "../../lambda/compose/proxy";
import { createKey, createProject } from "../../lambda/core/accounts";
import { jsonLogger, silentLogger } from "../../lambda/core/logger";
import { parseLocalConfig } from "../../lambda/local/config";
import { type EmbeddedHost, startEmbeddedHost } from "../../lambda/local/host";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { createWarehouseConsumer } from "../../lambda/warehouse/consumer";
import { simulatorEnv } from "../support/host";
import { type Answered, countingFetch, until, warehouseRows } from "../support/reliability";
import { type SqsStandIn, startSqsStandIn } from "../support/reliability-sqs";

/**
 * Faults between the proxy and the warehouse: the queue refusing sends (the AWS producer's retries and
 * spool, behind the same proxy hook Lambda uses), the local queue's journal failing, and a consumer
 * failing in the middle of a batch (docs/reliability.md).
 */
let sim: Simulator;
let sqs: SqsStandIn;
let sqsClient: SQSClient;
let stack: EmbeddedHost;
let dir: string;
let dataDir: string;
let spool: RecordSpool;
let producer: SqsRecordQueue;
const logLines: string[] = [];

beforeAll(async () => {
  sim = await startSimulator();
  sqs = await startSqsStandIn();
  dir = mkdtempSync(join(tmpdir(), "dmt-queue-faults-"));
  dataDir = join(dir, "data");
  const logger = jsonLogger("debug", (line) => logLines.push(line));
  sqsClient = new SQSClient({
    endpoint: sqs.url,
    region: "eu-west-1",
    credentials: { accessKeyId: "test", secretAccessKey: "test" },
  });
  spool = new RecordSpool(new FsObjectStore(join(dir, "aws", "warehouse")), logger);
  producer = new SqsRecordQueue(sqsClient, {
    queueUrl: "https://sqs.local/records",
    spool,
    logger,
    baseDelayMs: 5,
  });
  // The local stack with a second record pipeline: the one the AWS proxy functions run.
  const config = parseLocalConfig({
    ...simulatorEnv(sim.origins),
    PORT: "0",
    DMT_ACCESS_LOG: "off",
    DMT_DATA_DIR: dataDir,
    DMT_METERING: "off",
    DMT_WAREHOUSE_FLUSH_MS: "100",
  });
  stack = await startEmbeddedHost(config, logger, {
    hooks: [warehouseHooks(producer, localUserIdHasher(dataDir))],
  });
});
afterAll(async () => {
  await stack?.close();
  sqsClient?.destroy();
  await sqs?.close();
  await sim?.close();
  rmSync(dir, { recursive: true, force: true });
});

let projects = 0;
async function newProject(): Promise<{ projectId: string; key: string }> {
  const projectId = `q${process.pid}-${++projects}`;
  await createProject(stack.store, projectId, "pro", Date.now());
  const { key } = await createKey(stack.store, { projectId, name: "test" }, Date.now());
  return { projectId, key };
}

/** `n` chat calls through the openai SDK; the transaction ids the responses carried. */
async function calls(key: string, n: number): Promise<string[]> {
  const answered: Answered[] = [];
  const client = new OpenAI({
    apiKey: key,
    baseURL: `${stack.url}/openai/v1`,
    maxRetries: 0,
    fetch: countingFetch(answered),
  });
  await Promise.all(
    Array.from({ length: n }, (_, i) =>
      client.chat.completions.create({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: `queue fault ${i}` }],
      }),
    ),
  );
  return answered.map((a) => a.transactionId ?? "none").sort();
}

const idsOf = (rows: { transaction_id: string }[]) => rows.map((r) => r.transaction_id).sort();

describe("queue send failures (the AWS producer: SQS, retries, spool)", () => {
  it("spools what SQS will not take, re-sends it later, and the consumer lands each record once", async () => {
    const { projectId, key } = await newProject();
    sqs.down();
    const ids = await calls(key, 6);
    await stack.drain(); // the proxy's after-work awaits the producer: on the queue or in the spool
    expect(sqs.accepted).toEqual([]);
    expect(sqs.failedCalls).toBeGreaterThan(0);
    expect(spool.spooled).toBe(6);
    expect(logLines.some((l) => l.includes('"metric":"queue.spooled"'))).toBe(true);
    // The spool holds the records; no log line holds one.
    const spoolStore = new FsObjectStore(join(dir, "aws", "warehouse"));
    const spooled: string[] = [];
    for await (const object of spoolStore.list(SPOOL_PREFIX)) {
      const text = new TextDecoder().decode(await spoolStore.get(object.key));
      spooled.push(
        ...text.split("\n").map((line) => (JSON.parse(line) as { transaction_id: string }).transaction_id),
      );
    }
    expect(spooled.sort()).toEqual(ids);
    expect(logLines.join("\n")).not.toContain(projectId);

    sqs.up();
    await producer.resendSpooled();
    expect(spool.resent).toBe(6);
    for await (const _ of spoolStore.list(SPOOL_PREFIX)) throw new Error("the spool was not emptied");

    // The consumer as SQS would run it, delivering the batch twice (at-least-once).
    const objects = spoolStore;
    const consumer = createWarehouseConsumer({
      objects,
      codec: parquetCodec,
      ledger: await FileDeliveryLedger.open(join(dir, "aws", "ledger")),
      deadLetters: new FolderDeadLetters(objects),
      logger: silentLogger,
    });
    expect(await consumer(sqs.event(1))).toEqual({ batchItemFailures: [] });
    expect(await consumer(sqs.event(2))).toEqual({ batchItemFailures: [] });
    expect(idsOf(await warehouseRows(join(dir, "aws")))).toEqual(ids);
    // The local pipeline, untouched by the SQS outage, has the same records once each.
    const local = (await warehouseRows(dataDir)).filter((r) => r.project_id === projectId);
    expect(idsOf(local)).toEqual(ids);
  });

  it("retries entries SQS refuses as throttled, without spooling them", async () => {
    const { key } = await newProject();
    const acceptedBefore = sqs.accepted.length;
    const spooledBefore = spool.spooled;
    // Fewer refusals than the producer's three attempts: even a record sent alone gets through.
    sqs.throttleEntries(2);
    const ids = await calls(key, 5);
    await stack.drain();
    const sent = sqs.accepted
      .slice(acceptedBefore)
      .map((body) => (JSON.parse(body) as { transaction_id: string }).transaction_id);
    expect(sent.sort()).toEqual(ids);
    expect(spool.spooled).toBe(spooledBefore);
  });
});

describe("the local queue's journal", () => {
  it("keeps records in memory when the journal cannot be written, says so, and still lands them", async () => {
    const { projectId, key } = await newProject();
    // Delivered first, so no segment is open: an open file would take appends after its folder went.
    await stack.drain();
    const journal = join(dataDir, "warehouse-queue");
    rmSync(journal, { recursive: true, force: true });
    writeFileSync(journal, ""); // a file where the folder was: every append fails
    try {
      const ids = await calls(key, 3);
      await stack.drain();
      expect(logLines.some((l) => l.includes('"metric":"warehouse.journal_failed"'))).toBe(true);
      const rows = (await warehouseRows(dataDir)).filter((r) => r.project_id === projectId);
      expect(idsOf(rows)).toEqual(ids);
    } finally {
      rmSync(journal, { force: true });
      mkdirSync(journal);
    }
  });
});

describe("a consumer failing in the middle of a batch", () => {
  it("lands the partitions it could write, and the rest once, when they come back", async () => {
    const a = await newProject();
    const b = await newProject();
    // A file where project B's partition folder goes: writing B's Parquet file fails, A's does not.
    const blocked = join(dataDir, "warehouse", "interactions", `project=${b.projectId}`);
    mkdirSync(join(blocked, ".."), { recursive: true });
    writeFileSync(blocked, "");
    const idsA = await calls(a.key, 4);
    const idsB = await calls(b.key, 4);
    await stack.drain();
    const rowsOf = async (projectId: string) =>
      (await warehouseRows(dataDir)).filter((r) => r.project_id === projectId);
    expect(idsOf(await rowsOf(a.projectId))).toEqual(idsA);
    expect(await rowsOf(b.projectId)).toEqual([]);
    expect(logLines.some((l) => l.includes("writing a warehouse file failed"))).toBe(true);

    rmSync(blocked);
    // B's records come back after the visibility timeout: each message on its own timer, so they may
    // land over more than one batch.
    await until(async () => ((await rowsOf(b.projectId)).length >= idsB.length ? true : undefined));
    await stack.drain();
    expect(idsOf(await rowsOf(a.projectId))).toEqual(idsA);
    expect(idsOf(await rowsOf(b.projectId))).toEqual(idsB);
  });
});
