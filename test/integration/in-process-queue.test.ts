import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { FsObjectStore } from "../../lambda/adapters/fs/object-store";
import { FolderDeadLetters } from "../../lambda/adapters/in-process/dead-letters";
import { InProcessQueue, type InProcessQueueOptions } from "../../lambda/adapters/in-process/queue";
import { silentLogger } from "../../lambda/core/logger";

/**
 * How the local queue gathers records into batches while its consumer is busy: a delivery takes what
 * is held when it begins, and what arrives meanwhile goes together in the next one, not one small
 * batch after another (which, under steady traffic, made a Parquet file and an index write every few
 * dozen milliseconds).
 */
let dir: string;
let batches: string[][];
let gate: Promise<void> | undefined;
let open: () => void = () => {};
let queue: InProcessQueue;

/** A queue whose timer never fires here: only `deliver()` delivers. */
function queueWith(handler: InProcessQueueOptions["handler"]): InProcessQueue {
  return new InProcessQueue({
    handler,
    deadLetters: new FolderDeadLetters(new FsObjectStore(dir)),
    logger: silentLogger,
    flushIntervalMs: 60_000,
    batchSize: 100,
    visibilityTimeoutMs: 0,
    maxReceives: 3,
  });
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "dmt-in-process-queue-"));
  batches = [];
  queue = queueWith(async (batch) => {
    batches.push(batch.Records.map((r) => r.body));
    await gate;
    return { batchItemFailures: [] };
  });
});
afterEach(async () => {
  open();
  gate = undefined;
  await queue.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Holds the consumer inside its next batch until `open()`. */
function holdConsumer(): void {
  gate = new Promise((resolve) => {
    open = resolve;
  });
}

const body = (n: number) => JSON.stringify({ n });

describe("the in-process queue's batches", () => {
  it("leaves what arrives during a delivery to the next one, which takes it in one batch", async () => {
    holdConsumer();
    await queue.enqueue(body(1));
    const first = queue.deliver();
    for (let n = 2; n <= 6; n++) await queue.enqueue(body(n));
    open();
    await first;
    expect(batches).toEqual([[body(1)]]);
    expect(queue.depth).toBe(5);

    await queue.deliver();
    expect(batches).toEqual([[body(1)], [2, 3, 4, 5, 6].map(body)]);
    expect(queue.depth).toBe(0);
  });

  it("answers a deliver() made during a delivery once everything handed over before it is written", async () => {
    holdConsumer();
    await queue.enqueue(body(1));
    const first = queue.deliver();
    await queue.enqueue(body(2));
    const second = queue.deliver();
    // Callers meanwhile share the one delivery queued after the current one.
    expect(queue.deliver()).toBe(second);
    open();
    await second;
    await first;
    expect(batches).toEqual([[body(1)], [body(2)]]);
    expect(queue.depth).toBe(0);
  });

  it("still retries a failed message within the delivery when it is visible again at once", async () => {
    const failing = queueWith(async (batch) => ({
      batchItemFailures: batch.Records.map((r) => ({ itemIdentifier: r.messageId })),
    }));
    await failing.enqueue(body(1));
    await failing.deliver();
    // Three receives, then the dead letters: nothing left waiting.
    expect(failing.depth).toBe(0);
    await failing.close();
  });
});
