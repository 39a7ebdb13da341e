/**
 * The AWS warehouse consumer's DynamoDB capacity per record: the real composition of
 * lambda/handlers/consumer.ts (`composeWarehouseConsumer` + `storeCopies`, the DynamoDB delivery ledger,
 * the dashboard index and its rollups) against dynalite, fed SQS-shaped batches of one busy project's
 * chat-call records. The Parquet files go to a folder (S3 is not DynamoDB: not counted).
 *
 *   npx tsx bench/consumer-writes.ts [--records <n>] [--batch <n>] [--calls-per-second <r>] \
 *     [--users <n>] [--user-share <0-1>] [--error-share <0-1>] [--json <file>]
 *
 * Two counts of each table's capacity:
 * - `consumed`: what dynalite returns as `ConsumedCapacity` (asked for on every request): DynamoDB's rule,
 *   a write 1 unit per KB of the larger of the item before and after, a strongly consistent read 1 unit
 *   per 4 KB of the whole item (a projection does not lower it; a missing item 1), each item of a
 *   BatchWriteItem or BatchGetItem on its own. The figures reported.
 * - `limits`: bench/lib/dynamo-limits.ts as bench/aws-scale.ts installs it (per-item and per-partition
 *   limits enforced on the virtual clock). It counts PutItem, UpdateItem and DeleteItem (an update by the
 *   item's size before it: it learns the size after from the answer), not BatchWriteItem or BatchGetItem,
 *   which the index and the ledger's lookups use; their items are counted here by `itemBytes`.
 *
 * The clock is virtual: a batch is handed over when its last record's call has ended and the event
 * source's window has passed. Batches are handled one at a time (the event source runs at most 2).
 */
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {
  AttributeValue,
  ConsumedCapacity,
  DynamoDBClient,
  WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { createDynamoClient, ensureTables } from "../lambda/adapters/dynamodb/client";
import { DynamoDeliveryLedger } from "../lambda/adapters/dynamodb/ledger";
import { DynamoPorts } from "../lambda/adapters/dynamodb/ports";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { FsObjectStore } from "../lambda/adapters/fs/object-store";
import { activePriceCatalogue } from "../lambda/adapters/fs/price-catalogue";
import { composeWarehouseConsumer, storeCopies } from "../lambda/compose/consumer";
import { silentLogger } from "../lambda/core/logger";
import { costBreakdown } from "../lambda/core/pricing";
import type { QueueBatch, QueueMessage } from "../lambda/core/queue";
import { buildRecord, type InteractionRecord } from "../lambda/core/record";
import { emptyUsage } from "../lambda/core/usage";
import { startEmbeddedDynamo } from "../lambda/local/embedded-dynamo";
import { itemBytes, limitedClient } from "./lib/dynamo-limits";
import { flagPairs } from "./lib/flags";

interface Options {
  records: number;
  /** Records per batch; default what the event source hands at the rate (lib/warehouse.ts). */
  batch: number | undefined;
  callsPerSecond: number;
  users: number;
  userShare: number;
  errorShare: number;
  json: string | undefined;
}

function parseArgs(argv: string[]): Options {
  const o: Options = {
    records: 20_000,
    batch: undefined,
    callsPerSecond: 1,
    users: 50,
    userShare: 0.3,
    errorShare: 0.02,
    json: undefined,
  };
  for (const { flag, value, num } of flagPairs(argv)) {
    if (flag === "--records") o.records = num();
    else if (flag === "--batch") o.batch = Math.max(1, num());
    else if (flag === "--calls-per-second") o.callsPerSecond = Math.max(0.001, num());
    else if (flag === "--users") o.users = num();
    else if (flag === "--user-share") o.userShare = Math.min(1, num());
    else if (flag === "--error-share") o.errorShare = Math.min(1, num());
    else if (flag === "--json") o.json = value;
    else throw new Error(`unknown flag ${flag}`);
  }
  return o;
}

/** The consumer's event source (lib/warehouse.ts): 10,000 records, 60 s, or Lambda's 6 MB payload. */
const SOURCE = { batchSize: 10_000, windowMs: 60_000, payloadBytes: 6 * 1024 * 1024 };
const PROJECT = "proj-busy";
const KEYS = ["k1busyproject001", "k2busyproject002", "k3busyproject003"];
/** Model, vendor, share of the calls. */
const MODELS = [
  ["gpt-4o-mini", "openai", 0.6],
  ["claude-sonnet-4-5", "anthropic", 0.25],
  ["gemini-2.5-flash", "gemini", 0.15],
] as const;
const T0 = Date.UTC(2026, 11, 7, 9);
/** Pseudo-words (syllables of a seeded generator): text that gzip shrinks about as much as prose. */
const SYLLABLES = [
  "ka",
  "to",
  "ri",
  "men",
  "sa",
  "lo",
  "ve",
  "an",
  "dor",
  "pi",
  "qu",
  "el",
  "st",
  "ra",
  "un",
  "ce",
];
function vocabulary(rand: () => number): string[] {
  return Array.from({ length: 3000 }, () =>
    Array.from({ length: 1 + Math.floor(rand() * 3) }, () => SYLLABLES[Math.floor(rand() * 16)]).join(""),
  );
}
const textOf = (rand: () => number, words: string[], chars: number) => {
  let text = "";
  while (text.length < chars)
    text += `${words[Math.floor(rand() * words.length)]}${rand() < 0.1 ? ". " : " "}`;
  return text.trim();
};

/** A deterministic generator (mulberry32): the same records each run. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One busy project's calls: chat completions, bodies kept (the privacy default, `full`). */
function makeRecords(o: Options): InteractionRecord[] {
  const rand = random(42);
  const prices = activePriceCatalogue({});
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join("");
  const words = vocabulary(rand);
  // The app's system prompt: the same in every call, as an app's is.
  const system = textOf(rand, words, 800);
  const records: InteractionRecord[] = [];
  for (let i = 0; i < o.records; i++) {
    const pick = rand();
    const [model, vendor] = (MODELS.find(
      (_, k) => pick < MODELS.slice(0, k + 1).reduce((s, m) => s + m[2], 0),
    ) ?? MODELS[0]) as (typeof MODELS)[number];
    const startedAt = T0 + Math.floor((i * 1000) / o.callsPerSecond);
    const failed = rand() < o.errorShare;
    const user = o.users > 0 && rand() < o.userShare ? `customer-${Math.floor(rand() * o.users)}` : undefined;
    const question = textOf(rand, words, 150 + Math.floor(rand() * 250));
    const request = JSON.stringify({
      model,
      messages: [
        { role: "system", content: system },
        { role: "user", content: question },
      ],
      temperature: 0.3,
      max_tokens: 512,
    });
    const usage = {
      ...emptyUsage(),
      inputTokens: 180 + Math.floor(rand() * 40),
      outputTokens: 120 + Math.floor(rand() * 160),
    };
    const answer = textOf(rand, words, 300 + Math.floor(rand() * 900));
    const response = failed
      ? JSON.stringify({
          error: {
            message: "Rate limit reached for requests",
            type: "requests",
            code: "rate_limit_exceeded",
          },
        })
      : JSON.stringify({
          id: `chatcmpl-${hex(24)}`,
          object: "chat.completion",
          created: Math.floor(startedAt / 1000),
          model,
          choices: [{ index: 0, message: { role: "assistant", content: answer }, finish_reason: "stop" }],
          usage: { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens },
        });
    const price = prices.priceFor(vendor, model, new Date(startedAt));
    const breakdown = !failed && price ? costBreakdown(usage, price, { applyMarkup: true }) : undefined;
    const streamed = rand() < 0.5;
    records.push(
      buildRecord({
        transactionId: randomUUID(),
        projectId: PROJECT,
        keyId: KEYS[Math.floor(rand() * KEYS.length)] as string,
        vendor,
        endpoint: "/v1/chat/completions",
        model,
        billingMode: "managed",
        statusCode: failed ? 429 : 200,
        ...(failed && { error: { type: "vendor_error", code: "429" } }),
        vendorRequestId: `req_${hex(24)}`,
        streamed,
        startedAt,
        latencyMs: 800 + Math.floor(rand() * 4000),
        ...(streamed && { ttftMs: 300 + Math.floor(rand() * 400) }),
        usage: failed ? emptyUsage() : usage,
        costMicros: breakdown?.micros ?? 0,
        ...(breakdown && price && { priceVersion: price.priceVersion, costBreakdown: breakdown }),
        ...(user !== undefined && { userIdHeader: user }),
        userAgent: "OpenAI/JS 6.0",
        request: { text: request, bytes: Buffer.byteLength(request), truncated: false },
        response: { text: response, bytes: Buffer.byteLength(response), truncated: false },
        store: "full",
      }),
    );
  }
  return records;
}

/** An SQS event's record as Lambda hands it (the fields the event carries besides the body). */
function messageOf(record: InteractionRecord, index: number): QueueMessage {
  const message = {
    messageId: `0f6f${String(index).padStart(8, "0")}-8c3a-4d1e-9a55-6b1c2d3e4f50`,
    receiptHandle: `AQEB${"x".repeat(176)}`,
    body: JSON.stringify(record),
    attributes: {
      ApproximateReceiveCount: "1",
      SentTimestamp: String(record.started_at),
      SenderId: "AROAEXAMPLE:dmt-proxy",
      ApproximateFirstReceiveTimestamp: String(record.started_at + 1000),
    },
    messageAttributes: {},
    md5OfBody: "0123456789abcdef0123456789abcdef",
    eventSource: "aws:sqs",
    eventSourceARN: "arn:aws:sqs:us-east-1:123456789012:dmt-records",
    awsRegion: "us-east-1",
  };
  return message;
}

/** Batches as the event source cuts them: by count, by the window at the rate, by the payload. */
function batchesOf(records: InteractionRecord[], o: Options): QueueBatch[] {
  const limit =
    o.batch ??
    Math.min(SOURCE.batchSize, Math.max(1, Math.round((o.callsPerSecond * SOURCE.windowMs) / 1000)));
  const batches: QueueBatch[] = [];
  let current: QueueMessage[] = [];
  let bytes = 0;
  records.forEach((record, i) => {
    const message = messageOf(record, i);
    const size = Buffer.byteLength(JSON.stringify(message)) + 1;
    // An explicit --batch is taken as asked; the default also stops at Lambda's payload limit.
    if (current.length >= limit || (o.batch === undefined && bytes + size > SOURCE.payloadBytes)) {
      batches.push({ Records: current });
      current = [];
      bytes = 0;
    }
    current.push(message);
    bytes += size;
  });
  if (current.length > 0) batches.push({ Records: current });
  return batches;
}

interface Tally {
  requests: Record<string, number>;
  writes: number;
  wcu: number;
  rcu: number;
  /** Write units by the kind of item (`kindOf`), from the same counts. */
  wcuByKind: Record<string, number>;
  writesByKind: Record<string, number>;
  /** Writes refused by their condition (DynamoDB charges them; dynalite reports no capacity). */
  conditionFailures: number;
  /** BatchWriteItem's items, which DynamoLimits does not count, by `itemBytes`. */
  batchItemsWcu: number;
  largestBatchItem: number;
}

/** What an item is, from its key: a ledger claim or file, an index pointer, pack or list, a rollup. */
function kindOf(table: string, key: Record<string, AttributeValue> | undefined): string {
  if (table === "interactions") {
    const sk = key?.sk?.S ?? "";
    return (
      ({ "t#": "pointer", "p#": "pack summaries", "q#": "pack records" } as Record<string, string>)[
        sk.slice(0, 2)
      ] ?? `list ${sk.slice(0, 2)}`
    );
  }
  if (table === "usageRollups") {
    const id = key?.rollupId?.S ?? "";
    return id.startsWith("k#") ? "key row" : id.startsWith("u#") ? "user row" : "model rollup";
  }
  if (table === "warehouseDeliveries") return key?.transactionId?.S?.includes("/") ? "file outcome" : "claim";
  return "item";
}

/**
 * On every request: asks dynalite for its ConsumedCapacity and adds it to the table's tally; counts the
 * items of batch writes by size. `initialize`: once per command, the SDK's retries inside it.
 */
function installTally(db: DynamoDBClient, logical: Record<string, string>) {
  const tallies: Record<string, Tally> = {};
  const of = (physical: string | undefined): [string, Tally] => {
    const name = logical[physical ?? ""] ?? physical ?? "?";
    tallies[name] ??= {
      requests: {},
      writes: 0,
      wcu: 0,
      rcu: 0,
      wcuByKind: {},
      writesByKind: {},
      conditionFailures: 0,
      batchItemsWcu: 0,
      largestBatchItem: 0,
    };
    return [name, tallies[name]];
  };
  const addKind = (t: Tally, kind: string, units: number) => {
    t.wcuByKind[kind] = (t.wcuByKind[kind] ?? 0) + units;
    t.writesByKind[kind] = (t.writesByKind[kind] ?? 0) + 1;
  };
  // biome-ignore lint/suspicious/noExplicitAny: the SDK's middleware generics, as in dynamo-limits.ts
  const tally: any = (next: any, context: { commandName?: string }) => async (args: any) => {
    const command = context.commandName ?? "?";
    const input = args.input as {
      TableName?: string;
      Key?: Record<string, AttributeValue>;
      Item?: Record<string, AttributeValue>;
      RequestItems?: Record<string, WriteRequest[]>;
    };
    args.input = { ...input, ReturnConsumedCapacity: "TOTAL" };
    const tables = input.TableName ? [input.TableName] : Object.keys(input.RequestItems ?? {});
    for (const table of tables) {
      const [, t] = of(table);
      t.requests[command] = (t.requests[command] ?? 0) + 1;
    }
    const batchWrite = command === "BatchWriteItemCommand";
    const write = batchWrite || /^(Put|Update|Delete)Item/.test(command);
    if (batchWrite) {
      for (const [table, requests] of Object.entries(input.RequestItems ?? {})) {
        const [name, t] = of(table);
        for (const request of requests) {
          const item = request.PutRequest?.Item;
          const bytes = item ? itemBytes(item) : 0;
          const units = Math.max(1, Math.ceil(bytes / 1024));
          t.writes++;
          t.batchItemsWcu += units;
          t.largestBatchItem = Math.max(t.largestBatchItem, bytes);
          addKind(t, kindOf(name, item ?? request.DeleteRequest?.Key), units);
        }
      }
    }
    let result: { output: unknown };
    try {
      result = await next(args);
    } catch (err) {
      if ((err as Error).name === "ConditionalCheckFailedException")
        of(input.TableName)[1].conditionFailures++;
      throw err;
    }
    const consumed = (result.output as { ConsumedCapacity?: ConsumedCapacity | ConsumedCapacity[] })
      .ConsumedCapacity;
    for (const c of Array.isArray(consumed) ? consumed : consumed ? [consumed] : []) {
      const [name, t] = of(c.TableName);
      const units = c.CapacityUnits ?? 0;
      if (!write) t.rcu += units;
      else {
        t.wcu += units;
        if (!batchWrite) {
          t.writes++;
          addKind(t, kindOf(name, input.Key ?? input.Item), units);
        }
      }
    }
    return result;
  };
  db.middlewareStack.add(tally, { step: "initialize", name: "dmtConsumerTally" });
  return tallies;
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const dir = mkdtempSync(join(tmpdir(), "dmt-consumer-writes-"));
  const dynamo = await startEmbeddedDynamo(join(dir, "store"));
  let now = T0;
  const clock = () => now;
  const names = tableNames({}, "cw-");
  const raw = createDynamoClient({ endpoint: dynamo.endpoint });
  await ensureTables(raw, names);
  // The consumer's store client (createDynamoClient's 3 attempts), behind DynamoDB's limits.
  const { db, limits } = limitedClient(dynamo.endpoint, names, {
    clock,
    throttleRate: 0,
    watched: new Set(),
  });
  const logical = Object.fromEntries(Object.entries(names).map(([name, physical]) => [physical, name]));
  const tallies = installTally(db, logical);

  // As lambda/handlers/consumer.ts composes it (without a billing connection's meter listener).
  const store = new DynamoPorts(db, names, () => {
    throw new Error("the consumer has no key wrapper");
  });
  const infra = {
    store,
    warehouse: new FsObjectStore(join(dir, "bucket")),
    deliveries: new DynamoDeliveryLedger(db, names.warehouseDeliveries, clock),
    deadLetters: { put: async () => {} },
    logger: silentLogger,
    clock,
  };
  const handler = composeWarehouseConsumer(infra, storeCopies(infra));

  const records = makeRecords(o);
  const batches = batchesOf(records, o);
  const recordBytes =
    records.reduce((sum, r) => sum + Buffer.byteLength(JSON.stringify(r)), 0) / records.length;
  const wallStart = Date.now();
  let failures = 0;
  let sent = 0;
  for (const [b, batch] of batches.entries()) {
    const last = records[sent + batch.Records.length - 1] as InteractionRecord;
    sent += batch.Records.length;
    // Handed over once its last call ended and the window (or the batch's size) closed it.
    now = Math.max(now, last.started_at + last.latency_ms + 1000);
    const result = await handler(batch);
    failures += result.batchItemFailures.length;
    if (b % 20 === 19 || b === batches.length - 1) {
      process.stderr.write(
        `batch ${b + 1}/${batches.length} records=${sent} wall=${((Date.now() - wallStart) / 1000).toFixed(0)}s\n`,
      );
    }
  }

  const report = limits.report();
  const n = records.length;
  const per = (x: number) => Number((x / n).toFixed(3));
  const tables: Record<string, unknown> = {};
  let wcu = 0;
  let rcu = 0;
  let limitsWcu = 0;
  for (const [name, t] of Object.entries(tallies).sort()) {
    const counted = report.tables[name];
    const limitsTableWcu = (counted?.wcu ?? 0) + t.batchItemsWcu;
    wcu += t.wcu;
    rcu += t.rcu;
    limitsWcu += limitsTableWcu;
    tables[name] = {
      requests: t.requests,
      writesPerRecord: per(t.writes),
      wcuPerRecord: per(t.wcu),
      rcuPerRecord: per(t.rcu),
      limitsWcuPerRecord: per(limitsTableWcu),
      byKind: Object.fromEntries(
        Object.entries(t.wcuByKind).map(([kind, units]) => [
          kind,
          { writesPerRecord: per(t.writesByKind[kind] ?? 0), wcuPerRecord: per(units) },
        ]),
      ),
      conditionFailures: t.conditionFailures,
      throttled: counted?.throttled ?? 0,
      largestBatchItemBytes: t.largestBatchItem,
    };
  }
  const result = {
    model: {
      clock: "virtual: a batch is handed over when its last call ended, plus 1 s",
      wallSeconds: Math.round((Date.now() - wallStart) / 1000),
      callsPerSecond: o.callsPerSecond,
      batchLimit: o.batch ?? "event source (10,000 records, 60 s at the rate, 6 MB)",
      users: o.users,
      userShare: o.userShare,
      errorShare: o.errorShare,
      keys: KEYS.length,
      models: MODELS.map(([model, , share]) => `${model} ${share}`),
      privacy: "full (the default: bodies kept)",
    },
    records: n,
    batches: batches.length,
    recordsPerBatch: Math.round(n / batches.length),
    meanRecordBytes: Math.round(recordBytes),
    batchItemFailures: failures,
    tables,
    wcuPerRecord: per(wcu),
    rcuPerRecord: per(rcu),
    limitsWcuPerRecord: per(limitsWcu),
    largestItem: report.largest,
    largestBatchItem: Object.entries(tallies).reduce(
      (best, [table, t]) => (t.largestBatchItem > best.bytes ? { table, bytes: t.largestBatchItem } : best),
      { table: "", bytes: 0 },
    ),
    hottestItem: report.hottest,
  };
  process.stdout.write(
    `\nWarehouse consumer, DynamoDB capacity per record (${n} records in ${batches.length} batches of ~${result.recordsPerBatch}, ${o.callsPerSecond} calls/s, ~${result.meanRecordBytes} B a record)\n`,
  );
  process.stdout.write(
    `${"table (per record)".padEnd(28)}${"writes".padStart(8)}${"WCU".padStart(8)}${"RCU".padStart(8)}${"limits WCU".padStart(12)}\n`,
  );
  const row = (label: string, cells: (number | string)[]) =>
    process.stdout.write(
      `${label.padEnd(28)}${cells.map((c, i) => String(c).padStart(i === 3 ? 12 : 8)).join("")}\n`,
    );
  for (const [name, t] of Object.entries(tallies).sort()) {
    const counted = (tables[name] ?? {}) as { limitsWcuPerRecord?: number };
    row(name, [per(t.writes), per(t.wcu), per(t.rcu), counted.limitsWcuPerRecord ?? 0]);
    for (const [kind, units] of Object.entries(t.wcuByKind).sort()) {
      row(`  ${kind}`, [per(t.writesByKind[kind] ?? 0), per(units), "", ""]);
    }
  }
  process.stdout.write(
    `${"total".padEnd(28)}${"".padStart(8)}${String(result.wcuPerRecord).padStart(8)}${String(result.rcuPerRecord).padStart(8)}${String(result.limitsWcuPerRecord).padStart(12)}\n`,
  );
  process.stdout.write(`largest item (single writes) ${JSON.stringify(report.largest)}\n`);
  process.stdout.write(`largest batch-written item ${JSON.stringify(result.largestBatchItem)}\n`);
  process.stdout.write(`batch item failures ${failures}; wall ${result.model.wallSeconds} s\n`);
  if (o.json) writeFileSync(o.json, `${JSON.stringify(result, null, 2)}\n`);
  raw.destroy();
  db.destroy();
  await dynamo.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(failures === 0 ? 0 : 1);
}

await main();
