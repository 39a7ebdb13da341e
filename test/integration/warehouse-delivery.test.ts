/**
 * Exactly once across a consumer's death: the two-phase delivery ledger (lambda/adapters/fs/ledger.ts)
 * with both ledgers (the local file and DynamoDB on dynalite) over a real folder store. A consumer dies
 * (its call never returns, as for a killed process or a Lambda timeout) after its file landed and
 * before the commit, or before the file landed; its records come back regrouped with new ones, as SQS
 * redelivers them. Two consumers given the same message at once write one row. Counted by DuckDB over
 * the whole folder.
 */

import { appendFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DuckDBInstance } from "@duckdb/node-api";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoDeliveryLedger } from "../../lambda/adapters/dynamodb/ledger";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { FileDeliveryLedger } from "../../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../../lambda/adapters/in-process/dead-letters";
import { parquetCodec } from "../../lambda/adapters/parquet/codec";
import { CLAIM_LEASE_MS, type ClaimRequest, type DeliveryLedger } from "../../lambda/core/delivery-ledger";
import { silentLogger } from "../../lambda/core/logger";
import type { ObjectBody } from "../../lambda/core/object-store";
import type { BatchResult, QueueBatch } from "../../lambda/core/queue";
import type { InteractionRecord } from "../../lambda/core/record";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { createWarehouseConsumer } from "../../lambda/warehouse/consumer";
import { CONSUMER, QUEUE } from "../../lib/warehouse";

const dir = mkdtempSync(join(tmpdir(), "dmt-warehouse-delivery-"));
const table = tableNames({}, "delivery-test-").warehouseDeliveries;
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;

beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(join(dir, "dynamo"));
  db = createDynamoClient({ endpoint: dynamo.endpoint });
  await ensureTables(db, tableNames({}, "delivery-test-"));
});
afterAll(async () => {
  db?.destroy();
  await dynamo?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A folder store in a process that can die at a put: the call then never returns. */
class DyingStore extends FsObjectStore {
  private death: { when: "before" | "after"; died: () => void } | undefined;

  /** The next put dies before its file lands, or after; resolves once it died. */
  dieAtNextPut(when: "before" | "after"): Promise<void> {
    return new Promise((died) => {
      this.death = { when, died };
    });
  }

  override async put(key: string, body: ObjectBody): Promise<void> {
    const death = this.death;
    this.death = undefined;
    if (death?.when !== "before") await super.put(key, body);
    if (!death) return;
    death.died();
    await new Promise(() => {});
  }
}

/** A folder store whose puts wait until `finish()`: a writer still at work. */
class SlowStore extends FsObjectStore {
  private finishing = () => {};
  private readonly finished = new Promise<void>((resolve) => {
    this.finishing = resolve;
  });
  private reaching = () => {};
  /** Resolves once a put has started. */
  readonly reached = new Promise<void>((resolve) => {
    this.reaching = resolve;
  });

  finish(): void {
    this.finishing();
  }

  override async put(key: string, body: ObjectBody): Promise<void> {
    this.reaching();
    await this.finished;
    await super.put(key, body);
  }
}

/**
 * Where the ledger lives. `first` is the ledger of the consumer that dies; `after` the ledger of the
 * one its records come back to: locally the next process on the data dir; in AWS another sandbox,
 * once the queue's visibility timeout has passed (so beyond the claims' lease).
 */
interface Deployment {
  first(): Promise<DeliveryLedger>;
  after(): Promise<DeliveryLedger>;
}

let deployments = 0;
const kinds: [string, () => Deployment][] = [
  [
    "file",
    () => {
      const folder = join(dir, `ledger-${++deployments}`);
      return { first: () => FileDeliveryLedger.open(folder), after: () => FileDeliveryLedger.open(folder) };
    },
  ],
  [
    "DynamoDB",
    () => {
      let now = Date.UTC(2026, 0, 15, 12);
      const clock = () => now;
      return {
        first: async () => new DynamoDeliveryLedger(db, table, clock),
        after: async () => {
          now += QUEUE.visibilityTimeout.toMilliseconds();
          return new DynamoDeliveryLedger(db, table, clock);
        },
      };
    },
  ],
];

let projects = 0;
/** A new project's records `from` to `to` (exclusive), on one day: one partition. */
const newProject = () => `dl-${++projects}`;
const records = (projectId: string, from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => syntheticRecord(from + i, { projectId }));
const ids = (list: InteractionRecord[]) => list.map((r) => r.transaction_id).sort();

let deliveries = 0;
/** An SQS-shaped batch: one message per record, each a new delivery. */
const batchOf = (list: InteractionRecord[]): QueueBatch => ({
  Records: list.map((r) => ({
    messageId: `msg-${++deliveries}`,
    body: JSON.stringify(r),
    attributes: { ApproximateReceiveCount: "1" },
  })),
});

const consumer = (objects: FsObjectStore, ledger: DeliveryLedger) =>
  createWarehouseConsumer({
    objects,
    codec: parquetCodec,
    ledger,
    deadLetters: new FolderDeadLetters(objects),
    logger: silentLogger,
  });

/** How many rows each transaction id has in the folder's Parquet files, by DuckDB. */
async function rowsPerId(root: string): Promise<Record<string, number>> {
  const instance = await DuckDBInstance.create(":memory:");
  try {
    const connection = await instance.connect();
    const files = join(root, "interactions", "**", "*.parquet").replaceAll("'", "''");
    const reader = await connection.runAndReadAll(
      `SELECT transaction_id, count(*)::INTEGER AS n FROM read_parquet('${files}', hive_partitioning = true)
       GROUP BY transaction_id`,
    );
    connection.closeSync();
    return Object.fromEntries(reader.getRowObjectsJS().map((row) => [row.transaction_id, row.n]));
  } finally {
    instance.closeSync();
  }
}

const once = (list: InteractionRecord[]) => Object.fromEntries(ids(list).map((id) => [id, 1]));
const failedIds = (batch: QueueBatch, result: BatchResult) => {
  const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
  return batch.Records.filter((m) => failed.has(m.messageId)).map(
    (m) => (JSON.parse(m.body) as InteractionRecord).transaction_id,
  );
};
async function parquetFiles(root: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const object of new FsObjectStore(root).list("interactions/")) keys.push(object.key);
  return keys;
}

describe.each(kinds)("%s ledger: a consumer that dies mid-batch", (_, deployment) => {
  it("after its file landed, before the commit: the records come back regrouped with new ones and land once", async () => {
    const where = deployment();
    const root = join(dir, `warehouse-${++deployments}`);
    const dying = new DyingStore(root);
    const project = newProject();
    const first = records(project, 0, 6);
    const died = dying.dieAtNextPut("after");
    void consumer(dying, await where.first())(batchOf(first));
    await died;
    // The window: the file holds the rows, the ledger has the ids claimed, not written.
    expect(await rowsPerId(root)).toEqual(once(first));
    const left = await (await where.after()).lookup(ids(first));
    expect([...left.values()].map((d) => d.state)).toEqual(Array(6).fill("claimed"));

    // Redelivered mixed with new records, split differently, one of them twice.
    const fresh = records(project, 6, 9);
    const restarted = consumer(new FsObjectStore(root), await where.after());
    const [a, b] = [
      [...first.slice(0, 3), ...fresh.slice(0, 2)],
      [first[4], ...first.slice(3), fresh[2], first[0]] as InteractionRecord[],
    ];
    expect(await restarted(batchOf(a))).toEqual({ batchItemFailures: [] });
    expect(await restarted(batchOf(b))).toEqual({ batchItemFailures: [] });
    expect(await rowsPerId(root)).toEqual(once([...first, ...fresh]));
    // And the dead writer's file is now committed: no second look at the store needed.
    const now = await (await where.after()).lookup(ids(first));
    expect([...now.values()].every((d) => d.state === "written")).toBe(true);
  });

  it("before its file landed: the records are written again, once", async () => {
    const where = deployment();
    const root = join(dir, `warehouse-${++deployments}`);
    const dying = new DyingStore(root);
    const project = newProject();
    const first = records(project, 0, 4);
    const died = dying.dieAtNextPut("before");
    void consumer(dying, await where.first())(batchOf(first));
    await died;
    expect(await parquetFiles(root)).toEqual([]);

    const fresh = records(project, 4, 6);
    const restarted = consumer(new FsObjectStore(root), await where.after());
    expect(await restarted(batchOf([first[2], fresh[0], first[0]] as InteractionRecord[]))).toEqual({
      batchItemFailures: [],
    });
    expect(await restarted(batchOf([...first, fresh[1]] as InteractionRecord[]))).toEqual({
      batchItemFailures: [],
    });
    expect(await rowsPerId(root)).toEqual(once([...first, ...fresh]));
  });
});

describe("DynamoDB ledger: consumers at once (Lambda, SQS delivering a message twice)", () => {
  /** Ledgers whose claims wait until every consumer has looked up its batch: the worst interleaving. */
  function meetingLedgers(count: number, clock: () => number): DeliveryLedger[] {
    let arrived = 0;
    let meet = () => {};
    const met = new Promise<void>((resolve) => {
      meet = resolve;
    });
    class MeetingLedger extends DynamoDeliveryLedger {
      override async claim(file: string, requests: readonly ClaimRequest[]): Promise<Set<string>> {
        if (++arrived === count) meet();
        await met;
        return super.claim(file, requests);
      }
    }
    return Array.from({ length: count }, () => new MeetingLedger(db, table, clock));
  }

  it("two consumers given the same records at once write one row each; the losers' messages come back and are acknowledged", async () => {
    let now = Date.UTC(2026, 0, 15, 12);
    const clock = () => now;
    const root = join(dir, `warehouse-${++deployments}`);
    const project = newProject();
    const shared = records(project, 0, 8);
    const [own1, own2] = [records(project, 8, 10), records(project, 10, 12)];
    const [ledger1, ledger2] = meetingLedgers(2, clock) as [DeliveryLedger, DeliveryLedger];
    const batch1 = batchOf([...shared, ...own1]);
    const batch2 = batchOf([...own2, ...[...shared].reverse()]);
    const [result1, result2] = await Promise.all([
      consumer(new FsObjectStore(root), ledger1)(batch1),
      consumer(new FsObjectStore(root), ledger2)(batch2),
    ]);
    // Each shared id went to exactly one of them; the other reports its message failed.
    const lost = [...failedIds(batch1, result1), ...failedIds(batch2, result2)].sort();
    expect(lost).toEqual(ids(shared));
    expect(await rowsPerId(root)).toEqual(once([...shared, ...own1, ...own2]));

    // After the visibility timeout, SQS brings the failed messages back: found written.
    now += QUEUE.visibilityTimeout.toMilliseconds();
    const later = consumer(new FsObjectStore(root), new DynamoDeliveryLedger(db, table, clock));
    const again = batchOf(shared);
    expect(await later(again)).toEqual({ batchItemFailures: [] });
    expect(await rowsPerId(root)).toEqual(once([...shared, ...own1, ...own2]));
  });

  it("a record another consumer is still writing fails, and is acknowledged once that file landed", async () => {
    let now = Date.UTC(2026, 0, 15, 12);
    const clock = () => now;
    const root = join(dir, `warehouse-${++deployments}`);
    const project = newProject();
    const list = records(project, 0, 3);
    const slow = new SlowStore(root);
    const writing = consumer(slow, new DynamoDeliveryLedger(db, table, clock))(batchOf(list));
    await slow.reached;

    // Within the writer's lease, its file not there yet: left to it.
    now += CLAIM_LEASE_MS - 1;
    const other = consumer(new FsObjectStore(root), new DynamoDeliveryLedger(db, table, clock));
    const duplicate = batchOf([list[1]] as InteractionRecord[]);
    expect(failedIds(duplicate, await other(duplicate))).toEqual([list[1]?.transaction_id]);
    expect(await parquetFiles(root)).toEqual([]);

    slow.finish();
    expect(await writing).toEqual({ batchItemFailures: [] });
    now += QUEUE.visibilityTimeout.toMilliseconds();
    expect(await other(duplicate)).toEqual({ batchItemFailures: [] });
    expect(await rowsPerId(root)).toEqual(once(list));
  });

  it("keeps a claim longer than a consumer can run, and shorter than a failed message stays hidden", () => {
    const skew = 60_000;
    expect(CONSUMER.timeout.toMilliseconds() + skew).toBeLessThanOrEqual(CLAIM_LEASE_MS);
    expect(CLAIM_LEASE_MS).toBeLessThan(QUEUE.visibilityTimeout.toMilliseconds());
  });
});

describe("file ledger", () => {
  it("reads past a line a killed process cut short, and keeps the claims before and after it", async () => {
    const folder = join(dir, `ledger-${++deployments}`);
    const now = Date.UTC(2026, 0, 15, 12);
    const ledger = await FileDeliveryLedger.open(folder, () => now);
    await ledger.claim("f/one", [{ id: "a" }]);
    await ledger.commit("f/one");
    appendFileSync(join(folder, "2026-01-15.ids"), '\n{"claim":"f/two","ids":["b","c');
    const next = await FileDeliveryLedger.open(folder, () => now);
    await next.claim("f/three", [{ id: "d" }]);
    const reopened = await FileDeliveryLedger.open(folder, () => now);
    expect(await reopened.lookup(["a", "b", "c", "d"])).toEqual(
      new Map([
        ["a", { state: "written" }],
        ["d", { state: "claimed", file: "f/three", live: false }],
      ]),
    );
  });
});
