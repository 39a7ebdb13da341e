import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DynamoDBClient, PutItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoIdempotency } from "../../lambda/adapters/dynamodb/idempotency";
import { DynamoRateLimiter } from "../../lambda/adapters/dynamodb/rate-limit";
import { type TableNames, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../../lambda/adapters/fs/master-key";
import { DecryptionError } from "../../lambda/core/crypto";
import { ApiError } from "../../lambda/core/errors";
import {
  IDEMPOTENCY_LEASE_MS,
  IDEMPOTENCY_WINDOW_MS,
  idempotencyError,
  MAX_REPLAY_BYTES,
  requestFingerprint,
  type StoredResponse,
} from "../../lambda/core/idempotency";
import type { RateLimit } from "../../lambda/core/model";
import { bucketRule } from "../../lambda/core/rate-limit";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";

const T0 = 1_700_000_000_000;
let now = T0;
const clock = () => now;

let dataDir: string;
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;
let names: TableNames;
const clients: DynamoDBClient[] = [];

/** A client of its own: another "process" sharing the store. */
function newClient(): DynamoDBClient {
  const client = createDynamoClient({ endpoint: dynamo.endpoint });
  clients.push(client);
  return client;
}

/** A client that records the commands it sends. */
function countingClient(): { client: DynamoDBClient; commands: string[] } {
  const client = newClient();
  const commands: string[] = [];
  client.middlewareStack.add(
    (next, context) => (args) => {
      commands.push(context.commandName ?? "?");
      return next(args);
    },
    { step: "initialize", name: "count" },
  );
  return { client, commands };
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-metering-"));
  dynamo = await startEmbeddedDynamo(dataDir);
  db = newClient();
  names = tableNames({});
  await ensureTables(db, names);
});

afterAll(async () => {
  for (const client of clients) client.destroy();
  await dynamo.close();
  rmSync(dataDir, { recursive: true, force: true });
});

let buckets = 0;
const newBucket = () => `key-${++buckets}`;
const FREE: RateLimit = { rpm: 60, burst: 100 };

describe("rate limits", () => {
  it("allows the burst, refuses the next, then refills at rpm/60 per second", async () => {
    const limiter = new DynamoRateLimiter(db, names, clock);
    const bucket = newBucket();
    now = T0;
    for (let i = 1; i <= 100; i++) {
      const decision = await limiter.check(bucket, FREE);
      expect(decision).toMatchObject({ allowed: true, limit: 60, remaining: 100 - i });
    }
    expect(await limiter.check(bucket, FREE)).toEqual({
      allowed: false,
      limit: 60,
      remaining: 0,
      reset: T0 / 1000 + 100,
      retryAfterSeconds: 1,
    });

    now = T0 + 999;
    expect((await limiter.check(bucket, FREE)).allowed).toBe(false);
    now = T0 + 1000;
    expect(await limiter.check(bucket, FREE)).toMatchObject({ allowed: true, remaining: 0 });
    expect(await limiter.check(bucket, FREE)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });

    // 30.5 s later the bucket holds 29.5 tokens: this request takes one, 28 whole ones remain.
    now = T0 + 30_500;
    expect(await limiter.check(bucket, FREE)).toMatchObject({ allowed: true, remaining: 28 });

    // Long idle: full again, whatever happened before.
    now = T0 + 3_600_000;
    expect(await limiter.check(bucket, FREE)).toEqual({
      allowed: true,
      limit: 60,
      remaining: 99,
      reset: (T0 + 3_601_000) / 1000,
      retryAfterSeconds: 0,
    });
  });

  it("keeps one bucket per key", async () => {
    const limiter = new DynamoRateLimiter(db, names, clock);
    const tiny = { rpm: 1, burst: 1 };
    const a = newBucket();
    expect((await limiter.check(a, tiny)).allowed).toBe(true);
    expect((await limiter.check(a, tiny)).allowed).toBe(false);
    expect((await limiter.check(newBucket(), tiny)).allowed).toBe(true);
  });

  it("two limiters on two clients share one bucket, in turn and at once", async () => {
    now = T0;
    const first = new DynamoRateLimiter(newClient(), names, clock);
    const second = new DynamoRateLimiter(newClient(), names, clock);
    const bucket = newBucket();
    const takeAll = async (limiter: DynamoRateLimiter) => {
      let allowed = 0;
      while (allowed <= 100 && (await limiter.check(bucket, FREE)).allowed) allowed++;
      return allowed;
    };
    for (let i = 0; i < 60; i++) expect((await first.check(bucket, FREE)).allowed).toBe(true);
    // The first may hold a few tokens it took ahead of demand (batches are 1/16 of what is left): the
    // second gets the rest, the first its own, and together exactly the burst.
    const second40 = await takeAll(second);
    expect(second40).toBeGreaterThanOrEqual(40 - 100 / 16);
    expect(60 + second40 + (await takeAll(first))).toBe(100);
    expect((await second.check(bucket, FREE)).allowed).toBe(false);

    const together = newBucket();
    const decisions = await Promise.all(
      // 60 per client: within each client's 64 sockets, so no request waits for a connection.
      Array.from({ length: 120 }, (_, i) => (i % 2 ? first : second).check(together, FREE)),
    );
    // Never more than the burst. Tokens one process took ahead of demand and did not use before the
    // burst ended are lost to the other: at most one batch each (1/16 of what was left).
    const allowed = decisions.filter((d) => d.allowed).length;
    expect(allowed).toBeLessThanOrEqual(100);
    expect(allowed).toBeGreaterThanOrEqual(100 - 2 * Math.floor(100 / 16));
  });

  it("matches an exact token bucket for any arrivals spread over two processes", async () => {
    const limiters = [
      new DynamoRateLimiter(newClient(), names, clock),
      new DynamoRateLimiter(newClient(), names, clock),
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.record({ rpm: fc.integer({ min: 1, max: 1200 }), burst: fc.integer({ min: 1, max: 8 }) }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 0, max: 1 })), {
          minLength: 1,
          maxLength: 30,
        }),
        async (limit, arrivals) => {
          const bucket = newBucket();
          // The reference: credit in microseconds of refill, capped at burst intervals.
          const { intervalUs } = bucketRule(limit);
          const capacity = limit.burst * intervalUs;
          let credit = capacity;
          let lastUs = T0 * 1000;
          now = T0;
          for (const [delayMs, process] of arrivals) {
            now += delayMs;
            const nowUs = now * 1000;
            credit = Math.min(capacity, credit + (nowUs - lastUs));
            lastUs = nowUs;
            const decision = await (limiters[process] as DynamoRateLimiter).check(bucket, limit);
            if (credit >= intervalUs) {
              credit -= intervalUs;
              expect(decision).toEqual({
                allowed: true,
                limit: limit.rpm,
                remaining: Math.floor(credit / intervalUs),
                reset: Math.ceil((nowUs + capacity - credit) / 1_000_000),
                retryAfterSeconds: 0,
              });
            } else {
              expect(decision.allowed).toBe(false);
              expect(decision.retryAfterSeconds).toBeGreaterThanOrEqual(1);
            }
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("takes one round trip per allowed request, and none to refuse a bucket it saw exhausted", async () => {
    now = T0;
    const { client, commands } = countingClient();
    const limiter = new DynamoRateLimiter(client, names, clock);
    const bucket = newBucket();
    const tight = { rpm: 60, burst: 3 };
    for (let i = 0; i < 3; i++) await limiter.check(bucket, tight);
    expect(commands).toEqual(["UpdateItemCommand", "UpdateItemCommand", "UpdateItemCommand"]);
    commands.length = 0;
    // The bucket's state is known to be exhausted: refused with no store call at all.
    expect((await limiter.check(bucket, tight)).allowed).toBe(false);
    expect(commands).toEqual([]);
    // Idle for a while: one update again.
    now = T0 + 10_000;
    expect((await limiter.check(bucket, tight)).allowed).toBe(true);
    expect(commands).toEqual(["UpdateItemCommand"]);

    // A process whose view is stale (it saw the bucket idle) takes two updates, and no read.
    const other = countingClient();
    const otherLimiter = new DynamoRateLimiter(other.client, names, clock);
    const shared = newBucket();
    expect((await otherLimiter.check(shared, tight)).allowed).toBe(true);
    now += 5000;
    await limiter.check(shared, tight);
    other.commands.length = 0;
    expect(await otherLimiter.check(shared, tight)).toMatchObject({ allowed: true, remaining: 1 });
    expect(other.commands).toEqual(["UpdateItemCommand", "UpdateItemCommand"]);
    // Exhausted behind its back: its busy update fails, and one read gives the refusal's numbers.
    await limiter.check(shared, tight);
    await limiter.check(shared, tight);
    other.commands.length = 0;
    expect(await otherLimiter.check(shared, tight)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    expect(other.commands).toEqual(["UpdateItemCommand", "GetItemCommand"]);
  });
});

describe("idempotency", () => {
  const encoder = new TextEncoder();
  const response = (body: string, chunks = 1): StoredResponse => {
    const bytes = encoder.encode(body);
    const size = Math.ceil(bytes.length / chunks);
    return {
      status: 200,
      headers: [
        ["content-type", "application/json"],
        ["set-cookie", "a=1"],
        ["set-cookie", "b=2"],
      ],
      chunks: Array.from({ length: chunks }, (_, i) => bytes.subarray(i * size, (i + 1) * size)),
    };
  };
  const fingerprint = (body: string) =>
    requestFingerprint("POST", "/openai/v1/chat/completions", encoder.encode(body));
  let ids = 0;
  const newRequestId = () => `req-${++ids}`;

  it("new, then in progress, mismatch for another body, then the stored response", async () => {
    now = T0;
    const store = new DynamoIdempotency(db, names, clock);
    const id = newRequestId();
    const begun = await store.begin("key1", id, fingerprint("a"));
    expect(begun.kind).toBe("new");
    if (begun.kind !== "new") return;
    expect(await store.begin("key1", id, fingerprint("a"))).toEqual({ kind: "in_progress" });
    expect(await store.begin("key1", id, fingerprint("b"))).toEqual({ kind: "mismatch" });
    // Another key's id space is its own.
    expect((await store.begin("key2", id, fingerprint("b"))).kind).toBe("new");

    const sent = response('{"id":"chatcmpl-1","choices":[]}');
    expect(await store.complete("key1", id, begun.token, sent)).toBe(true);
    expect(await store.begin("key1", id, fingerprint("a"))).toEqual({ kind: "completed", response: sent });
    expect(
      await new DynamoIdempotency(newClient(), names, clock).begin("key1", id, fingerprint("a")),
    ).toEqual({
      kind: "completed",
      response: sent,
    });
    expect(await store.begin("key1", id, fingerprint("b"))).toEqual({ kind: "mismatch" });
  });

  it("replays a stream chunk by chunk, and an empty body", async () => {
    const store = new DynamoIdempotency(db, names, clock);
    const id = newRequestId();
    const begun = await store.begin("key1", id, fingerprint("s"));
    if (begun.kind !== "new") throw new Error(begun.kind);
    const stream: StoredResponse = {
      status: 200,
      headers: [["content-type", "text/event-stream"]],
      chunks: ['data: {"a":1}\n\n', 'data: {"b":2}\n\n', "data: [DONE]\n\n"].map((c) => encoder.encode(c)),
    };
    await store.complete("key1", id, begun.token, stream);
    expect(await store.begin("key1", id, fingerprint("s"))).toEqual({ kind: "completed", response: stream });

    const emptyId = newRequestId();
    const empty = await store.begin("key1", emptyId, fingerprint(""));
    if (empty.kind !== "new") throw new Error(empty.kind);
    const noBody: StoredResponse = { status: 204, headers: [], chunks: [] };
    await store.complete("key1", emptyId, empty.token, noBody);
    expect(await store.begin("key1", emptyId, fingerprint(""))).toEqual({
      kind: "completed",
      response: noBody,
    });
  });

  it("stores a response beyond one item's 400 KB in parts, and merges a flood of chunks", async () => {
    const store = new DynamoIdempotency(db, names, clock);
    const id = newRequestId();
    const begun = await store.begin("key1", id, fingerprint("big"));
    if (begun.kind !== "new") throw new Error(begun.kind);
    const bytes = randomBytes(1_500_000);
    const chunks = Array.from(
      { length: 6000 },
      (_, i) => new Uint8Array(bytes.subarray(i * 250, (i + 1) * 250)),
    );
    await store.complete("key1", id, begun.token, { status: 200, headers: [], chunks });
    const replay = await store.begin("key1", id, fingerprint("big"));
    if (replay.kind !== "completed" || !replay.response) throw new Error("no replay");
    expect(Buffer.concat(replay.response.chunks).equals(bytes)).toBe(true);
    expect(replay.response.chunks.length).toBeLessThanOrEqual(4096);
    expect(replay.response.chunks.length).toBeGreaterThan(2000);
  });

  it("remembers a response too large to replay as completed without it", async () => {
    const store = new DynamoIdempotency(db, names, clock);
    const id = newRequestId();
    const begun = await store.begin("key1", id, fingerprint("huge"));
    if (begun.kind !== "new") throw new Error(begun.kind);
    const huge = { status: 200, headers: [], chunks: [new Uint8Array(MAX_REPLAY_BYTES + 1)] };
    expect(await store.complete("key1", id, begun.token, huge)).toBe(true);
    const outcome = await store.begin("key1", id, fingerprint("huge"));
    expect(outcome).toEqual({ kind: "completed" });
    if (outcome.kind === "completed") expect(idempotencyError(outcome).status).toBe(409);
  });

  it("expires after 24 hours by the stored time, not by TTL", async () => {
    now = T0;
    const store = new DynamoIdempotency(db, names, clock);
    const id = newRequestId();
    const begun = await store.begin("key1", id, fingerprint("a"));
    if (begun.kind !== "new") throw new Error(begun.kind);
    await store.complete("key1", id, begun.token, response("first"));
    now = T0 + IDEMPOTENCY_WINDOW_MS - 1;
    expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("completed");
    now = T0 + IDEMPOTENCY_WINDOW_MS;
    // Past the window, even another body starts afresh.
    expect((await store.begin("key1", id, fingerprint("b"))).kind).toBe("new");
    now = T0;
  });

  it("lets a retry take over a call whose process died, and the dead one cannot complete it", async () => {
    now = T0;
    const store = new DynamoIdempotency(db, names, clock);
    const id = newRequestId();
    const dead = await store.begin("key1", id, fingerprint("a"));
    if (dead.kind !== "new") throw new Error(dead.kind);
    now = T0 + IDEMPOTENCY_LEASE_MS - 1;
    expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("in_progress");
    now = T0 + IDEMPOTENCY_LEASE_MS;
    // Another body may not take it over: that is still a reused id.
    expect((await store.begin("key1", id, fingerprint("b"))).kind).toBe("mismatch");
    const retry = await store.begin("key1", id, fingerprint("a"));
    if (retry.kind !== "new") throw new Error(retry.kind);

    expect(await store.complete("key1", id, dead.token, response("stale"))).toBe(false);
    expect(await store.complete("key1", id, retry.token, response("fresh"))).toBe(true);
    expect(await store.begin("key1", id, fingerprint("a"))).toEqual({
      kind: "completed",
      response: response("fresh"),
    });
    now = T0;
  });

  it("abandon lets a retry run again; only the lease holder can abandon", async () => {
    const store = new DynamoIdempotency(db, names, clock);
    const id = newRequestId();
    const begun = await store.begin("key1", id, fingerprint("a"));
    if (begun.kind !== "new") throw new Error(begun.kind);
    await store.abandon("key1", id, "not-the-lease");
    expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("in_progress");
    await store.abandon("key1", id, begun.token);
    expect((await store.begin("key1", id, fingerprint("a"))).kind).toBe("new");
  });
});

describe("vendor keys", () => {
  const secret = `sk-proj-${randomBytes(24).toString("base64url")}`;
  let masterDir: string;

  beforeAll(() => {
    masterDir = mkdtempSync(join(tmpdir(), "dmt-master-"));
  });
  afterAll(() => rmSync(masterDir, { recursive: true, force: true }));

  const store = (dir = masterDir) => new DynamoVendorKeys(db, names, LocalMasterKey.inDataDir(dir), clock);

  it("stores encrypted, lists the last 4 only, reveals for forwarding, replaces and deletes", async () => {
    now = T0;
    const project = "vk-project-one";
    expect(existsSync(join(masterDir, "master.key"))).toBe(false);
    const view = await store().set(project, "openai", secret);
    expect(view).toEqual({
      projectId: project,
      vendor: "openai",
      last4: secret.slice(-4),
      createdAt: T0,
      updatedAt: T0,
    });
    expect(statSync(join(masterDir, "master.key")).mode & 0o777).toBe(0o600);

    await store().set(project, "groq", `gsk_${"a".repeat(40)}wxyz`);
    expect(await store().list(project)).toEqual([
      { projectId: project, vendor: "groq", last4: "wxyz", createdAt: T0, updatedAt: T0 },
      view,
    ]);
    expect(JSON.stringify(await store().list(project))).not.toContain(secret);
    expect(await store().reveal(project, "openai")).toBe(secret);
    expect(await store().reveal(project, "anthropic")).toBeUndefined();
    expect(await store().reveal("vk-other-project", "openai")).toBeUndefined();

    now = T0 + 5000;
    const replaced = `sk-proj-${randomBytes(24).toString("base64url")}`;
    expect(await store().set(project, "openai", replaced)).toMatchObject({
      createdAt: T0,
      updatedAt: T0 + 5000,
    });
    expect(await store().reveal(project, "openai")).toBe(replaced);

    expect(await store().delete(project, "groq")).toBe(true);
    expect(await store().delete(project, "groq")).toBe(false);
    expect((await store().list(project)).map((k) => k.vendor)).toEqual(["openai"]);
    await store().set(project, "openai", secret);
  });

  it("keeps no plaintext in the table or on disk", async () => {
    const project = `vk-disk-${randomBytes(6).toString("hex")}`;
    await store().set(project, "anthropic", secret);
    const forms = [secret, Buffer.from(secret).toString("base64"), Buffer.from(secret).toString("hex")];

    const scanned = await db.send(new ScanCommand({ TableName: names.vendorKeys }));
    const wire = JSON.stringify(scanned.Items);
    expect(wire).toContain(project);
    for (const form of forms) expect(wire).not.toContain(form);
    const item = (scanned.Items ?? []).map((raw) => unmarshall(raw)).find((i) => i.projectId === project);
    expect(Object.keys(item ?? {}).sort()).toEqual(
      ["ciphertext", "createdAt", "last4", "projectId", "updatedAt", "vendor", "wrappedKey"].sort(),
    );

    // The store's files: the project id is found there (the search works), the key is not.
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)],
      );
    const disk = Buffer.concat(files(join(dataDir, "dynamodb")).map((file) => readFileSync(file)));
    expect(disk.includes(Buffer.from(project))).toBe(true);
    for (const form of forms) expect(disk.includes(Buffer.from(form))).toBe(false);
  });

  it("does not decrypt with another master key, nor as another project's key", async () => {
    const project = "vk-project-two";
    await store().set(project, "gemini", `AIza${"Q".repeat(35)}`);
    const elsewhere = mkdtempSync(join(tmpdir(), "dmt-master-"));
    await expect(store(elsewhere).reveal(project, "gemini")).rejects.toThrow(DecryptionError);
    rmSync(elsewhere, { recursive: true, force: true });

    // The same record copied under another project fails its authentication.
    const scanned = await db.send(new ScanCommand({ TableName: names.vendorKeys }));
    const raw = (scanned.Items ?? []).find((i) => i.projectId?.S === project && i.vendor?.S === "gemini");
    await db.send(
      new PutItemCommand({ TableName: names.vendorKeys, Item: { ...raw, projectId: { S: "vk-thief" } } }),
    );
    await expect(store().reveal("vk-thief", "gemini")).rejects.toThrow(DecryptionError);
  });

  it.each([
    ["a vendor we do not know", "azure", secret, "'vendor'"],
    ["a trailing newline", "openai", `${secret}\n`, "whitespace"],
    ["an inner space", "openai", "sk-proj abcdefghijklmnop", "whitespace"],
    ["a control character", "openai", "sk-proj-\u0007abcdefghijklmnop", "control characters"],
    ["a key too short", "openai", "sk-1234", "16 to 512"],
  ])("refuses %s with 400 and stores nothing", async (_label, vendor, key, why) => {
    const project = `vk-bad-${randomBytes(4).toString("hex")}`;
    const err = await store()
      .set(project, vendor, key)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).message).toContain(why);
    expect((err as ApiError).message).not.toContain(key.trim());
    expect(await store().list(project)).toEqual([]);
  });
});
