import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type DynamoDBClient, PutItemCommand, ScanCommand } from "@aws-sdk/client-dynamodb";
import { unmarshall } from "@aws-sdk/util-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoIdempotency } from "../../lambda/adapters/dynamodb/idempotency";
import { DynamoRateLimiter } from "../../lambda/adapters/dynamodb/rate-limit";
import { type TableNames, tableNames } from "../../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../../lambda/adapters/fs/master-key";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { idempotencyContract } from "../support/contracts/idempotency";
import { rateLimiterContract } from "../support/contracts/rate-limiter";
import { vendorKeysContract } from "../support/contracts/vendor-keys";

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

// The port's cases (core/rate-limit.ts): each "process" a limiter on a client of its own.
rateLimiterContract("DynamoRateLimiter over dynalite", async (contractClock) => ({
  limiter: new DynamoRateLimiter(db, names, contractClock),
  another: () => new DynamoRateLimiter(newClient(), names, contractClock),
  close: async () => {},
}));

describe("rate limits over DynamoDB", () => {
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

describe("a key's rate-limit bucket split over shards (Lambda)", () => {
  // 6,000 rpm and a burst of 40: two shards of 3,000 rpm and 20 each (core/rate-limit.ts rateShardCount).
  const LARGE = { rpm: 6000, burst: 40 };

  it("lets one process spend the key's whole burst, its own shard first, with the key's headers", async () => {
    now = T0;
    const { client, commands } = countingClient();
    const limiter = new DynamoRateLimiter(client, names, clock, { shards: 16, shard: 0 });
    const bucket = newBucket();
    for (let i = 1; i <= 40; i++) {
      expect(await limiter.check(bucket, LARGE)).toMatchObject({
        allowed: true,
        limit: 6000,
        remaining: 40 - i,
      });
    }
    // Every shard short: refused with the key's limit, the soonest token (one shard interval, 20 ms).
    commands.length = 0;
    expect(await limiter.check(bucket, LARGE)).toEqual({
      allowed: false,
      limit: 6000,
      remaining: 0,
      reset: T0 / 1000 + 1,
      retryAfterSeconds: 1,
    });
    // Both shards seen exhausted: refused with no store call.
    expect(commands).toEqual([]);
    // 20 ms refill one token in each shard: two requests, not more.
    now = T0 + 20;
    expect((await limiter.check(bucket, LARGE)).allowed).toBe(true);
    expect((await limiter.check(bucket, LARGE)).allowed).toBe(true);
    expect((await limiter.check(bucket, LARGE)).allowed).toBe(false);
    // An hour on, both shards are full again: the key's burst, not more, less this request.
    now = T0 + 3_600_000;
    expect(await limiter.check(bucket, LARGE)).toMatchObject({ allowed: true, remaining: 39 });
  });

  it("never lets processes on different shards past the key's burst together", async () => {
    now = T0;
    const bucket = newBucket();
    const processes = [0, 1, 0, 1].map(
      (shard) => new DynamoRateLimiter(newClient(), names, clock, { shards: 16, shard }),
    );
    let allowed = 0;
    for (let i = 0; i < 80; i++) {
      if ((await (processes[i % processes.length] as DynamoRateLimiter).check(bucket, LARGE)).allowed)
        allowed++;
    }
    expect(allowed).toBe(40);
    // A second later the key holds its burst again, all processes together no more.
    now = T0 + 1000;
    const decisions = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        (processes[i % processes.length] as DynamoRateLimiter).check(bucket, LARGE),
      ),
    );
    expect(decisions.filter((d) => d.allowed)).toHaveLength(40);
  });

  it("spreads a large key's writes over its shards' items, none on the key's own", async () => {
    now = T0;
    const bucket = newBucket();
    const limit = { rpm: 120_000, burst: 10_000 };
    for (let shard = 0; shard < 16; shard++) {
      const limiter = new DynamoRateLimiter(newClient(), names, clock, { shards: 16, shard });
      expect(await limiter.check(bucket, limit)).toMatchObject({ allowed: true, remaining: 9_999 });
    }
    const scanned = await db.send(new ScanCommand({ TableName: names.rateLimits, ConsistentRead: true }));
    const ids = (scanned.Items ?? [])
      .map((raw) => unmarshall(raw).bucketId as string)
      .filter((id) => id === bucket || id.startsWith(`${bucket}#`))
      .sort();
    expect(ids).toEqual(Array.from({ length: 16 }, (_, k) => `${bucket}#s${k}`).sort());
  });

  it("keeps a tier's bucket one item however many shards the host allows", async () => {
    now = T0;
    const bucket = newBucket();
    const limiter = new DynamoRateLimiter(newClient(), names, clock, { shards: 16 });
    for (let i = 1; i <= 100; i++) await limiter.check(bucket, { rpm: 600, burst: 1000 });
    const scanned = await db.send(new ScanCommand({ TableName: names.rateLimits, ConsistentRead: true }));
    const ids = (scanned.Items ?? [])
      .map((raw) => unmarshall(raw).bucketId as string)
      .filter((id) => id === bucket || id.startsWith(`${bucket}#`));
    expect(ids).toEqual([bucket]);
  });
});

idempotencyContract("DynamoIdempotency over dynalite", async (contractClock) => ({
  store: new DynamoIdempotency(db, names, contractClock),
  another: () => new DynamoIdempotency(newClient(), names, contractClock),
  close: async () => {},
}));

vendorKeysContract("DynamoVendorKeys over dynalite", async (contractClock) => {
  const masters = mkdtempSync(join(tmpdir(), "dmt-master-"));
  const master = LocalMasterKey.inDataDir(join(masters, "one"));
  const other = LocalMasterKey.inDataDir(join(masters, "two"));
  return {
    store: new DynamoVendorKeys(db, names, master, contractClock),
    withOtherMasterKey: () => new DynamoVendorKeys(db, names, other, contractClock),
    async stored() {
      const scanned = await db.send(new ScanCommand({ TableName: names.vendorKeys }));
      return (scanned.Items ?? []).map((raw) => unmarshall(raw));
    },
    async copy(projectId, vendor, toProjectId) {
      const scanned = await db.send(new ScanCommand({ TableName: names.vendorKeys }));
      const raw = (scanned.Items ?? []).find((i) => i.projectId?.S === projectId && i.vendor?.S === vendor);
      await db.send(
        new PutItemCommand({ TableName: names.vendorKeys, Item: { ...raw, projectId: { S: toProjectId } } }),
      );
    },
    close: async () => rmSync(masters, { recursive: true, force: true }),
  };
});

describe("vendor keys over DynamoDB", () => {
  const secret = `sk-proj-${randomBytes(24).toString("base64url")}`;
  let masterDir: string;

  beforeAll(() => {
    masterDir = mkdtempSync(join(tmpdir(), "dmt-master-"));
  });
  afterAll(() => rmSync(masterDir, { recursive: true, force: true }));

  const store = (dir = masterDir) => new DynamoVendorKeys(db, names, LocalMasterKey.inDataDir(dir), clock);

  it("makes the master key file on first use, readable by its owner only", async () => {
    expect(existsSync(join(masterDir, "master.key"))).toBe(false);
    await store().set("vk-project-file", "openai", secret);
    expect(statSync(join(masterDir, "master.key")).mode & 0o777).toBe(0o600);
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
});
