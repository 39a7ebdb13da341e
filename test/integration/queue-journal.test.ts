import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { QueueJournal } from "../../lambda/adapters/in-process/journal";
import { silentLogger } from "../../lambda/core/logger";
import { eventsJournalDir, journalQueue } from "../../lambda/local/events";
import { until } from "../support/reliability";

/** The local queue's journal on disk: what a writer that restarts in the same process takes over. */
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** The journal's files this process holds open. */
const openIn = (dir: string) =>
  readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir);
    } catch {
      return false; // closed while listing
    }
  });

describe("queue journal", () => {
  it("a writer restarted in the same process appends past the segments it took over", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-journal-"));
    dirs.push(dir);
    // A first writer (a worker thread that then died) leaves two undelivered records.
    const first = await QueueJournal.open(dir, silentLogger);
    await first.append('{"transaction_id":"a"}');
    await first.append('{"transaction_id":"b"}');
    expect(readdirSync(dir)).toEqual([`${process.pid}-000000000.jsonl`]);

    // Its successor, same pid, takes them over and writes new records to a segment of its own.
    const second = await QueueJournal.open(dir, silentLogger);
    const recovered = second.takeRecovered();
    expect(recovered.map((r) => r.body)).toEqual(['{"transaction_id":"a"}', '{"transaction_id":"b"}']);
    const fresh = await second.append('{"transaction_id":"c"}');
    expect(readdirSync(dir).sort()).toEqual([
      `${process.pid}-000000000.jsonl`,
      `${process.pid}-000000001.jsonl`,
    ]);

    // The recovered records delivered: their segment goes, and the undelivered new one stays on disk.
    for (const record of recovered) second.delivered(record.segment);
    second.seal();
    await expect.poll(() => readdirSync(dir)).toEqual([`${process.pid}-000000001.jsonl`]);
    second.delivered(fresh);
    await expect.poll(() => readdirSync(dir)).toEqual([]);
  });

  it("a writer that closes with records pending (the CLI) leaves them on disk and no file open", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-journal-"));
    dirs.push(dir);
    const journal = await QueueJournal.open(dir, silentLogger);
    await journal.append('{"event":"key.created"}');
    expect(openIn(dir)).toHaveLength(1);
    await journal.close();
    // A descriptor left open would stay open until the process exits.
    expect(openIn(dir)).toEqual([]);
    const [segment] = readdirSync(dir);
    expect(readFileSync(join(dir, segment as string), "utf8")).toBe('{"event":"key.created"}\n');
  });

  it("records are on disk when append resolves, through one descriptor held until the segment is sealed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "dmt-journal-"));
    dirs.push(dir);
    const journal = await QueueJournal.open(dir, silentLogger);
    // Records of one tick share a segment and a write.
    const [first, second] = await Promise.all([journal.append('{"n":1}'), journal.append('{"n":2}')]);
    expect(first).toBe(second);
    const held = openIn(dir);
    expect(held).toHaveLength(1);
    await journal.append('{"n":3}');
    expect(openIn(dir)).toEqual(held);
    const [segment] = readdirSync(dir);
    expect(readFileSync(join(dir, segment as string), "utf8")).toBe('{"n":1}\n{"n":2}\n{"n":3}\n');
    journal.seal();
    await until(() => (openIn(dir).length === 0 ? true : undefined));

    // A successor (the worker restarted) takes them over; delivered, the segment goes.
    const successor = await QueueJournal.open(dir, silentLogger);
    const recovered = successor.takeRecovered();
    expect(recovered.map((r) => r.body)).toEqual(['{"n":1}', '{"n":2}', '{"n":3}']);
    for (const record of recovered) successor.delivered(record.segment);
    await successor.close();
    expect(readdirSync(dir)).toEqual([]);
  });

  it("a CLI's journal opens, appends and closes while the server delivers and removes other segments", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "dmt-journal-"));
    dirs.push(dataDir);
    const dir = eventsJournalDir(dataDir);
    mkdirSync(dir, { recursive: true });
    const server = await QueueJournal.open(dir, silentLogger);
    // No process has this pid (Linux's pid_max is at most 2^22): the segments of CLI commands gone.
    const gone = 4_194_304 + 7;
    for (let round = 0; round < 5; round++) {
      for (let n = 0; n < 100; n++) {
        const name = `${gone}-${String(round * 100 + n).padStart(9, "0")}.jsonl`;
        writeFileSync(join(dir, name), `{"event":${n}}\n`);
      }
      const taken = await server.adopt();
      expect(taken).toHaveLength(100);
      // The server delivers them and removes their files while a new command opens the journal.
      const cli = journalQueue(dataDir, silentLogger);
      for (const record of taken) server.delivered(record.segment);
      const { queue, close } = await cli;
      await queue.send(`{"event":"credits.granted","round":${round}}`, 0);
      await close();
    }
    await server.close();
    const left = readdirSync(dir);
    // Only the commands' own segments, one event each, for the server of their data dir to deliver.
    expect(left).toHaveLength(5);
    expect(left.every((name) => name.startsWith(`${process.pid}-`))).toBe(true);
  });
});
