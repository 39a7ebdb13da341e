/**
 * The warehouse's adapters against the same cases: object stores (folder, and S3 spoken to over HTTP by
 * the real client), delivery ledgers (file, and DynamoDB over dynalite), and the SQS producer and
 * dead-letter sink. The AWS services are small local stand-ins speaking their wire protocols.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { S3Client } from "@aws-sdk/client-s3";
import { SQSClient } from "@aws-sdk/client-sqs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoDeliveryLedger } from "../../lambda/adapters/dynamodb/ledger";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { FileDeliveryLedger } from "../../lambda/adapters/fs/ledger";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { S3ObjectStore } from "../../lambda/adapters/s3/object-store";
import { presignS3Get } from "../../lambda/adapters/s3/presign";
import { SqsDeadLetters, SqsRecordQueue } from "../../lambda/adapters/sqs/queue";
import { RecordSpool, SPOOL_PREFIX } from "../../lambda/adapters/sqs/spool";
import { jsonLogger, silentLogger } from "../../lambda/core/logger";
import type { ObjectStore } from "../../lambda/core/object-store";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { deliveryLedgerContract } from "../support/contracts/delivery-ledger";
import { objectStoreContract } from "../support/contracts/object-store";

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "dmt-adapters-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function listen(
  handler: (req: IncomingMessage, body: Buffer, res: ServerResponse) => void,
): Promise<Server> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handler(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return server;
}
const urlOf = (server: Server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const credentials = { accessKeyId: "test", secretAccessKey: "test" };
const text = (bytes: Uint8Array | undefined) => (bytes ? Buffer.from(bytes).toString() : undefined);

/** S3's REST API for one bucket, path style: objects, ListObjectsV2 (2 keys a page), multipart uploads. */
function fakeS3() {
  const objects = new Map<string, Buffer>();
  const uploads = new Map<string, Map<number, Buffer>>();
  const calls: string[] = [];
  let nextUpload = 0;
  const xml = (res: ServerResponse, status: number, body: string) => {
    res.writeHead(status, { "content-type": "application/xml" });
    res.end(`<?xml version="1.0" encoding="UTF-8"?>${body}`);
  };
  const xmlText = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const handle = (req: IncomingMessage, body: Buffer, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://s3");
    const [, , ...rest] = url.pathname.split("/");
    const key = decodeURIComponent(rest.join("/"));
    const q = url.searchParams;
    if (req.method === "GET" && key === "" && q.get("list-type") === "2") {
      calls.push("ListObjectsV2");
      const prefix = q.get("prefix") ?? "";
      const all = [...objects.keys()].filter((k) => k.startsWith(prefix)).sort();
      const from = Number(q.get("continuation-token") ?? 0);
      const page = all.slice(from, from + 2);
      const truncated = from + 2 < all.length;
      const contents = page
        .map((k) => `<Contents><Key>${xmlText(k)}</Key><Size>${objects.get(k)?.length}</Size></Contents>`)
        .join("");
      return xml(
        res,
        200,
        `<ListBucketResult><IsTruncated>${truncated}</IsTruncated>${contents}${truncated ? `<NextContinuationToken>${from + 2}</NextContinuationToken>` : ""}</ListBucketResult>`,
      );
    }
    if (req.method === "POST" && q.has("uploads")) {
      calls.push("CreateMultipartUpload");
      const id = `u${++nextUpload}`;
      uploads.set(id, new Map());
      return xml(
        res,
        200,
        `<InitiateMultipartUploadResult><UploadId>${id}</UploadId></InitiateMultipartUploadResult>`,
      );
    }
    if (req.method === "PUT" && q.has("uploadId")) {
      calls.push("UploadPart");
      uploads.get(q.get("uploadId") ?? "")?.set(Number(q.get("partNumber")), body);
      res.writeHead(200, { ETag: `"part${q.get("partNumber")}"` });
      return res.end();
    }
    if (req.method === "POST" && q.has("uploadId")) {
      calls.push("CompleteMultipartUpload");
      const parts = uploads.get(q.get("uploadId") ?? "") ?? new Map();
      const numbers = [...body.toString().matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((m) =>
        Number(m[1]),
      );
      objects.set(key, Buffer.concat(numbers.map((n) => parts.get(n) as Buffer)));
      return xml(
        res,
        200,
        `<CompleteMultipartUploadResult><Key>${xmlText(key)}</Key></CompleteMultipartUploadResult>`,
      );
    }
    if (req.method === "DELETE" && q.has("uploadId")) {
      calls.push("AbortMultipartUpload");
      uploads.delete(q.get("uploadId") ?? "");
      res.writeHead(204);
      return res.end();
    }
    if (req.method === "PUT") {
      calls.push("PutObject");
      objects.set(key, body);
      res.writeHead(200, { ETag: '"x"' });
      return res.end();
    }
    if (req.method === "GET") {
      calls.push("GetObject");
      const found = objects.get(key);
      if (!found) return xml(res, 404, "<Error><Code>NoSuchKey</Code><Message>none</Message></Error>");
      res.writeHead(200, { "content-length": found.length });
      return res.end(found);
    }
    if (req.method === "DELETE") {
      calls.push("DeleteObject");
      objects.delete(key);
      res.writeHead(204);
      return res.end();
    }
    xml(res, 400, "<Error><Code>NotImplemented</Code></Error>");
  };
  return { objects, calls, handle };
}

const s3 = fakeS3();
let s3Server: Server;
let s3Client: S3Client;
beforeAll(async () => {
  s3Server = await listen(s3.handle);
  s3Client = new S3Client({
    endpoint: urlOf(s3Server),
    region: "eu-west-1",
    credentials,
    forcePathStyle: true,
  });
});
afterAll(async () => {
  s3Client.destroy();
  await new Promise((resolve) => s3Server.close(resolve));
});

async function* pieces(count: number, size: number): AsyncGenerator<Uint8Array> {
  for (let i = 0; i < count; i++) yield new Uint8Array(size).fill(65 + (i % 26));
}

objectStoreContract("FsObjectStore", () => new FsObjectStore(join(dir, "store")));
objectStoreContract("S3ObjectStore over a fake S3", () => new S3ObjectStore(s3Client, "bucket", "root"));

describe("S3 specifics", () => {
  it("uploads a large body in parts under the store's prefix, and aborts a failed upload", async () => {
    const store = new S3ObjectStore(s3Client, "bucket", "parts");
    s3.calls.length = 0;
    await store.put("large.bin", pieces(9, 1024 * 1024));
    expect(s3.calls).toEqual([
      "CreateMultipartUpload",
      "UploadPart",
      "UploadPart",
      "CompleteMultipartUpload",
    ]);
    expect(s3.objects.get("parts/large.bin")?.length).toBe(9 * 1024 * 1024);
    async function* failing(): AsyncGenerator<Uint8Array> {
      yield* pieces(9, 1024 * 1024);
      throw new Error("producer failed");
    }
    s3.calls.length = 0;
    await expect(store.put("failed.bin", failing())).rejects.toThrow("producer failed");
    expect(s3.calls).toEqual(["CreateMultipartUpload", "UploadPart", "AbortMultipartUpload"]);
    expect(s3.objects.has("parts/failed.bin")).toBe(false);
  });

  it("names objects by s3:// URL and presigns downloads", async () => {
    const store = new S3ObjectStore(s3Client, "bucket", "exports/", () => Date.UTC(2026, 0, 2, 3, 4, 5));
    expect(store.url("a b.csv")).toBe("s3://bucket/exports/a b.csv");
    const download = await store.downloadUrl("a b.csv", 3600);
    expect(download.expiresAt).toBe(Date.UTC(2026, 0, 2, 4, 4, 5));
    const url = new URL(download.url);
    expect(url.host).toBe("bucket.s3.eu-west-1.amazonaws.com");
    expect(url.pathname).toBe("/exports/a%20b.csv");
    expect(url.searchParams.get("X-Amz-Expires")).toBe("3600");
    expect(url.searchParams.get("X-Amz-Credential")).toBe("test/20260102/eu-west-1/s3/aws4_request");
  });

  it("signs exactly as AWS documents (SigV4 query example)", () => {
    const url = presignS3Get({
      bucket: "examplebucket",
      key: "test.txt",
      region: "us-east-1",
      credentials: {
        accessKeyId: "AKIAIOSFODNN7EXAMPLE",
        secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
      },
      now: Date.UTC(2013, 4, 24),
      expiresSeconds: 86400,
      host: "examplebucket.s3.amazonaws.com",
    });
    expect(new URL(url).searchParams.get("X-Amz-Signature")).toBe(
      "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
    );
  });

  it("carries the session token of temporary credentials, and uses path style for dotted buckets", () => {
    const url = new URL(
      presignS3Get({
        bucket: "my.bucket",
        key: "k",
        region: "eu-west-1",
        credentials: { ...credentials, sessionToken: "tok/en+=" },
        now: 0,
        expiresSeconds: 60,
      }),
    );
    expect(url.host).toBe("s3.eu-west-1.amazonaws.com");
    expect(url.pathname).toBe("/my.bucket/k");
    expect(url.searchParams.get("X-Amz-Security-Token")).toBe("tok/en+=");
  });
});

let dynamo: EmbeddedDynamo;
const db = () => createDynamoClient({ endpoint: dynamo.endpoint });
beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(join(dir, "dynamo"));
  const client = db();
  await ensureTables(client, tableNames({}, "ledger-test-"));
  client.destroy();
});
afterAll(() => dynamo.close());

deliveryLedgerContract(
  "FileDeliveryLedger",
  (clock) => FileDeliveryLedger.open(join(dir, `ledger-${Math.random()}`), clock),
  { claimsExpire: false },
);

deliveryLedgerContract(
  "DynamoDeliveryLedger over dynalite",
  async (clock) => new DynamoDeliveryLedger(db(), tableNames({}, "ledger-test-").warehouseDeliveries, clock),
  { claimsExpire: true },
);

describe("file delivery ledger", () => {
  it("survives a restart and keeps yesterday's ids", async () => {
    const folder = join(dir, "ledger-days");
    let now = Date.UTC(2026, 0, 15, 23);
    const ledger = await FileDeliveryLedger.open(folder, () => now);
    const write = async (id: string) => {
      await ledger.claim(`f/${id}`, [{ id }]);
      await ledger.commit(`f/${id}`);
    };
    await write("a");
    now = Date.UTC(2026, 0, 16, 1);
    await write("b");
    const reopened = await FileDeliveryLedger.open(folder, () => now);
    expect(await reopened.lookup(["a", "b", "c"])).toEqual(
      new Map([
        ["a", { state: "written" }],
        ["b", { state: "written" }],
      ]),
    );
    now = Date.UTC(2026, 0, 18);
    const later = await FileDeliveryLedger.open(folder, () => now);
    expect(await later.lookup(["a", "b"])).toEqual(new Map());
  });
});

/** SQS's JSON protocol for SendMessageBatch, refusing entries whose body says so. */
function fakeSqs() {
  const received: { queue: string; body: string; attributes?: Record<string, { StringValue: string }> }[] =
    [];
  const batchSizes: number[] = [];
  let down = 0;
  const handle = (raw: Buffer, res: ServerResponse) => {
    const request = JSON.parse(raw.toString()) as {
      QueueUrl: string;
      Entries: {
        Id: string;
        MessageBody: string;
        MessageAttributes?: Record<string, { StringValue: string }>;
      }[];
    };
    if (down > 0) {
      down--;
      res.writeHead(500, { "content-type": "application/x-amz-json-1.0" });
      return res.end(JSON.stringify({ __type: "com.amazonaws.sqs#InternalError", message: "down" }));
    }
    batchSizes.push(request.Entries.length);
    const Successful: object[] = [];
    const Failed: object[] = [];
    for (const entry of request.Entries) {
      if (
        entry.MessageBody.includes("refuse-once") &&
        !received.some((r) => r.body === `seen:${entry.MessageBody}`)
      ) {
        received.push({ queue: "", body: `seen:${entry.MessageBody}` });
        Failed.push({ Id: entry.Id, SenderFault: false, Code: "InternalError" });
      } else if (entry.MessageBody.includes("refuse-always")) {
        Failed.push({ Id: entry.Id, SenderFault: false, Code: "InternalError" });
      } else {
        received.push({
          queue: request.QueueUrl,
          body: entry.MessageBody,
          attributes: entry.MessageAttributes,
        });
        const md5 = createHash("md5").update(entry.MessageBody).digest("hex");
        Successful.push({ Id: entry.Id, MessageId: `id-${received.length}`, MD5OfMessageBody: md5 });
      }
    }
    res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
    res.end(JSON.stringify({ Successful, Failed }));
  };
  return {
    received,
    batchSizes,
    handle,
    setDown(n: number) {
      down = n;
    },
  };
}

describe("SQS producer and dead letters", () => {
  const sqs = fakeSqs();
  let server: Server;
  let client: SQSClient;
  const lines: string[] = [];
  beforeAll(async () => {
    server = await listen((_, body, res) => sqs.handle(body, res));
    client = new SQSClient({ endpoint: urlOf(server), region: "eu-west-1", credentials, maxAttempts: 1 });
  });
  afterAll(async () => {
    client.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  function producer(objects: ObjectStore) {
    const logger = jsonLogger("debug", (line) => lines.push(line));
    const spool = new RecordSpool(objects, logger);
    const queue = new SqsRecordQueue(client, {
      queueUrl: "https://sqs.local/records",
      spool,
      logger,
      sleep: async () => {},
    });
    return { queue, spool };
  }

  it("sends records handed over together in batches of at most 10", async () => {
    const { queue } = producer(new FsObjectStore(join(dir, "spool-1")));
    const records = Array.from({ length: 23 }, (_, i) => syntheticRecord(i, { projectId: "sqs-batch" }));
    await Promise.all(records.map((r) => queue.send(r)));
    await queue.close();
    expect(sqs.batchSizes.slice(-3)).toEqual([10, 10, 3]);
    const sent = sqs.received.filter((r) => r.body.includes("sqs-batch")).map((r) => JSON.parse(r.body));
    expect(sent).toEqual(records);
  });

  it("retries refused entries and failed calls, and spools what never goes through, then re-sends it", async () => {
    const objects = new FsObjectStore(join(dir, "spool-2"));
    const { queue, spool } = producer(objects);
    const once = syntheticRecord(1, { projectId: "refuse-once" });
    const always = syntheticRecord(2, { projectId: "refuse-always" });
    sqs.setDown(1);
    await Promise.all([queue.send(once), queue.send(always)]);
    expect(sqs.received.some((r) => r.body === JSON.stringify(once))).toBe(true);
    expect(spool.spooled).toBe(1);
    const spooled: string[] = [];
    for await (const o of objects.list(SPOOL_PREFIX)) spooled.push(text(await objects.get(o.key)) as string);
    expect(spooled).toEqual([JSON.stringify(always)]);
    expect(lines.some((l) => l.includes('"metric":"queue.spooled"'))).toBe(true);
    // Nothing of the record reaches a log line.
    expect(lines.join("\n")).not.toContain("refuse-always");

    await queue.resendSpooled();
    expect(spool.resent).toBe(0);
    let left = 0;
    for await (const _ of objects.list(SPOOL_PREFIX)) left++;
    expect(left).toBe(1);

    // Once the queue takes it, the spool empties.
    const fixed = new SqsRecordQueue(client, {
      queueUrl: "https://sqs.local/records",
      spool,
      logger: silentLogger,
      sleep: async () => {},
    });
    for await (const o of objects.list(SPOOL_PREFIX)) {
      await objects.put(
        o.key,
        new TextEncoder().encode(JSON.stringify(syntheticRecord(2, { projectId: "spool-ok" }))),
      );
    }
    await fixed.resendSpooled();
    expect(spool.resent).toBe(1);
    for await (const _ of objects.list(SPOOL_PREFIX)) throw new Error("spool not emptied");
  });

  it("dead-letters with the error and the source message id as attributes", async () => {
    await new SqsDeadLetters(client, "https://sqs.local/dlq").put([
      { messageId: "m-1", body: "{bad", error: "the message body is not JSON", receiveCount: 1, at: 0 },
    ]);
    const letter = sqs.received.find((r) => r.queue === "https://sqs.local/dlq");
    expect(letter?.body).toBe("{bad");
    expect(letter?.attributes?.error?.StringValue).toBe("the message body is not JSON");
    expect(letter?.attributes?.source_message_id?.StringValue).toBe("m-1");
  });
});
