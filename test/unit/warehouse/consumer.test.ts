import { describe, expect, it } from "vitest";
import { syntheticRecord } from "../../../bench/warehouse-records";
import { FolderDeadLetters } from "../../../lambda/adapters/in-process/dead-letters";
import { MemoryDeliveryLedger } from "../../../lambda/adapters/memory/ledger";
import { MemoryObjectStore } from "../../../lambda/adapters/memory/object-store";
import { parquetCodec } from "../../../lambda/adapters/parquet/codec";
import { erasedUsageCodec } from "../../../lambda/adapters/parquet/erased-usage";
import { hashUserId } from "../../../lambda/core/deletion";
import { CLAIM_LEASE_MS, type ClaimRequest } from "../../../lambda/core/delivery-ledger";
import { silentLogger } from "../../../lambda/core/logger";
import type { ObjectBody } from "../../../lambda/core/object-store";
import type { BatchResult, QueueBatch } from "../../../lambda/core/queue";
import type { InteractionRecord } from "../../../lambda/core/record";
import { type ConsumerDeps, createWarehouseConsumer } from "../../../lambda/warehouse/consumer";

/**
 * The warehouse consumer over an in-memory object store and delivery ledger: each record becomes one
 * row, whatever the queue delivers twice, brings back after a failure or hands to two consumers at
 * once; poison is dead-lettered, deletions' tombstones drop what they cover.
 */

const T0 = Date.UTC(2026, 0, 15, 12);

function warehouse() {
  let now = T0;
  const clock = () => now;
  const objects = new MemoryObjectStore();
  const ledger = new MemoryDeliveryLedger(clock);
  const consumer = (changes: Partial<ConsumerDeps> = {}) =>
    createWarehouseConsumer({
      objects,
      codec: parquetCodec,
      ledger,
      deadLetters: new FolderDeadLetters(objects),
      logger: silentLogger,
      clock,
      ...changes,
    });
  /** How many rows each transaction id has, over every file written. */
  async function rows(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for await (const { key } of objects.list("interactions/")) {
      for (const record of await parquetCodec.decode((await objects.get(key)) ?? new Uint8Array())) {
        counts[record.transaction_id] = (counts[record.transaction_id] ?? 0) + 1;
      }
    }
    return counts;
  }
  async function files(prefix = "interactions/"): Promise<string[]> {
    const keys: string[] = [];
    for await (const { key } of objects.list(prefix)) keys.push(key);
    return keys;
  }
  return {
    objects,
    ledger,
    consumer,
    rows,
    files,
    advance(ms: number) {
      now += ms;
    },
  };
}

let projects = 0;
const records = (from: number, to: number, projectId = `wh-${++projects}`) =>
  Array.from({ length: to - from }, (_, i) => syntheticRecord(from + i, { projectId }));
const once = (list: InteractionRecord[]) => Object.fromEntries(list.map((r) => [r.transaction_id, 1]));

let deliveries = 0;
/** An SQS-shaped batch: one message per body. */
const batchOf = (bodies: (InteractionRecord | string)[]): QueueBatch => ({
  Records: bodies.map((body) => ({
    messageId: `msg-${++deliveries}`,
    body: typeof body === "string" ? body : JSON.stringify(body),
    attributes: { ApproximateReceiveCount: "1" },
  })),
});
const failedIds = (batch: QueueBatch, result: BatchResult) => {
  const failed = new Set(result.batchItemFailures.map((f) => f.itemIdentifier));
  return batch.Records.filter((m) => failed.has(m.messageId)).map(
    (m) => (JSON.parse(m.body) as InteractionRecord).transaction_id,
  );
};
const ACKED: BatchResult = { batchItemFailures: [] };

describe("the warehouse consumer", () => {
  it("writes each record once, one file per project and day, and decodes back to the records", async () => {
    const w = warehouse();
    const a = records(0, 3);
    const b = records(0, 2);
    const nextDay = records(100_000, 100_001, a[0]?.project_id);
    expect(await w.consumer()(batchOf([...a, ...b, ...nextDay]))).toEqual(ACKED);
    expect(await w.rows()).toEqual(once([...a, ...b, ...nextDay]));
    const keys = await w.files();
    expect(keys).toHaveLength(3);
    expect(
      keys.filter((k) => k.startsWith(`interactions/project=${a[0]?.project_id}/dt=2026-01-15/`)),
    ).toHaveLength(1);
    const written = await parquetCodec.decode(
      (await w.objects.get(keys.find((k) => k.includes(`project=${b[0]?.project_id}/`)) ?? "")) ??
        new Uint8Array(),
    );
    expect(written).toEqual(b);
  });

  it("acknowledges a record delivered again, in the same batch or a later one, without a second row", async () => {
    const w = warehouse();
    const list = records(0, 4);
    const first = list[0] as InteractionRecord;
    expect(await w.consumer()(batchOf([...list, first]))).toEqual(ACKED);
    expect(await w.consumer()(batchOf([first, ...records(4, 5, first.project_id)]))).toEqual(ACKED);
    expect(await w.rows()).toEqual(once([...list, ...records(4, 5, first.project_id)]));
  });

  it("dead-letters poison with its error and acknowledges it; the good records of the batch are written", async () => {
    const w = warehouse();
    const good = records(0, 2);
    const batch = batchOf(["not json {", JSON.stringify({ transaction_id: "txn_x" }), ...good]);
    expect(await w.consumer()(batch)).toEqual(ACKED);
    expect(await w.rows()).toEqual(once(good));
    const letters = await w.files("dead-letter/");
    expect(letters).toHaveLength(2);
    const first = JSON.parse(Buffer.from((await w.objects.get(letters.sort()[0] ?? "")) ?? []).toString());
    expect(first).toMatchObject({ body: expect.any(String), error: expect.any(String), receive_count: 1 });
    // The parser's message could quote the body: the letter says what was wrong in its own words.
    const texts = await Promise.all(
      letters.map(async (key) => Buffer.from((await w.objects.get(key)) ?? []).toString()),
    );
    expect(texts.some((t) => t.includes("the message body is not JSON"))).toBe(true);
  });

  it("fails the messages of a file whose put failed, frees their claims, and writes them once when they come back", async () => {
    const w = warehouse();
    const list = records(0, 3);
    let failing = true;
    const objects = Object.create(w.objects) as MemoryObjectStore;
    objects.put = async (key: string, body: ObjectBody) => {
      if (failing) throw new Error("store unavailable");
      return w.objects.put(key, body);
    };
    const batch = batchOf(list);
    const result = await w.consumer({ objects })(batch);
    expect(failedIds(batch, result).sort()).toEqual(list.map((r) => r.transaction_id).sort());
    expect(await w.rows()).toEqual({});
    // The claims ended with the failure: the redelivery needs not wait out their lease.
    failing = false;
    expect(await w.consumer({ objects })(batchOf(list))).toEqual(ACKED);
    expect(await w.rows()).toEqual(once(list));
  });

  it("a consumer that died after its file landed, before the commit: the records come back and land once", async () => {
    const w = warehouse();
    const list = records(0, 4);
    const dying = Object.create(w.objects) as MemoryObjectStore;
    let died = () => {};
    const death = new Promise<void>((resolve) => {
      died = resolve;
    });
    dying.put = async (key: string, body: ObjectBody) => {
      await w.objects.put(key, body);
      died();
      await new Promise(() => {});
    };
    void w.consumer({ objects: dying })(batchOf(list));
    await death;
    expect(await w.rows()).toEqual(once(list));
    // Redelivered after the visibility timeout, mixed with a new record.
    w.advance(6 * 60_000);
    const fresh = records(4, 5, list[0]?.project_id);
    expect(await w.consumer()(batchOf([list[2] as InteractionRecord, ...fresh, ...list]))).toEqual(ACKED);
    expect(await w.rows()).toEqual(once([...list, ...fresh]));
    const found = await w.ledger.lookup(list.map((r) => r.transaction_id));
    expect([...found.values()].every((d) => d.state === "written")).toBe(true);
  });

  it("two consumers given the same records at once write one row each; the losers' messages come back and are acknowledged", async () => {
    const w = warehouse();
    const shared = records(0, 6);
    // Both look their batch up before either claims: the worst interleaving.
    let arrived = 0;
    let meet = () => {};
    const met = new Promise<void>((resolve) => {
      meet = resolve;
    });
    const meeting = Object.create(w.ledger) as MemoryDeliveryLedger;
    meeting.claim = async (file: string, requests: readonly ClaimRequest[]) => {
      if (++arrived === 2) meet();
      await met;
      return w.ledger.claim(file, requests);
    };
    const [one, two] = [batchOf(shared), batchOf([...shared].reverse())];
    const [r1, r2] = await Promise.all([
      w.consumer({ ledger: meeting })(one),
      w.consumer({ ledger: meeting })(two),
    ]);
    expect([...failedIds(one, r1), ...failedIds(two, r2)].sort()).toEqual(
      shared.map((r) => r.transaction_id).sort(),
    );
    expect(await w.rows()).toEqual(once(shared));
    w.advance(CLAIM_LEASE_MS);
    expect(await w.consumer()(batchOf(shared))).toEqual(ACKED);
    expect(await w.rows()).toEqual(once(shared));
  });

  it("tells its listeners of written records, and again when they come back; a listener's failure fails them", async () => {
    const w = warehouse();
    const list = records(0, 2);
    const told: string[][] = [];
    let broken = true;
    const listener = async (written: InteractionRecord[]) => {
      if (broken) throw new Error("index unavailable");
      told.push(written.map((r) => r.transaction_id));
    };
    const batch = batchOf(list);
    expect(failedIds(batch, await w.consumer({ onWritten: [listener] })(batch)).sort()).toEqual(
      list.map((r) => r.transaction_id).sort(),
    );
    broken = false;
    expect(await w.consumer({ onWritten: [listener] })(batchOf(list))).toEqual(ACKED);
    expect(told).toEqual([list.map((r) => r.transaction_id)]);
    expect(await w.rows()).toEqual(once(list));
  });

  it("drops records a deletion's tombstone covers: neither written nor told", async () => {
    const w = warehouse();
    const list = records(0, 3);
    const [gone, ...kept] = list as [InteractionRecord, ...InteractionRecord[]];
    const told: string[] = [];
    const tombstones = {
      forProjects: async () => [
        {
          projectId: gone.project_id,
          requestId: "del-1",
          upTo: T0 + 86_400_000,
          transactionIds: [gone.transaction_id],
        },
      ],
    };
    const consume = w.consumer({
      tombstones,
      onWritten: [async (written) => void told.push(...written.map((r) => r.transaction_id))],
    });
    expect(await consume(batchOf(list))).toEqual(ACKED);
    expect(await w.rows()).toEqual(once(kept));
    expect(told.sort()).toEqual(kept.map((r) => r.transaction_id).sort());
  });

  it("keeps the money of dropped records never written as erased usage, once however often they come", async () => {
    const w = warehouse();
    const list = records(0, 4).map((r, i) => ({
      ...r,
      user_id: i < 2 ? "u-gone" : "u-kept",
      cost_micros: 1000 + i,
    }));
    const gone = list.slice(0, 2);
    const projectId = gone[0]?.project_id ?? "";
    const tombstones = {
      forProjects: async () => [
        {
          projectId,
          requestId: "del-2",
          upTo: T0 + 86_400_000,
          userIdHash: hashUserId(projectId, "u-gone"),
        },
      ],
    };
    const consume = w.consumer({ tombstones, erasedUsage: erasedUsageCodec });
    expect(await consume(batchOf(list))).toEqual(ACKED);
    // Redelivered, alone and with the others: nothing more is written.
    expect(await consume(batchOf(gone))).toEqual(ACKED);
    expect(await consume(batchOf(list))).toEqual(ACKED);
    expect(await w.rows()).toEqual(once(list.slice(2)));
    const erasedFiles = await w.files("erased-usage/");
    expect(erasedFiles).toHaveLength(1);
    const [file] = erasedFiles as [string];
    expect(file.startsWith(`erased-usage/project=${projectId}/dt=`)).toBe(true);
    const bytes = (await w.objects.get(file)) ?? new Uint8Array();
    const erased = await erasedUsageCodec.decode(bytes);
    expect(erased.reduce((a, r) => a + r.calls, 0)).toBe(2);
    expect(erased.reduce((a, r) => a + r.cost_micros, 0)).toBe(1000 + 1001);
    const text = `${file}${JSON.stringify(erased)}${Buffer.from(bytes).toString("latin1")}`;
    for (const needle of ["u-gone", ...gone.map((r) => r.transaction_id)]) expect(text).not.toContain(needle);
  });
});
