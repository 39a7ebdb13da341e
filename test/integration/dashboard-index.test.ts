import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { type DynamoDBClient, GetItemCommand, PutItemCommand, QueryCommand } from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DynamoInteractionIndex,
  PAGE_SCAN_BUDGET,
  ROUND_RECORDS,
} from "../../lambda/adapters/dynamodb/interactions";
import { ROLLUP_CHUNK } from "../../lambda/adapters/dynamodb/rollups";
import { FileDeliveryLedger } from "../../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../../lambda/adapters/in-process/dead-letters";
import { parquetCodec } from "../../lambda/adapters/parquet/codec";
import { breakdownReport } from "../../lambda/core/breakdowns";
import { DAY_MS, entryPosition, parseListQuery, SUMMARY_FIELDS } from "../../lambda/core/interactions";
import { deltaOf, sumCounters } from "../../lambda/core/interactions-usage";
import { silentLogger } from "../../lambda/core/logger";
import { buildRecord, type InteractionRecord } from "../../lambda/core/record";
import { withoutBodies } from "../../lambda/core/retention";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import { createWarehouseConsumer } from "../../lambda/warehouse/consumer";

/**
 * The recent-interactions index and its rollups over dynalite, through the same adapter as in AWS:
 * listing with filters and cursors, exactly-once writes and purges however a crash interrupts them.
 */

let dir: string;
let local: LocalStore;
let index: DynamoInteractionIndex;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "dmt-index-"));
  local = await openLocalStore(dir);
  index = new DynamoInteractionIndex(local.db, local.tables);
});
afterAll(async () => {
  await local.close();
  rmSync(dir, { recursive: true, force: true });
});

const NOW = Date.now();
let sequence = 0;

function record(projectId: string, overrides: Partial<InteractionRecord> = {}): InteractionRecord {
  sequence++;
  return {
    ...buildRecord({
      store: "full",
      transactionId: `tx-${process.pid}-${sequence}`,
      projectId,
      keyId: "abcdefghijklmnop",
      vendor: "openai",
      endpoint: "/v1/chat/completions",
      model: "gpt-4o-mini",
      billingMode: "managed",
      statusCode: 200,
      streamed: false,
      startedAt: NOW - sequence * 1000,
      latencyMs: 100,
      usage: {
        inputTokens: 10,
        outputTokens: 5,
        cachedInputTokens: 0,
        cacheWriteTokens: 0,
        reasoningTokens: 0,
        estimated: false,
        complete: true,
      },
      costMicros: 12,
      request: { bytes: 30, text: '{"messages":[]}', truncated: false },
      response: { bytes: 30, text: '{"choices":[]}', truncated: false },
    }),
    ...overrides,
  };
}

const query = (projectId: string, params: Record<string, string> = {}) =>
  parseListQuery(projectId, Object.fromEntries(Object.entries(params).map(([k, v]) => [k, [v]])), NOW);

/** Every page of a listing, following cursors. */
async function listAll(projectId: string, params: Record<string, string> = {}) {
  const rows: string[] = [];
  let pages = 0;
  let after: string | undefined;
  do {
    const page = await index.list({ ...query(projectId, params), ...(after ? { after } : {}) });
    rows.push(...page.interactions.map((i) => i.transaction_id));
    after = page.next;
    pages++;
  } while (after);
  return { rows, pages };
}

async function totals(projectId: string) {
  const day = new Date(NOW).toISOString().slice(0, 10);
  const from = new Date(NOW - 2 * DAY_MS).toISOString().slice(0, 10);
  return sumCounters(await index.rollups.query(projectId, from, day));
}

/** The project's usage by key or by user over the last three days. */
async function breakdown(projectId: string, by: "key" | "user") {
  const day = new Date(NOW).toISOString().slice(0, 10);
  const from = new Date(NOW - 2 * DAY_MS).toISOString().slice(0, 10);
  return breakdownReport(await index.rollups.breakdown(projectId, by, from, day), by, from, day);
}

/** Every item of the project in the interactions table, as stored. */
async function storedItems(projectId: string) {
  const out = await local.db.send(
    new QueryCommand({
      TableName: local.tables.interactions,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: { ":p": { S: projectId } },
      ConsistentRead: true,
    }),
  );
  return (out.Items ?? []).map((item) => unmarshall(item));
}

/** Items as the index wrote them before packs: an entry with its filter keys, and the record gzipped. */
async function writeBeforePacks(
  records: readonly InteractionRecord[],
  entry: { modelSearch?: boolean } = {},
) {
  for (const r of records) {
    const summary = Object.fromEntries(SUMMARY_FIELDS.map((field) => [field, r[field]]));
    const items = [
      {
        projectId: r.project_id,
        sk: `e#${entryPosition(r.started_at, r.transaction_id)}`,
        ...summary,
        ...(entry.modelSearch === false || r.model === null ? {} : { model_search: r.model.toLowerCase() }),
        vendorKey: `${r.project_id}#${r.vendor}`,
        billingKey: `${r.project_id}#${r.billing_mode}`,
      },
      { projectId: r.project_id, sk: `r#${r.transaction_id}`, recordGz: gzipSync(JSON.stringify(r)) },
    ];
    for (const item of items) {
      await local.db.send(
        new PutItemCommand({
          TableName: local.tables.interactions,
          Item: marshall(item, { removeUndefinedValues: true }),
        }),
      );
    }
  }
}

/** Every rollups item of the project as stored, whatever its kind. */
async function rollupItems(projectId: string) {
  const out = await local.db.send(
    new QueryCommand({
      TableName: local.tables.usageRollups,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: { ":p": { S: projectId } },
      ConsistentRead: true,
    }),
  );
  return (out.Items ?? []).map((item) => unmarshall(item));
}

const markersOf = (item: Record<string, unknown> | undefined) =>
  Object.keys(item ?? {}).filter((k) => k.startsWith("m_"));

/** A client that fails the first command `crash` picks, as a process dying at that step would. */
function crashingAt(crash: (command: { constructor: { name: string }; input: unknown }) => boolean) {
  let crashed = false;
  const db = local.db;
  const faulty = Object.create(db) as DynamoDBClient;
  faulty.send = ((command: { constructor: { name: string }; input: unknown }) => {
    if (!crashed && crash(command)) {
      crashed = true;
      return Promise.reject(new Error("simulated crash"));
    }
    return db.send(command as never);
  }) as DynamoDBClient["send"];
  return { index: new DynamoInteractionIndex(faulty, local.tables), crashed: () => crashed };
}

const writes = (prefix: string) => (command: { constructor: { name: string }; input: unknown }) =>
  command.constructor.name === "BatchWriteItemCommand" &&
  JSON.stringify(command.input).includes("PutRequest") &&
  JSON.stringify(command.input).includes(`"sk":{"S":"${prefix}`);
/** The `n`th command (from 1) that `pick` picks. */
const nth =
  (pick: (command: { constructor: { name: string }; input: unknown }) => boolean, n: number) =>
  (command: { constructor: { name: string }; input: unknown }) =>
    pick(command) && --n === 0;
const updateWith = (word: string) => (command: { constructor: { name: string }; input: unknown }) =>
  command.constructor.name === "UpdateItemCommand" &&
  String((command.input as { UpdateExpression?: string }).UpdateExpression).startsWith(word);
const deletes = (prefix: string) => (command: { constructor: { name: string }; input: unknown }) =>
  (command.constructor.name === "DeleteItemCommand" ||
    command.constructor.name === "BatchWriteItemCommand") &&
  !JSON.stringify(command.input).includes("PutRequest") &&
  JSON.stringify(command.input).includes(`"S":"${prefix}`);
const rewritesPack = (command: { constructor: { name: string }; input: unknown }) =>
  (command.constructor.name === "PutItemCommand" || command.constructor.name === "DeleteItemCommand") &&
  JSON.stringify(command.input).includes('"S":"p#');

describe("listing", () => {
  it("pages through a project's interactions newest first, never another project's", async () => {
    const mine = Array.from({ length: 130 }, (_, i) =>
      record("list-a", {
        vendor: i % 3 === 0 ? "groq" : "openai",
        user_id: i % 10 === 0 ? "<i>u</i>" : null,
      }),
    );
    const theirs = Array.from({ length: 40 }, () => record("list-b"));
    await index.write([...mine, ...theirs]);

    const expected = [...mine].sort((a, b) => b.started_at - a.started_at).map((r) => r.transaction_id);
    const { rows, pages } = await listAll("list-a");
    expect(rows).toEqual(expected);
    expect(pages).toBe(3);
    expect((await listAll("list-b")).rows).toHaveLength(40);

    const groq = await listAll("list-a", { vendor: "groq" });
    expect(groq.rows).toEqual(
      expected.filter((id) => mine.find((r) => r.transaction_id === id)?.vendor === "groq"),
    );
    const user = await listAll("list-a", { user_id: "<i>u</i>", vendor: "openai" });
    expect(user.rows).toEqual(
      mine
        .filter((r) => r.user_id === "<i>u</i>" && r.vendor === "openai")
        .sort((a, b) => b.started_at - a.started_at)
        .map((r) => r.transaction_id),
    );
  });

  it("merges packs of one bucket that overlap in time, and reads only the packs a page needs", async () => {
    const projectId = `overlap-${++sequence}`;
    const start = Math.floor((NOW - DAY_MS) / 10_000) * 10_000;
    // Three batches of the same 10 seconds, interleaved in time: each one pack (or more) of its own.
    const batches = [0, 1, 2].map((b) =>
      Array.from({ length: 100 }, (_, i) => record(projectId, { started_at: start + i * 30 + b * 10 })),
    );
    for (const batch of batches) await index.write(batch);
    const newest = batches
      .flat()
      .sort((a, b) => b.started_at - a.started_at)
      .map((r) => r.transaction_id);
    expect((await listAll(projectId, { limit: "7" })).rows).toEqual(newest);

    // 150 packs of one call each in one bucket (a quiet project's batches): the first page reads one
    // round of packs (a Query of up to 100), not the whole bucket.
    const crowded = `crowded-${++sequence}`;
    for (let b = 0; b < 150; b++) await index.write([record(crowded, { started_at: start + b })]);
    let packsRead = 0;
    const counting = Object.create(local.db) as DynamoDBClient;
    counting.send = (async (command: { constructor: { name: string } }) => {
      const out = await local.db.send(command as never);
      if (command.constructor.name === "QueryCommand") {
        packsRead += ((out as { Items?: { sk?: { S?: string } }[] }).Items ?? []).filter((item) =>
          item.sk?.S?.startsWith("p#"),
        ).length;
      }
      return out;
    }) as DynamoDBClient["send"];
    const page = await new DynamoInteractionIndex(counting, local.tables).list(query(crowded));
    expect(page.interactions).toHaveLength(50);
    expect(page.interactions[0]?.started_at).toBe(start + 149);
    expect(packsRead).toBeLessThanOrEqual(100);
  });

  it("answers a sparse filter with partial pages and a cursor rather than reading everything", async () => {
    const failures = Array.from({ length: PAGE_SCAN_BUDGET + 200 }, () =>
      record("sparse", { status_code: 500, error_type: "vendor_error", error_code: "500" }),
    );
    const teapot = record("sparse", { status_code: 418, started_at: NOW - 10 * DAY_MS });
    await index.write([...failures, teapot]);
    const first = await index.list(query("sparse", { status: "418" }));
    expect(first.interactions).toEqual([]);
    expect(first.next).toBeDefined();
    const { rows, pages } = await listAll("sparse", { status: "418" });
    expect(rows).toEqual([teapot.transaction_id]);
    expect(pages).toBeGreaterThan(1);
    expect((await listAll("sparse", { status: "error", limit: "100" })).rows).toHaveLength(
      failures.length + 1,
    );
  });

  it("keeps to the day range, both ends included", async () => {
    const day = Date.UTC(2026, 0, 15);
    const edges = [day - 1, day, day + DAY_MS - 1, day + DAY_MS].map((startedAt) =>
      record("range", { started_at: startedAt }),
    );
    await index.write(edges);
    const inRange = await index.list({ ...query("range"), since: day, until: day + DAY_MS });
    expect(inRange.interactions.map((i) => i.started_at)).toEqual([day + DAY_MS - 1, day]);
  });

  it("counts a stream broken after its 200 as failed, and still finds it by its status code", async () => {
    const broken = record("broken", { error_type: "upstream_error", error_code: "upstream_reset" });
    const fine = record("broken");
    await index.write([broken, fine]);
    expect((await listAll("broken", { status: "error" })).rows).toEqual([broken.transaction_id]);
    expect((await listAll("broken", { status: "success" })).rows).toEqual([fine.transaction_id]);
    // Newest first: `broken` was made first, so it started later.
    expect((await listAll("broken", { status: "200" })).rows).toEqual([
      broken.transaction_id,
      fine.transaction_id,
    ]);
  });

  it("keeps a call as a pointer and its share of a pack, plus an entry in its user's, the failures' or its billing mode's list: 120 calls of 10 seconds are 120 pointers, 2 packs of two items and 72 list entries", async () => {
    const start = Math.floor((NOW - DAY_MS) / 10_000) * 10_000;
    const calls = Array.from({ length: 120 }, (_, i) =>
      record("packed", {
        started_at: start + i * 50,
        status_code: i % 7 === 0 ? 500 : 200,
        error_type: i % 7 === 0 ? "vendor_error" : null,
        billing_mode: i % 5 === 0 ? "byok" : "managed",
        user_id: i % 4 === 0 ? "una" : null,
      }),
    );
    await index.write(calls);
    const items = await storedItems("packed");
    const kinds = items.map((item) => (item.sk as string).slice(0, 2));
    expect(kinds.filter((k) => k === "t#")).toHaveLength(120);
    expect(kinds.filter((k) => k === "p#")).toHaveLength(2);
    expect(kinds.filter((k) => k === "q#")).toHaveLength(2);
    // Only the calls that name a user (i % 4 = 0), failed (i % 7 = 0) or are not managed (i % 5 = 0).
    expect(kinds.filter((k) => k === "u#")).toHaveLength(30);
    expect(kinds.filter((k) => k === "x#")).toHaveLength(18);
    expect(kinds.filter((k) => k === "b#")).toHaveLength(24);
    expect(items).toHaveLength(196);
    // A listing reads the summaries only: no body is in a `p#` item.
    const summaries = JSON.stringify(items.filter((item) => String(item.sk).startsWith("p#")));
    expect(summaries).not.toContain("recordsGz");
    // No attribute of any item feeds a filter index.
    for (const attribute of ["userKey", "vendorKey", "statusKey", "billingKey"]) {
      expect(items.filter((item) => attribute in item)).toEqual([]);
    }
    const newest = [...calls].reverse();
    const ids = (list: InteractionRecord[]) => list.map((r) => r.transaction_id);
    expect((await listAll("packed")).rows).toEqual(ids(newest));
    expect((await listAll("packed", { status: "error" })).rows).toEqual(
      ids(newest.filter((r) => r.status_code === 500)),
    );
    expect((await listAll("packed", { status: "success" })).rows).toEqual(
      ids(newest.filter((r) => r.status_code === 200)),
    );
    expect((await listAll("packed", { billing_mode: "managed", user_id: "una" })).rows).toEqual(
      ids(newest.filter((r) => r.billing_mode === "managed" && r.user_id === "una")),
    );
    expect((await listAll("packed", { billing_mode: "byok" })).rows).toEqual(
      ids(newest.filter((r) => r.billing_mode === "byok")),
    );
    expect((await listAll("packed", { status: "500", billing_mode: "byok" })).rows).toEqual(
      ids(newest.filter((r) => r.status_code === 500 && r.billing_mode === "byok")),
    );
    expect(await index.get("packed", calls[77]?.transaction_id ?? "")).toEqual(calls[77]);
  });

  it("lists, filters, opens, purges and expires interactions written before packs, merged with packed ones in order", async () => {
    const day = new Date(NOW - 5 * DAY_MS).toISOString().slice(0, 10);
    const start = Date.parse(`${day}T12:00:00Z`);
    const calls = Array.from({ length: 30 }, (_, i) =>
      record("mixed", {
        started_at: start + i * 1000,
        vendor: i % 2 ? "groq" : "openai",
        user_id: i % 3 === 0 ? "vera" : null,
      }),
    );
    const before = calls.filter((_, i) => i % 3 !== 1);
    const packed = calls.filter((_, i) => i % 3 === 1);
    await writeBeforePacks(before);
    await index.write(packed);
    // A transaction written before packs and sent again is not added twice.
    await index.write([before[0] as InteractionRecord]);
    const range = { from: day, to: day, limit: "7" };
    const newest = [...calls].reverse();
    const ids = (list: InteractionRecord[]) => list.map((r) => r.transaction_id);
    const all = await listAll("mixed", range);
    expect(all.rows).toEqual(ids(newest));
    expect(all.pages).toBe(5);
    expect((await listAll("mixed", { ...range, vendor: "groq" })).rows).toEqual(
      ids(newest.filter((r) => r.vendor === "groq")),
    );
    expect(await index.get("mixed", before[3]?.transaction_id ?? "")).toEqual(before[3]);
    expect(await index.get("mixed", packed[3]?.transaction_id ?? "")).toEqual(packed[3]);

    expect(await index.purgeUser("mixed", "vera")).toBe(10);
    const kept = newest.filter((r) => r.user_id !== "vera");
    expect((await listAll("mixed", range)).rows).toEqual(ids(kept));
    expect(JSON.stringify(await storedItems("mixed"))).not.toContain("vera");

    const nextDay = new Date(start + DAY_MS).toISOString().slice(0, 10);
    const blanked = await index.expire("mixed", { bodiesBefore: nextDay });
    expect(blanked).toEqual({ removed: 0, blanked: 20 });
    const opened = await index.get("mixed", kept[0]?.transaction_id ?? "");
    expect(opened).toEqual(withoutBodies(kept[0] as InteractionRecord));
    expect(await index.expire("mixed", { recordsBefore: nextDay })).toEqual({ removed: 20, blanked: 0 });
    expect((await listAll("mixed", range)).rows).toEqual([]);
    expect(await storedItems("mixed")).toEqual([]);
  });

  it("finds a long user id through its hashed key, and a model by any part of its name in any case", async () => {
    const long = record("hashed", { model: "m".repeat(300), user_id: "u".repeat(256) });
    const other = record("hashed", { model: `${"m".repeat(299)}n` });
    await index.write([long, other]);
    expect((await listAll("hashed", { model: "m".repeat(256) })).rows).toEqual([
      long.transaction_id,
      other.transaction_id,
    ]);
    expect((await listAll("hashed", { model: ` ${"M".repeat(200)}N ` })).rows).toEqual([
      other.transaction_id,
    ]);
    const byUser = await index.list(query("hashed", { user_id: "u".repeat(256) }));
    expect(byUser.interactions.map((i) => i.transaction_id)).toEqual([long.transaction_id]);
  });

  it("filters by key, and by part of a model name together with other filters", async () => {
    const mini = record("by-key", { model: "GPT-4o-mini", key_id: "aaaaaaaaaaaaaaaa" });
    const big = record("by-key", { model: "gpt-4o", key_id: "bbbbbbbbbbbbbbbb" });
    const claude = record("by-key", {
      model: "claude-haiku-4-5",
      vendor: "anthropic",
      key_id: "aaaaaaaaaaaaaaaa",
    });
    await index.write([mini, big, claude]);
    expect((await listAll("by-key", { key_id: "aaaaaaaaaaaaaaaa" })).rows).toEqual([
      mini.transaction_id,
      claude.transaction_id,
    ]);
    expect((await listAll("by-key", { model: "4O" })).rows).toEqual([
      mini.transaction_id,
      big.transaction_id,
    ]);
    expect((await listAll("by-key", { model: "mini", key_id: "bbbbbbbbbbbbbbbb" })).rows).toEqual([]);
    expect(
      (await listAll("by-key", { model: "4o", vendor: "openai", key_id: "bbbbbbbbbbbbbbbb" })).rows,
    ).toEqual([big.transaction_id]);
    // An entry written before the lower-cased copy existed is found on its model in any case.
    const older = record("by-key", { model: "gpt-4o-older" });
    await writeBeforePacks([older], { modelSearch: false });
    expect((await listAll("by-key", { model: "OLDER" })).rows).toEqual([older.transaction_id]);
    // The summary a row shows has no index attribute.
    const [row] = (await index.list(query("by-key", { model: "haiku" }))).interactions;
    expect(row && Object.keys(row)).not.toContain("model_search");
  });

  it("opens the whole record of one interaction of the project only", async () => {
    const r = record("detail", { response_body: '{"choices":[{"message":{"content":"hi"}}]}' });
    await index.write([r]);
    expect(await index.get("detail", r.transaction_id)).toEqual(r);
    expect(await index.get("list-a", r.transaction_id)).toBeUndefined();
  });
});

describe("writing", () => {
  it("counts each transaction once however often it is written", async () => {
    const batch = [
      record("once"),
      record("once", { billing_mode: "byok", cost_micros: null }),
      record("once"),
    ];
    await index.write(batch);
    await index.write(batch);
    await index.write([batch[1] as InteractionRecord, batch[1] as InteractionRecord]);
    expect(await totals("once")).toEqual(sumCounters(batch.map(deltaOf)));
    expect((await listAll("once")).rows).toHaveLength(3);
  });

  it("adds each call to its key's row and its user's row, once, with what credits paid", async () => {
    const batch = [
      record("by-dimension", { user_id: "ann", key_id: "aaaaaaaaaaaaaaaa" }),
      record("by-dimension", { user_id: "ann", key_id: "bbbbbbbbbbbbbbbb", billing_mode: "byok" }),
      record("by-dimension", { user_id: null, key_id: "aaaaaaaaaaaaaaaa", cost_micros: null }),
    ];
    await index.write(batch);
    await index.write(batch);
    const byKey = await breakdown("by-dimension", "key");
    expect(byKey.lines.map((l) => [l.id, l.requests, l.cost_micros, l.charged_micros])).toEqual([
      ["aaaaaaaaaaaaaaaa", 2, 12, 12],
      ["bbbbbbbbbbbbbbbb", 1, 12, 0],
    ]);
    const byUser = await breakdown("by-dimension", "user");
    expect(byUser.lines.map((l) => [l.id, l.requests, l.input_tokens])).toEqual([["ann", 2, 20]]);
    expect(byKey.totals.requests).toBe((await totals("by-dimension")).requests);
  });

  it("keeps a rollup item's markers to one round's, however many records a batch holds", async () => {
    const projectId = `big-batch-${++sequence}`;
    // One bucket, one model and one key: every record of the batch goes to the same rollup items.
    const batch = Array.from({ length: 10 * ROUND_RECORDS }, (_, i) =>
      record(projectId, { started_at: NOW - 5_000 + i }),
    );
    let most = 0;
    const observed = Object.create(local.db) as DynamoDBClient;
    observed.send = (async (command: { constructor: { name: string }; input: { Key?: unknown } }) => {
      const out = await local.db.send(command as never);
      if (updateWith("ADD")(command)) {
        const item = await local.db.send(
          new GetItemCommand({
            TableName: local.tables.usageRollups,
            Key: command.input.Key as never,
            ConsistentRead: true,
          }),
        );
        most = Math.max(most, markersOf(item.Item).length);
      }
      return out;
    }) as DynamoDBClient["send"];
    await new DynamoInteractionIndex(observed, local.tables).write(batch);
    expect(most).toBe(ROUND_RECORDS);
    expect(await totals(projectId)).toEqual(sumCounters(batch.map(deltaOf)));
    expect((await rollupItems(projectId)).flatMap(markersOf)).toEqual([]);
    expect((await listAll(projectId)).rows).toHaveLength(batch.length);
  });

  it.each([
    ["the pointer write", writes("t#")],
    // A round's pointers go in writes of DynamoDB's 25: the next write after them is the second round's.
    ["the second round's pointer write", nth(writes("t#"), ROUND_RECORDS / 25 + 1)],
    ["the rollup addition", updateWith("ADD")],
    ["the records' write", writes("q#")],
    ["the users' entries write", writes("u#")],
    ["the summaries' write", writes("p#")],
    ["the marker removal", updateWith("REMOVE")],
  ])("counts each transaction once when a crash stops %s and the batch comes again", async (_, step) => {
    const projectId = `crash-${++sequence}`;
    // More than one rollup update's worth of records, in two rounds.
    const count = ROUND_RECORDS + ROLLUP_CHUNK + 5;
    const batch = Array.from({ length: count }, (_, i) =>
      record(projectId, { user_id: i % 2 ? "ula" : null }),
    );
    const crashing = crashingAt(step);
    await expect(crashing.index.write(batch)).rejects.toThrow("simulated crash");
    expect(crashing.crashed()).toBe(true);
    await index.write(batch);
    expect((await listAll(projectId, { user_id: "ula" })).rows).toHaveLength(Math.floor(count / 2));
    expect(await totals(projectId)).toEqual(sumCounters(batch.map(deltaOf)));
    expect((await breakdown(projectId, "key")).totals.requests).toBe(count);
    expect((await rollupItems(projectId)).flatMap(markersOf)).toEqual([]);
    expect((await listAll(projectId)).rows).toHaveLength(count);
  });
});

describe("purging", () => {
  it("takes a user's interactions out of the index; the totals stay, the user's rows lose the user id", async () => {
    const alice = [
      record("purge-user", { user_id: "alice" }),
      record("purge-user", { user_id: "alice", started_at: NOW - DAY_MS }),
    ];
    const bob = [record("purge-user", { user_id: "bob" })];
    await index.write([...alice, ...bob]);
    const before = await totals("purge-user");
    const keysBefore = await breakdown("purge-user", "key");
    expect(await index.purgeUser("purge-user", "alice")).toBe(2);
    expect(await index.purgeUser("purge-user", "alice")).toBe(0);
    expect((await listAll("purge-user")).rows).toEqual([bob[0]?.transaction_id]);
    expect(await index.get("purge-user", alice[0]?.transaction_id ?? "")).toBeUndefined();
    // Billing totals are kept: the model rollups and the key's rows as they were.
    expect(await totals("purge-user")).toEqual(before);
    expect(await breakdown("purge-user", "key")).toEqual(keysBefore);
    // Alice's figures are a deleted user's now, one row a day; her id is nowhere in the rollups.
    const users = await breakdown("purge-user", "user");
    expect(users.lines.map((l) => [l.id, l.deleted, l.requests])).toEqual([
      [null, true, 2],
      ["bob", false, 1],
    ]);
    expect(users.totals.requests).toBe(3);
    expect(JSON.stringify(await rollupItems("purge-user"))).not.toContain("alice");
  });

  it.each([
    ["naming the move", updateWith("SET moveTo")],
    [
      "the copy",
      (command: { constructor: { name: string } }) => command.constructor.name === "PutItemCommand",
    ],
    ["the row's removal", deletes("u#")],
  ])(
    "moves a deleted user's rows once when a crash stops %s and the deletion runs again",
    async (_, step) => {
      const projectId = `forget-crash-${++sequence}`;
      const calls = [
        record(projectId, { user_id: "carol" }),
        record(projectId, { user_id: "carol", started_at: NOW - DAY_MS }),
        record(projectId, { user_id: "dave" }),
      ];
      await index.write(calls);
      const crashing = crashingAt(step);
      await expect(crashing.index.purgeUser(projectId, "carol")).rejects.toThrow("simulated crash");
      await index.purgeUser(projectId, "carol");
      await index.purgeUser(projectId, "carol");
      const users = await breakdown(projectId, "user");
      expect(users.lines.map((l) => [l.id, l.requests, l.cost_micros])).toEqual([
        [null, 2, 24],
        ["dave", 1, 12],
      ]);
      expect(JSON.stringify(await rollupItems(projectId))).not.toContain("carol");
    },
  );

  it("lists a transaction a slow writer packed twice once, and purges it from both packs", async () => {
    const projectId = `twice-${++sequence}`;
    const start = Math.floor((NOW - DAY_MS) / 10_000) * 10_000;
    const [twice, other] = [
      record(projectId, { started_at: start + 1 }),
      record(projectId, { started_at: start + 2 }),
    ];
    await index.write([twice, other]);
    // What a writer that lost its batch to a retry, and went on, leaves: the same calls in another pack.
    for (const item of (await storedItems(projectId)).filter((item) => /^[pq]#/.test(String(item.sk)))) {
      const copy = { ...item, sk: `${String(item.sk)}-slow-writer` };
      await local.db.send(new PutItemCommand({ TableName: local.tables.interactions, Item: marshall(copy) }));
    }
    expect((await listAll(projectId)).rows).toEqual([other.transaction_id, twice.transaction_id]);
    expect(await index.purgeTransactions(projectId, [twice.transaction_id])).toBe(1);
    expect((await listAll(projectId)).rows).toEqual([other.transaction_id]);
    expect(JSON.stringify(await storedItems(projectId))).not.toContain(twice.transaction_id);
  });

  it("loses no purge and no blanking when they rewrite the same pack at once", async () => {
    const projectId = `contended-${++sequence}`;
    const start = Math.floor((NOW - DAY_MS) / 10_000) * 10_000;
    const calls = Array.from({ length: 20 }, (_, i) => record(projectId, { started_at: start + i }));
    await index.write(calls);
    const gone = calls.filter((_, i) => i % 2 === 0);
    const tomorrow = new Date(NOW + DAY_MS).toISOString().slice(0, 10);
    await Promise.all([
      ...gone.map((r) => index.purgeTransactions(projectId, [r.transaction_id])),
      index.expire(projectId, { bodiesBefore: tomorrow }),
    ]);
    const kept = calls.filter((_, i) => i % 2 === 1);
    expect((await listAll(projectId)).rows).toEqual(kept.map((r) => r.transaction_id).reverse());
    for (const r of kept) expect(await index.get(projectId, r.transaction_id)).toEqual(withoutBodies(r));
  });

  it("purges transactions of its project only, ignoring unknown ids, and keeps their figures", async () => {
    const mine = record("purge-tx");
    const theirs = record("purge-other");
    await index.write([mine, theirs]);
    expect(await index.purgeTransactions("purge-tx", [theirs.transaction_id, "no-such-tx"])).toBe(0);
    expect((await listAll("purge-other")).rows).toEqual([theirs.transaction_id]);
    expect(await index.purgeTransactions("purge-tx", [mine.transaction_id, mine.transaction_id])).toBe(1);
    expect((await listAll("purge-tx")).rows).toEqual([]);
    expect(await totals("purge-tx")).toEqual(sumCounters([deltaOf(mine)]));
  });

  it.each([
    ["the user's entry delete", deletes("u#")],
    ["the pack rewrite", rewritesPack],
    ["the pointer delete", deletes("t#")],
  ])("purges once when a crash stops %s and the purge runs again", async (_, step) => {
    const projectId = `purge-crash-${++sequence}`;
    const kept = record(projectId);
    const gone = record(projectId, { user_id: "gwen" });
    await index.write([kept, gone]);
    const crashing = crashingAt(step);
    await expect(crashing.index.purgeTransactions(projectId, [gone.transaction_id])).rejects.toThrow(
      "simulated crash",
    );
    expect(await index.purgeTransactions(projectId, [gone.transaction_id])).toBe(1);
    expect(await index.purgeTransactions(projectId, [gone.transaction_id])).toBe(0);
    expect(await totals(projectId)).toEqual(sumCounters([deltaOf(kept), deltaOf(gone)]));
    expect((await listAll(projectId)).rows).toEqual([kept.transaction_id]);
    expect((await listAll(projectId, { user_id: "gwen" })).rows).toEqual([]);
    expect(JSON.stringify(await storedItems(projectId))).not.toContain(gone.transaction_id);
  });
});

describe("stored records", () => {
  const rawRecordItem = async (projectId: string, transactionId: string) =>
    unmarshall(
      (
        await local.db.send(
          new GetItemCommand({
            TableName: local.tables.interactions,
            Key: marshall({ projectId, sk: `r#${transactionId}` }),
          }),
        )
      ).Item ?? {},
    );
  /** A record item as written before records were gzipped: the record as a map. */
  const putAsMap = (r: InteractionRecord) =>
    local.db.send(
      new PutItemCommand({
        TableName: local.tables.interactions,
        Item: marshall(
          { projectId: r.project_id, sk: `r#${r.transaction_id}`, record: r },
          { removeUndefinedValues: true },
        ),
      }),
    );
  const chat = (projectId: string) =>
    record(projectId, {
      request_body: JSON.stringify({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: "Write one short sentence about benchmarks." }],
      }),
      response_body: JSON.stringify({
        id: "chatcmpl-1",
        object: "chat.completion",
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content:
                "Benchmarks measure how fast a system answers under a given load, and a fair one runs every candidate on the same machine, in turn, with the same warm-up and the same requests, so that what differs is the system and not the moment. Medians over several rounds keep a noisy neighbour from deciding the result, and ratios measured in one run say more than absolute figures taken on different days.",
            },
            finish_reason: "stop",
          },
        ],
        usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 },
      }),
    });

  it("keeps records gzipped in packs, far smaller than their JSON, and gives each back whole", async () => {
    const start = Math.floor((NOW - DAY_MS) / 10_000) * 10_000;
    const calls = Array.from({ length: 100 }, (_, i) => ({ ...chat("stored-gz"), started_at: start + i }));
    await index.write(calls);
    const packs = (await storedItems("stored-gz")).filter((item) => /^[pq]#/.test(String(item.sk)));
    expect(packs).toHaveLength(2);
    const json = calls.reduce((bytes, r) => bytes + JSON.stringify(r).length, 0);
    expect(json).toBeGreaterThan(100 * 1024);
    // In AWS a write unit per KB of item: a pack of 100 chat calls is ~10 units where their JSON is ~100.
    const gzipped = packs.reduce(
      (bytes, item) => bytes + ((item.recordsGz ?? item.entriesGz) as Uint8Array).byteLength,
      0,
    );
    expect(gzipped).toBeLessThan(json / 8);
    for (const r of [calls[0], calls[57], calls[99]]) {
      expect(await index.get("stored-gz", r?.transaction_id ?? "")).toEqual(r);
    }
  });

  it("starts a new pack before one would outgrow a DynamoDB item", async () => {
    const start = Math.floor((NOW - DAY_MS) / 10_000) * 10_000;
    // 8 records of ~60 KB of JSON each, in one bucket: more than one item's 400 KB together.
    const calls = Array.from({ length: 8 }, (_, i) =>
      record("stored-big", { started_at: start + i, response_body: randomBytes(30_000).toString("hex") }),
    );
    await index.write(calls);
    const packs = (await storedItems("stored-big")).filter((item) => String(item.sk).startsWith("q#"));
    expect(packs.length).toBeGreaterThan(1);
    for (const pack of packs) {
      expect((pack.recordsGz as Uint8Array).byteLength).toBeLessThan(400 * 1024 - 200); // 200: keys, `v`, `gcAt`
    }
    expect((await listAll("stored-big")).rows).toEqual(calls.map((r) => r.transaction_id).reverse());
    expect(await index.get("stored-big", calls[5]?.transaction_id ?? "")).toEqual(calls[5]);
  });

  it("reads, blanks and purges a record stored as a map before", async () => {
    const [blanked, purged] = [chat("stored-map"), chat("stored-map")];
    await writeBeforePacks([blanked, purged]);
    await putAsMap(blanked);
    await putAsMap(purged);
    expect((await rawRecordItem("stored-map", blanked.transaction_id)).record).toEqual(blanked);
    expect(await index.get("stored-map", blanked.transaction_id)).toEqual(blanked);

    const tomorrow = new Date(NOW + DAY_MS).toISOString().slice(0, 10);
    expect(await index.expire("stored-map", { bodiesBefore: tomorrow })).toEqual({ removed: 0, blanked: 2 });
    const after = await index.get("stored-map", blanked.transaction_id);
    expect(after).toEqual({ ...withoutBodies(blanked) });
    expect(after?.request_body).toBeNull();
    expect((await rawRecordItem("stored-map", blanked.transaction_id)).recordGz).toBeInstanceOf(Uint8Array);

    await putAsMap(purged);
    expect(await index.purgeTransactions("stored-map", [purged.transaction_id])).toBe(1);
    expect(await index.get("stored-map", purged.transaction_id)).toBeUndefined();
    expect((await listAll("stored-map")).rows).toEqual([blanked.transaction_id]);
  });

  it("refuses a record it cannot read with an error that names the item, not its content", async () => {
    const [packed, before] = [chat("stored-bad"), chat("stored-bad")];
    await index.write([packed]);
    await writeBeforePacks([before]);
    const [pack] = (await storedItems("stored-bad")).filter((item) => String(item.sk).startsWith("q#"));
    await local.db.send(
      new PutItemCommand({
        TableName: local.tables.interactions,
        Item: marshall({ ...pack, recordsGz: Buffer.from("not gzip at all") }),
      }),
    );
    await local.db.send(
      new PutItemCommand({
        TableName: local.tables.interactions,
        Item: marshall({
          projectId: "stored-bad",
          sk: `r#${before.transaction_id}`,
          recordGz: Buffer.from("not gzip at all"),
        }),
      }),
    );
    const failure = (id: string) =>
      index.get("stored-bad", id).then(
        () => undefined,
        (err: Error) => err.message,
      );
    expect(await failure(packed.transaction_id)).toBe(
      `The stored pack ${pack?.sk} of project stored-bad is unreadable`,
    );
    expect(await failure(before.transaction_id)).toBe(
      `The stored record r#${before.transaction_id} of project stored-bad is unreadable`,
    );
    expect((await listAll("stored-bad")).rows).toEqual([packed.transaction_id, before.transaction_id]);
  });
});

describe("the warehouse consumer's listener", () => {
  it("gets records once they are written, and again when a failed listener's batch comes back", async () => {
    const root = join(dir, `consumer-${++sequence}`);
    const objects = new FsObjectStore(join(root, "warehouse"));
    const ledger = await FileDeliveryLedger.open(join(root, "ledger"));
    // One day, so one warehouse file.
    const midnight = NOW - (NOW % DAY_MS);
    const records = Array.from({ length: 12 }, (_, i) => record("consumer", { started_at: midnight + i }));
    const batch = {
      Records: records.map((r, i) => ({
        messageId: `m${i}`,
        body: JSON.stringify(r),
        attributes: { ApproximateReceiveCount: "1" },
      })),
    };
    const consumerWith = (listener: DynamoInteractionIndex) =>
      createWarehouseConsumer({
        objects,
        codec: parquetCodec,
        ledger,
        deadLetters: new FolderDeadLetters(objects),
        logger: silentLogger,
        onWritten: [(written) => listener.write(written)],
      });

    // The index write fails half way: the warehouse file is written, the messages are failed.
    const failed = await consumerWith(crashingAt(writes("p#")).index)(batch);
    expect(failed.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(
      batch.Records.map((m) => m.messageId).sort(),
    );
    // Redelivered: the file is not written twice, the index is completed and counts each record once.
    const retried = await consumerWith(index)(batch);
    expect(retried.batchItemFailures).toEqual([]);
    const files: string[] = [];
    for await (const object of objects.list("interactions/")) files.push(object.key);
    expect(files).toHaveLength(1);
    expect((await listAll("consumer")).rows).toHaveLength(12);
    expect(await totals("consumer")).toEqual(sumCounters(records.map(deltaOf)));
  });
});
