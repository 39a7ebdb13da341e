import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Worker } from "node:worker_threads";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { syntheticRecord } from "../../bench/warehouse-records";
import { DynamoInteractionIndex } from "../../lambda/adapters/dynamodb/interactions";
import { jsonLogger, type Logger } from "../../lambda/core/logger";
import type { InteractionRecord } from "../../lambda/core/record";
import { parseLocalConfig } from "../../lambda/local/config";
import { runningStoreEndpoint, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { startEmbeddedHost } from "../../lambda/local/host";
import { type LocalStore, openLocalStore } from "../../lambda/local/store";
import {
  startThreadedWarehouse,
  type ThreadedWarehouse,
  type WorkerRequest,
} from "../../lambda/local/warehouse-thread";

const PROJECT = "proj-thread";
/** Something a client sent in a call: it lands in the warehouse, never in a log line. */
const SECRET = "sk-proj-SENTINEL-never-logged-0123456789";

const record = (i: number): InteractionRecord => ({
  ...syntheticRecord(i, { projectId: PROJECT }),
  request_body: JSON.stringify({ model: "m", messages: [{ role: "user", content: SECRET }] }),
});
const recordsFrom = (first: number, count: number) =>
  Array.from({ length: count }, (_, i) => record(first + i));
const idsOf = (records: InteractionRecord[]) => records.map((r) => r.transaction_id).sort();

/** The server's logger, writing its JSON lines where the test reads them. */
function capturedLogger(): { logger: Logger; raw: string[]; lines: () => Record<string, unknown>[] } {
  const raw: string[] = [];
  return {
    logger: jsonLogger("debug", (line) => raw.push(line)),
    raw,
    lines: () => raw.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

/** The worker threads this thread starts from now on, seen through Node's own `worker` event. */
function watchWorkers(): { started: Worker[]; stop(): void } {
  const started: Worker[] = [];
  const onWorker = (worker: Worker) => started.push(worker);
  process.on("worker", onWorker);
  return { started, stop: () => process.off("worker", onWorker) };
}

/** Polls until `check` holds; the cap is a number of tries, so a stuck worker fails the test. */
async function until(check: () => boolean, what: string): Promise<void> {
  for (let tries = 0; tries < 2000; tries++) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`gave up waiting for ${what}`);
}

const journalDir = (dataDir: string) => join(dataDir, "warehouse-queue");
/** The records waiting in the queue's journal, one JSON line each. */
const journaled = (dataDir: string) =>
  readdirSync(journalDir(dataDir)).flatMap((name) =>
    readFileSync(join(journalDir(dataDir), name), "utf8")
      .split("\n")
      .filter(Boolean),
  );

/** The transaction ids of the project's rows, as the export query reads them from the Parquet files. */
async function writtenIds(warehouse: ThreadedWarehouse): Promise<string[]> {
  const ids: string[] = [];
  const query = { projectId: PROJECT, start: "2026-01-15", end: "2026-01-15", filters: {} };
  for await (const batch of warehouse.exports.query.rows(query, "json")) {
    for (const row of batch) ids.push((JSON.parse(row) as { transaction_id: string }).transaction_id);
  }
  return ids.sort();
}

describe("the threaded warehouse", () => {
  let dir: string;
  let local: LocalStore;
  let warehouse: ThreadedWarehouse | undefined;
  let workers: ReturnType<typeof watchWorkers>;
  let log: ReturnType<typeof capturedLogger>;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), "dmt-thread-"));
    local = await openLocalStore(dir);
    // After the store: its dynalite runs in a worker thread of its own.
    workers = watchWorkers();
    log = capturedLogger();
  });
  afterEach(async () => {
    workers.stop();
    await warehouse?.close();
    warehouse = undefined;
    await local.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Records are delivered only when a test asks: the flush interval is far off. */
  async function start(): Promise<ThreadedWarehouse> {
    warehouse = await startThreadedWarehouse({
      dataDir: dir,
      logger: log.logger,
      flushIntervalMs: 60_000,
      store: local,
      purgers: [],
    });
    return warehouse;
  }

  it("writes each record sent once, queryable and in the dashboard's index, and close ends its worker", async () => {
    const warehouse = await start();
    expect(workers.started).toHaveLength(1);
    const records = recordsFrom(0, 30);
    await Promise.all(records.map((r) => warehouse.queue.send(r)));
    // A send resolves once the record is on disk, before any delivery.
    expect(journaled(dir)).toHaveLength(30);

    await warehouse.queue.deliver();
    expect(await writtenIds(warehouse)).toEqual(idsOf(records));
    const index = new DynamoInteractionIndex(local.db, local.tables);
    for (const r of records) {
      expect((await index.get(PROJECT, r.transaction_id))?.transaction_id).toBe(r.transaction_id);
    }

    await warehouse.close();
    expect(readdirSync(journalDir(dir))).toEqual([]);
    // Ended, not just unreferenced: a thread that exited has no id.
    expect(workers.started.map((w) => w.threadId)).toEqual([-1]);
    expect(log.lines().filter((l) => l.level === "error")).toEqual([]);
  });

  it("posts the records of one turn in one message, ahead of a delivery asked for in the same turn", async () => {
    const warehouse = await start();
    const [worker] = workers.started;
    if (!worker) throw new Error("no warehouse worker started");
    const posted = vi.spyOn(worker, "postMessage");
    const records = recordsFrom(0, 25);
    const sent = records.map((r) => warehouse.queue.send(r));
    const delivered = warehouse.queue.deliver();
    await Promise.all([...sent, delivered]);

    const requests = posted.mock.calls.map(([request]) => request as WorkerRequest);
    expect(requests.map((r) => (r.type === "send" ? r.bodies.length : r.type))).toEqual([25, "deliver"]);
    expect(await writtenIds(warehouse)).toEqual(idsOf(records));
    // The next turn's records go in a message of their own.
    await Promise.all(recordsFrom(25, 3).map((r) => warehouse.queue.send(r)));
    expect(posted.mock.calls).toHaveLength(3);
  });

  it("hands a dead worker's records to a new one: every record sent lands once", async () => {
    const warehouse = await start();
    const [first] = workers.started;
    if (!first) throw new Error("no warehouse worker started");
    const onDisk = recordsFrom(0, 20);
    await Promise.all(onDisk.map((r) => warehouse.queue.send(r)));
    expect(journaled(dir)).toHaveLength(20);

    // Mid-stream: some sends reach the worker as it is ended (some of those may reach its journal),
    // the later ones are posted to a worker already ending; none is answered by it.
    const beforeDeath = recordsFrom(20, 10).map((r) => warehouse.queue.send(r));
    const terminated = first.terminate();
    const afterDeath = recordsFrom(30, 10).map((r) => warehouse.queue.send(r));
    await terminated;
    // They resolve once the new worker has them in the journal.
    await Promise.all([...beforeDeath, ...afterDeath]);
    expect(workers.started).toHaveLength(2);
    const restarted = log.lines().find((l) => l.metric === "warehouse.worker_restarted");
    expect(restarted).toMatchObject({ level: "error", message: expect.stringContaining("stopped") });
    expect(restarted?.waiting).toBeGreaterThanOrEqual(10);

    await warehouse.queue.deliver();
    expect(await writtenIds(warehouse)).toEqual(idsOf(recordsFrom(0, 40)));
    await warehouse.close();
    expect(readdirSync(journalDir(dir))).toEqual([]);
    expect(workers.started.map((w) => w.threadId)).toEqual([-1, -1]);
  });

  it("logs a worker that fails through the server's logger without what records hold, and recovers", async () => {
    const warehouse = await start();
    const [first] = workers.started;
    if (!first) throw new Error("no warehouse worker started");
    const records = recordsFrom(0, 10);
    await Promise.all(records.map((r) => warehouse.queue.send(r)));
    // A journal segment that cannot be read (a folder named like one): the next worker fails as it starts.
    const unreadable = join(journalDir(dir), `${process.pid}-999999999.jsonl`);
    mkdirSync(unreadable);
    await first.terminate();
    const late = record(10);
    const sent = warehouse.queue.send(late);
    await until(
      () => log.lines().some((l) => l.message === "the warehouse worker failed"),
      "the failure's log",
    );
    expect(log.lines()).toContainEqual({
      time: expect.any(String),
      level: "error",
      message: "the warehouse worker failed",
      error: "Error",
      detail: expect.stringContaining("EISDIR"),
    });

    // The fault gone, the worker started after the pause takes over the journal and the waiting send.
    rmSync(unreadable, { recursive: true });
    await sent;
    await warehouse.queue.deliver();
    expect(await writtenIds(warehouse)).toEqual(idsOf([...records, late]));
    await warehouse.close();
    expect(readdirSync(journalDir(dir))).toEqual([]);
    expect(workers.started.every((w) => w.threadId === -1)).toBe(true);
    // Nothing a record holds reached the log, though every request the worker had carried one.
    expect(log.raw.join("")).not.toContain(SECRET);
    expect(log.raw.join("")).not.toContain("request_body");
  });
  it("gives up on a worker that cannot start while closing: the shutdown ends, journaled records wait", async () => {
    const warehouse = await start();
    const [first] = workers.started;
    if (!first) throw new Error("no warehouse worker started");
    const records = recordsFrom(0, 5);
    await Promise.all(records.map((r) => warehouse.queue.send(r)));
    // A fault that stays: every worker after this one fails as it starts.
    const unreadable = join(journalDir(dir), `${process.pid}-999999999.jsonl`);
    mkdirSync(unreadable);
    await first.terminate();
    await warehouse.close();
    expect(log.lines()).toContainEqual(
      expect.objectContaining({
        level: "error",
        message: "the warehouse worker cannot start; closing without it",
        count: 0,
      }),
    );
    expect(workers.started.every((w) => w.threadId === -1)).toBe(true);
    // The records sent before are in the journal: the next start, the fault gone, writes them.
    rmSync(unreadable, { recursive: true });
    const waiting = journaled(dir).map(
      (line) => (JSON.parse(line) as { transaction_id: string }).transaction_id,
    );
    expect(waiting.sort()).toEqual(idsOf(records));
    const next = await start();
    await next.queue.deliver();
    expect(await writtenIds(next)).toEqual(idsOf(records));
  });
});

describe("an embedded host that fails to start", () => {
  let dir: string;
  let taken: Server | undefined;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "dmt-start-fail-"));
  });
  afterEach(async () => {
    await new Promise((resolve) => (taken ? taken.close(resolve) : resolve(undefined)));
    taken = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  /** A port some other server listens on. */
  async function takenPort(): Promise<string> {
    const server = createServer();
    taken = server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return String((server.address() as { port: number }).port);
  }

  const failures: [string, () => Promise<Record<string, string>>, RegExp][] = [
    [
      "its warehouse journal path is a file",
      async () => {
        writeFileSync(join(dir, "warehouse-queue"), "not a folder");
        return {};
      },
      /^The warehouse worker did not start \(EEXIST: .*warehouse-queue/,
    ],
    [
      "its TLS certificate is missing",
      async () => ({ DMT_TLS_CERT: join(dir, "missing.pem"), DMT_TLS_KEY: join(dir, "missing.pem") }),
      /ENOENT.*missing\.pem/,
    ],
    [
      "its port is taken",
      async () => ({ PORT: await takenPort() }),
      /^Cannot listen on 127\.0\.0\.1:\d+ \(EADDRINUSE\): .*set PORT to another port/,
    ],
    [
      // 192.0.2.1 is a documentation address (RFC 5737): no interface here has it.
      "its host is not this machine's",
      async () => ({ HOST: "192.0.2.1" }),
      /^Cannot listen on 192\.0\.2\.1:0 \(EADDRNOTAVAIL\): .*set HOST to one, such as 127\.0\.0\.1/,
    ],
  ];

  it.each(failures)("rejects when %s, and closes what it opened", async (_, prepare, error) => {
    const env = await prepare();
    const { logger } = capturedLogger();
    const config = parseLocalConfig({ PORT: "0", DMT_DATA_DIR: dir, DMT_METERING: "off", ...env });
    await expect(startEmbeddedHost(config, logger)).rejects.toThrow(error);
    // The store is closed: no endpoint published, and its LevelDB folder opens again in this process.
    expect(runningStoreEndpoint(dir)).toBeUndefined();
    const reopened = await startEmbeddedDynamo(dir);
    await reopened.close();
  });
});

/** Runs test/integration/embedded-host-exit.ts in a child process that must exit on its own. */
function runToExit(mode: "host" | "warehouse", env: Record<string, string>): Promise<string> {
  const script = new URL("./embedded-host-exit.ts", import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ["--import", "tsx", script, mode],
      // The cap only bounds a hang; the child normally exits long before.
      { env: { ...process.env, PORT: "0", DMT_METERING: "off", ...env }, timeout: 100_000 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`the child did not exit on its own (${err.message}): ${stderr}`));
        else resolve(stdout.trim());
      },
    );
  });
}

describe("a process that used the threaded warehouse", () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "dmt-exit-"));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it("exits on its own once the warehouse is closed", async () => {
    expect(await runToExit("warehouse", { DMT_DATA_DIR: dir })).toBe("closed");
  });

  it("exits on its own after the embedded host failed to start", async () => {
    writeFileSync(join(dir, "warehouse-queue"), "not a folder");
    expect(await runToExit("host", { DMT_DATA_DIR: dir })).toMatch(
      /^failed: The warehouse worker did not start \(EEXIST/,
    );
  });
});
