import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DuckDBInstance } from "@duckdb/node-api";
import { parquetMetadata, parquetReadObjects } from "hyparquet";
import { parquetHeader } from "hyparquet/src/column.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { DuckDBWarehouseQuery } from "../../lambda/adapters/duckdb/export-query";
import { FileDeliveryLedger } from "../../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../../lambda/adapters/in-process/dead-letters";
import { InProcessQueue } from "../../lambda/adapters/in-process/queue";
import { parquetCodec } from "../../lambda/adapters/parquet/codec";
import { silentLogger } from "../../lambda/core/logger";
import type { ObjectBody } from "../../lambda/core/object-store";
import type { BatchHandler, QueueBatch, QueueMessage } from "../../lambda/core/queue";
import { DEAD_LETTER_PREFIX } from "../../lambda/core/queue";
import {
  buildRecord,
  INTERACTIONS_PREFIX,
  type InteractionRecord,
  RECORD_COLUMNS,
} from "../../lambda/core/record";
import { emptyUsage } from "../../lambda/core/usage";
import { startLocalWarehouse } from "../../lambda/local/warehouse";
import { createWarehouseConsumer } from "../../lambda/warehouse/consumer";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "dmt-warehouse-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function message(body: unknown, id: string, receiveCount = 1): QueueMessage {
  return {
    messageId: id,
    body: typeof body === "string" ? body : JSON.stringify(body),
    attributes: { ApproximateReceiveCount: String(receiveCount) },
  };
}

const batchOf = (records: InteractionRecord[], prefix = "m"): QueueBatch => ({
  Records: records.map((r, i) => message(r, `${prefix}${i}`)),
});

async function parquetKeys(objects: FsObjectStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const o of objects.list(INTERACTIONS_PREFIX)) keys.push(o.key);
  return keys;
}

/** Every stored row's transaction id, read back with hyparquet from every file. */
async function storedIds(objects: FsObjectStore): Promise<string[]> {
  const ids: string[] = [];
  for (const key of await parquetKeys(objects)) {
    const bytes = (await objects.get(key)) as Uint8Array;
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const rows = await parquetReadObjects({ file, columns: ["transaction_id"] });
    ids.push(...rows.map((r) => r.transaction_id as string));
  }
  return ids.sort();
}

/** How many data pages a column chunk has, counted from the page headers. */
function dataPages(file: ArrayBuffer, column: string): number {
  const chunk = parquetMetadata(file).row_groups[0]?.columns.find(
    (c) => c.meta_data?.path_in_schema[0] === column,
  );
  const meta = chunk?.meta_data;
  if (!meta) throw new Error(`no column ${column}`);
  const start = Number(meta.dictionary_page_offset ?? meta.data_page_offset);
  const reader = { view: new DataView(file, start, Number(meta.total_compressed_size)), offset: 0 };
  let pages = 0;
  while (reader.offset < reader.view.byteLength) {
    const header = parquetHeader(reader);
    if (header.type === "DATA_PAGE_V2") pages++;
    reader.offset += header.compressed_page_size;
  }
  return pages;
}

/** An object store whose writes fail while `failing` says so: a real folder with an injected fault. */
class FlakyStore extends FsObjectStore {
  failing: (key: string) => boolean = () => false;
  override async put(key: string, body: ObjectBody): Promise<void> {
    if (this.failing(key)) throw new Error("disk on fire");
    return super.put(key, body);
  }
}

async function consumerParts(objects = new FsObjectStore(join(dir, "warehouse"))) {
  const ledger = await FileDeliveryLedger.open(join(dir, "ledger"));
  const deadLetters = new FolderDeadLetters(objects);
  return { objects, codec: parquetCodec, ledger, deadLetters, logger: silentLogger };
}

describe("warehouse consumer", () => {
  it("writes one Parquet file per project and day, under the partition layout", async () => {
    const parts = await consumerParts();
    const handler = createWarehouseConsumer(parts);
    const records = [
      syntheticRecord(0, { projectId: "proj-a" }),
      syntheticRecord(1, { projectId: "proj-a" }),
      syntheticRecord(2, { projectId: "proj-b" }),
      syntheticRecord(3, { projectId: "proj-a", startMs: Date.UTC(2026, 0, 16, 0, 0, 0) }),
    ];
    expect(await handler(batchOf(records))).toEqual({ batchItemFailures: [] });
    const keys = await parquetKeys(parts.objects);
    expect(keys.map((k) => k.replace(/[^/]+\.parquet$/, ""))).toEqual([
      "interactions/project=proj-a/dt=2026-01-15/",
      "interactions/project=proj-a/dt=2026-01-16/",
      "interactions/project=proj-b/dt=2026-01-15/",
    ]);
    expect(keys.every((k) => /\/\d{8}T\d{9}Z-[0-9a-f]{20}\.parquet$/.test(k))).toBe(true);
    expect(await storedIds(parts.objects)).toEqual(records.map((r) => r.transaction_id).sort());
  });

  it("writes one row for a record delivered twice, in one batch or in two", async () => {
    const parts = await consumerParts();
    const handler = createWarehouseConsumer(parts);
    const record = syntheticRecord(7);
    const first = await handler({
      Records: [message(record, "a"), message(record, "b"), message(syntheticRecord(8), "c")],
    });
    expect(first.batchItemFailures).toEqual([]);
    const again = await handler({ Records: [message(record, "d", 2)] });
    expect(again.batchItemFailures).toEqual([]);
    expect(await storedIds(parts.objects)).toEqual(
      [record.transaction_id, syntheticRecord(8).transaction_id].sort(),
    );

    // The ledger outlives the process: a restarted consumer still knows the record.
    const restarted = createWarehouseConsumer(await consumerParts(parts.objects));
    await restarted({ Records: [message(record, "e", 3)] });
    expect(await storedIds(parts.objects)).toHaveLength(2);
  });

  it("dead-letters poison records with their error, and lands the rest of the batch", async () => {
    const parts = await consumerParts();
    const handler = createWarehouseConsumer(parts);
    const good = [syntheticRecord(1), syntheticRecord(2)];
    const result = await handler({
      Records: [
        message(good[0], "ok-1"),
        message("{not json", "bad-json"),
        message({ ...syntheticRecord(3), vendor: "acme" }, "bad-vendor"),
        message(good[1], "ok-2"),
      ],
    });
    expect(result.batchItemFailures).toEqual([]);
    expect(await storedIds(parts.objects)).toEqual(good.map((r) => r.transaction_id).sort());

    const letters: Record<string, { error: string; body: string; message_id: string }> = {};
    for await (const o of parts.objects.list(DEAD_LETTER_PREFIX)) {
      const letter = JSON.parse(Buffer.from((await parts.objects.get(o.key)) as Uint8Array).toString());
      letters[letter.message_id] = letter;
    }
    expect(Object.keys(letters).sort()).toEqual(["bad-json", "bad-vendor"]);
    expect(letters["bad-json"]).toMatchObject({ error: "the message body is not JSON", body: "{not json" });
    expect(letters["bad-vendor"]?.error).toBe("'vendor' must be one of groq, openai, anthropic, gemini");
  });

  it("reports only the records of a failed write, so only they come back", async () => {
    const objects = new FlakyStore(join(dir, "warehouse"));
    objects.failing = (key) => key.includes("project=proj-b/");
    const handler = createWarehouseConsumer(await consumerParts(objects));
    const result = await handler({
      Records: [
        message(syntheticRecord(0, { projectId: "proj-a" }), "a0"),
        message(syntheticRecord(1, { projectId: "proj-b" }), "b1"),
        message(syntheticRecord(2, { projectId: "proj-b" }), "b2"),
      ],
    });
    expect(result.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(["b1", "b2"]);
    expect(await storedIds(objects)).toEqual([syntheticRecord(0, { projectId: "proj-a" }).transaction_id]);
  });
});

describe("in-process queue with the consumer", () => {
  function queueOver(handler: BatchHandler, objects: FsObjectStore, maxReceives = 3) {
    return new InProcessQueue({
      handler,
      deadLetters: new FolderDeadLetters(objects),
      logger: silentLogger,
      flushIntervalMs: 60_000,
      batchSize: 100,
      visibilityTimeoutMs: 0,
      maxReceives,
    });
  }

  it("loses nothing when a batch fails midway: failed records are redelivered and land once", async () => {
    const objects = new FlakyStore(join(dir, "warehouse"));
    let failures = 1;
    objects.failing = (key) => key.includes("project=proj-b/") && failures-- > 0;
    const handler = createWarehouseConsumer(await consumerParts(objects));
    const queue = queueOver(handler, objects);
    const records = [0, 1, 2, 3].map((i) => syntheticRecord(i, { projectId: i % 2 ? "proj-b" : "proj-a" }));
    for (const r of records) await queue.send(r);
    await queue.deliver();
    expect(queue.depth).toBe(0);
    expect(await storedIds(objects)).toEqual(records.map((r) => r.transaction_id).sort());
  });

  it("redelivers a whole batch after a crash, and the rewrite adds no duplicate rows", async () => {
    const parts = await consumerParts();
    const inner = createWarehouseConsumer(parts);
    let crashes = 1;
    // The crash comes after the files were written, before the batch was acknowledged.
    const crashing: BatchHandler = async (batch) => {
      const result = await inner(batch);
      if (crashes-- > 0) throw new Error("sandbox killed");
      return result;
    };
    const queue = queueOver(crashing, parts.objects);
    const records = [0, 1, 2].map((i) => syntheticRecord(i));
    for (const r of records) await queue.send(r);
    await queue.deliver();
    expect(crashes).toBe(-1);
    expect(await storedIds(parts.objects)).toEqual(records.map((r) => r.transaction_id).sort());
    expect(await parquetKeys(parts.objects)).toHaveLength(1);
  });

  it("dead-letters a record that keeps failing after maxReceives, with the last error", async () => {
    const objects = new FsObjectStore(join(dir, "warehouse"));
    let deliveries = 0;
    const queue = queueOver(async () => {
      deliveries++;
      throw new Error("consumer down");
    }, objects);
    await queue.send(syntheticRecord(5));
    await queue.deliver();
    expect(deliveries).toBe(3);
    expect(queue.depth).toBe(0);
    const letters = [];
    for await (const o of objects.list(DEAD_LETTER_PREFIX)) letters.push(o.key);
    expect(letters).toHaveLength(1);
    const letter = JSON.parse(
      Buffer.from((await objects.get(letters[0] as string)) as Uint8Array).toString(),
    );
    expect(letter.error).toBe("not processed after 3 deliveries: consumer down");
    expect(JSON.parse(letter.body).transaction_id).toBe(syntheticRecord(5).transaction_id);
  });
});

describe("local warehouse", () => {
  it("makes records queryable on its own after the flush interval, and close flushes the rest", async () => {
    const warehouse = await startLocalWarehouse({ dataDir: dir, logger: silentLogger, flushIntervalMs: 20 });
    const count = async () => {
      let n = 0;
      const query = { projectId: "proj-a", start: "2026-01-15", end: "2026-01-15", filters: {} };
      for await (const batch of warehouse.exports.query.rows(query, "json")) n += batch.length;
      return n;
    };
    await warehouse.queue.send(syntheticRecord(1));
    // No explicit delivery: the interval timer does it. The test's own timeout bounds the wait.
    while ((await count()) === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(await count()).toBe(1);

    for (let i = 2; i < 50; i++) await warehouse.queue.send(syntheticRecord(i));
    await warehouse.close();
    expect(await storedIds(warehouse.objects)).toHaveLength(49);
  });
});

describe("Parquet files", () => {
  const SERVICE_KEY = "dmt_k1k2k3k4k5k6k7k8_SECRETSECRETSECRETSECRETSECRETSECRETSECRETx";
  const VENDOR_KEY = "sk-VENDORKEYVENDORKEYVENDORKEY";

  /** What a proxy knows about a call whose client sent keys in every place a key can travel. */
  function callWithKeysAround(i: number): InteractionRecord {
    const body = JSON.stringify({ model: "gpt-4o", messages: [{ role: "user", content: `hello ${i}` }] });
    return buildRecord({
      store: "full",
      transactionId: `txn_secret_${i}`,
      projectId: "proj-a",
      keyId: "k1k2k3k4k5k6k7k8",
      vendor: "gemini",
      endpoint: `gemini:/v1beta/models/gemini-2.5-flash:generateContent?key=${SERVICE_KEY};${VENDOR_KEY}&alt=sse`,
      model: "gemini-2.5-flash",
      billingMode: "dual",
      statusCode: 200,
      streamed: true,
      startedAt: Date.UTC(2026, 0, 15, 8, 0, i),
      latencyMs: 10,
      usage: emptyUsage(),
      costMicros: 0,
      request: { text: body, bytes: body.length, truncated: false },
      response: { text: "{}", bytes: 2, truncated: false },
    });
  }

  async function writtenFile(records: InteractionRecord[]): Promise<Uint8Array> {
    const parts = await consumerParts();
    await createWarehouseConsumer(parts)(batchOf(records));
    const [key] = await parquetKeys(parts.objects);
    return readFileSync(parts.objects.pathOf(key as string));
  }

  it("hold no key: not in the bytes, not in any decoded value", async () => {
    const bytes = Buffer.from(await writtenFile([0, 1, 2].map(callWithKeysAround)));
    for (const secret of [SERVICE_KEY, VENDOR_KEY, "SECRETSECRET", "VENDORKEY", "dmt_k1k2"]) {
      expect(bytes.includes(secret)).toBe(false);
    }
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const decoded = JSON.stringify(await parquetReadObjects({ file }), (_, v) =>
      typeof v === "bigint" ? `${v}` : v,
    );
    expect(decoded).toContain("/v1beta/models/gemini-2.5-flash:generateContent");
    expect(decoded).not.toMatch(/SECRETSECRET|VENDORKEY|dmt_k1k2|key=/);
  });

  it("are snappy-compressed, with timestamps as TIMESTAMP(MILLIS, UTC), and read back by hyparquet", async () => {
    const records = [syntheticRecord(0), { ...syntheticRecord(1), audio_seconds: 1.5, images: 2 }];
    const bytes = await writtenFile(records);
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const metadata = parquetMetadata(file);
    const startedAt = metadata.schema.find((e) => e.name === "started_at");
    expect(startedAt?.logical_type).toEqual({ type: "TIMESTAMP", isAdjustedToUTC: true, unit: "MILLIS" });
    expect(metadata.row_groups[0]?.columns.every((c) => c.meta_data?.codec === "SNAPPY")).toBe(true);
    expect(metadata.key_value_metadata).toContainEqual({ key: "dmt.schema_version", value: "2" });

    const rows = await parquetReadObjects({ file });
    expect(rows[1]).toMatchObject({
      transaction_id: records[1]?.transaction_id,
      started_at: new Date(records[1]?.started_at as number),
      cost_micros: BigInt(records[1]?.cost_micros as number),
      audio_seconds: 1.5,
      images: 2,
      streamed: false,
      speech_characters: null,
      request_body: records[1]?.request_body,
    });
  });

  it("give back every value, large columns in several pages, with min/max in UTF-8 byte order", async () => {
    const records: InteractionRecord[] = Array.from({ length: 40 }, (_, i) => ({
      ...syntheticRecord(i),
      // Over a megabyte each: cut into pages. All nulls: an empty dictionary.
      request_body: i % 4 === 0 ? null : `${"Ünïcödé 日本語 🚀 ".repeat(4000)}${i}`,
      response_body: "x".repeat(100_000 + i),
      error_type: null,
      // "🚀" sorts after "～" as UTF-8 bytes, before it as UTF-16 units.
      user_id: ["～", "🚀", "z", null][i % 4] ?? null,
      audio_seconds: i % 3 === 0 ? i + 0.25 : null,
      cost_micros: i === 7 ? Number.MAX_SAFE_INTEGER : 1234 + i,
    }));
    const bytes = await writtenFile(records);
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const asRead = (r: InteractionRecord) => ({
      ...r,
      started_at: new Date(r.started_at),
      cost_micros: r.cost_micros === null ? null : BigInt(r.cost_micros),
      request_bytes: BigInt(r.request_bytes),
      response_bytes: BigInt(r.response_bytes),
    });
    expect(await parquetReadObjects({ file })).toEqual(records.map(asRead));
    // About a megabyte of values a page: 3.2 MB of request bodies, 4 MB of response bodies.
    expect(
      ["transaction_id", "user_id", "request_body", "response_body"].map((c) => dataPages(file, c)),
    ).toEqual([1, 1, 3, 4]);

    const statistics = (name: string) =>
      parquetMetadata(file).row_groups[0]?.columns.find((c) => c.meta_data?.path_in_schema[0] === name)
        ?.meta_data?.statistics;
    expect(statistics("user_id")).toMatchObject({ min_value: "z", max_value: "🚀", null_count: 10n });
    expect(statistics("started_at")).toMatchObject({
      min_value: new Date(records[0]?.started_at as number),
      max_value: new Date(records[39]?.started_at as number),
    });

    const path = join(dir, "read-back.parquet");
    writeFileSync(path, bytes);
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    // DuckDB skips a row group whose min/max exclude a filter's value: the count relies on them.
    const read = await connection.runAndReadAll(
      `SELECT (SELECT count(*) FROM read_parquet('${path}') WHERE user_id = '🚀') AS rockets,
        sum(length(response_body)) AS response, sum(strlen(request_body)) AS request,
        max(cost_micros) AS cost, count(audio_seconds) AS audio
       FROM read_parquet('${path}')`,
    );
    expect(read.getRowObjectsJS()).toEqual([
      {
        rockets: 10n,
        response: BigInt(records.reduce((sum, r) => sum + (r.response_body?.length ?? 0), 0)),
        request: BigInt(records.reduce((sum, r) => sum + Buffer.byteLength(r.request_body ?? ""), 0)),
        cost: BigInt(Number.MAX_SAFE_INTEGER),
        audio: 14n,
      },
    ]);
    connection.closeSync();
    instance.closeSync();
  });

  it("are read back by DuckDB with the declared types, partitions included", async () => {
    const parts = await consumerParts();
    await createWarehouseConsumer(parts)(batchOf([syntheticRecord(0), syntheticRecord(1)]));
    const instance = await DuckDBInstance.create(":memory:");
    const connection = await instance.connect();
    const glob = join(parts.objects.root, "interactions", "*", "*", "*.parquet");
    const described = await connection.runAndReadAll(
      `DESCRIBE SELECT * FROM read_parquet('${glob}', hive_partitioning = true, hive_types = {'project': VARCHAR, 'dt': VARCHAR})`,
    );
    const types = Object.fromEntries(described.getRowObjects().map((r) => [r.column_name, r.column_type]));
    const expected: Record<string, string> = {
      string: "VARCHAR",
      int32: "INTEGER",
      int64: "BIGINT",
      double: "DOUBLE",
      boolean: "BOOLEAN",
      timestamp: "TIMESTAMP WITH TIME ZONE",
    };
    expect(types).toEqual({
      ...Object.fromEntries(RECORD_COLUMNS.map((c) => [c.name, expected[c.kind]])),
      project: "VARCHAR",
      dt: "VARCHAR",
    });
    const read = await connection.runAndReadAll(
      `SELECT epoch_ms(started_at) AS ms, project, dt FROM read_parquet('${glob}', hive_partitioning = true, hive_types = {'project': VARCHAR, 'dt': VARCHAR}) ORDER BY ms`,
    );
    expect(read.getRowObjectsJS()).toEqual([
      { ms: BigInt(syntheticRecord(0).started_at), project: "proj-a", dt: "2026-01-15" },
      { ms: BigInt(syntheticRecord(1).started_at), project: "proj-a", dt: "2026-01-15" },
    ]);
    connection.closeSync();
    instance.closeSync();
  });

  it("are found by the DuckDB query layer only within their project's folders", async () => {
    const parts = await consumerParts();
    await createWarehouseConsumer(parts)(batchOf([syntheticRecord(0, { projectId: "proj-a" })]));
    const query = await DuckDBWarehouseQuery.open(parts.objects.root);
    const rows = async (projectId: string) => {
      const out: string[] = [];
      for await (const b of query.rows(
        { projectId, start: "2026-01-01", end: "2026-12-31", filters: {} },
        "json",
      ))
        out.push(...b);
      return out;
    };
    expect(await rows("proj-a")).toHaveLength(1);
    expect(await rows("proj-b")).toEqual([]);
    query.close();
  });
});
