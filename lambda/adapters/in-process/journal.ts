import { appendFileSync, closeSync, openSync } from "node:fs";
import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { errorFields, type Logger } from "../../core/logger";

/** A journal file: the records appended to it and not yet delivered. */
export interface JournalSegment {
  readonly path: string;
  /** Records appended and not yet delivered (or dead-lettered). */
  pending: number;
  /** No more records go to it; it is removed once none is pending. */
  sealed: boolean;
  /** Records waiting for the next write, and that write. */
  open?: { lines: string[]; written: Promise<void> };
  /** The last write, so writes to a file never overlap. */
  tail: Promise<void>;
  /** The file's descriptor, open for appending from the first write until the segment is sealed. */
  fd?: number;
}

export interface RecoveredRecord {
  body: string;
  segment: JournalSegment;
}

const SEGMENT = /^(\d+)-(\d+)\.jsonl$/;

/** True when `pid` names a live process (a segment of a live writer is not ours to take). */
function alive(pid: number): boolean {
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Closes a segment's file, if it was opened. */
function closeFile(segment: JournalSegment): void {
  const fd = segment.fd;
  segment.fd = undefined;
  if (fd !== undefined) closeSync(fd);
}

/** The number of this process's next segment: past any a writer of the same pid left behind. */
function nextOwnSegment(names: string[]): number {
  let next = 0;
  for (const name of names) {
    const match = SEGMENT.exec(name);
    if (Number(match?.[1]) === process.pid) next = Math.max(next, Number(match?.[2]) + 1);
  }
  return next;
}

/** A segment's text, or undefined when another process took it over and removed it meanwhile. */
async function readSegment(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Reads the segments of processes that are gone and that `take` accepts; empty ones are removed. */
async function takeOver(
  dir: string,
  take: (path: string, pid: number) => boolean,
): Promise<{ recovered: RecoveredRecord[]; next: number }> {
  const recovered: RecoveredRecord[] = [];
  const names = (await readdir(dir)).sort();
  for (const name of names) {
    const match = SEGMENT.exec(name);
    const pid = Number(match?.[1]);
    const path = join(dir, name);
    if (!match || alive(pid) || !take(path, pid)) continue;
    const text = await readSegment(path);
    if (text === undefined) continue;
    const lines = text.split("\n").filter(Boolean);
    const segment: JournalSegment = { path, pending: lines.length, sealed: true, tail: Promise.resolve() };
    if (lines.length === 0) await rm(path, { force: true });
    for (const body of lines) recovered.push({ body, segment });
  }
  return { recovered, next: nextOwnSegment(names) };
}

/**
 * The local queue's write-ahead journal. A record handed to the in-process queue is appended to a
 * segment file (`<pid>-<n>.jsonl`, one JSON record a line) before `send` resolves; the queue seals the
 * segment at each delivery and the file is removed once every record in it was delivered or
 * dead-lettered. A process killed with SIGKILL leaves its undelivered records on disk, and the next
 * process on the data dir hands them to its queue again (the consumer's delivery ledger drops any that
 * were written already). Records handed over in the same tick share one write.
 */
export class QueueJournal {
  private current: JournalSegment | undefined;
  private readonly removals = new Set<Promise<void>>();
  private recovered: RecoveredRecord[];
  /** Segments of other processes taken over: never taken twice. */
  private readonly adopted = new Set<string>();
  /** The closing of the last sealed segment's file. */
  private lastSeal: Promise<void> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    private readonly logger: Logger,
    recovered: RecoveredRecord[],
    /** The next segment's number: past those recovered, which a writer of the same pid (a restarted
     * worker thread) left behind and which are removed on their own schedule. */
    private next: number,
  ) {
    this.recovered = recovered;
  }

  /** Opens the journal in `dir`, taking over the segments of processes that are gone. */
  static async open(dir: string, logger: Logger): Promise<QueueJournal> {
    await mkdir(dir, { recursive: true });
    const { recovered, next } = await takeOver(dir, () => true);
    if (recovered.length > 0) {
      logger.warn("undelivered records recovered from the queue journal", {
        metric: "warehouse.recovered",
        count: recovered.length,
      });
    }
    const journal = new QueueJournal(dir, logger, recovered, next);
    for (const { segment } of recovered) journal.adopted.add(segment.path);
    return journal;
  }

  /**
   * Opens the journal in `dir` to append only (a short-lived process, the CLI): it reads no segment,
   * so a server delivering and removing them meanwhile cannot fail it, and takes over none, so each
   * record is delivered by the server alone, once.
   */
  static async forAppending(dir: string, logger: Logger): Promise<QueueJournal> {
    await mkdir(dir, { recursive: true });
    return new QueueJournal(dir, logger, [], nextOwnSegment(await readdir(dir)));
  }

  /**
   * Takes over the segments other processes left since the journal opened (a CLI command that
   * appended an event and exited); the caller queues them.
   */
  async adopt(): Promise<RecoveredRecord[]> {
    const { recovered } = await takeOver(
      this.dir,
      (path, pid) => pid !== process.pid && !this.adopted.has(path),
    );
    for (const { segment } of recovered) this.adopted.add(segment.path);
    return recovered;
  }

  /** The records a previous process left undelivered; handed out once. */
  takeRecovered(): RecoveredRecord[] {
    const taken = this.recovered;
    this.recovered = [];
    return taken;
  }

  /** Appends a record; resolves once it is on disk, with the segment `delivered` must be told about. */
  async append(body: string): Promise<JournalSegment> {
    this.current ??= {
      path: join(this.dir, `${process.pid}-${String(this.next++).padStart(9, "0")}.jsonl`),
      pending: 0,
      sealed: false,
      tail: Promise.resolve(),
    };
    const segment = this.current;
    segment.pending++;
    try {
      await this.write(segment, body);
    } catch (err) {
      this.delivered(segment);
      throw err;
    }
    return segment;
  }

  /** Later records go to a new segment; this one goes once its records are delivered. */
  seal(): void {
    const segment = this.current;
    if (!segment) return;
    this.current = undefined;
    segment.sealed = true;
    // No write comes after the seal, so the file closes once the last one is done.
    segment.tail = segment.tail
      .then(() => closeFile(segment))
      .catch((err: unknown) =>
        this.logger.warn("a queue journal segment could not be closed", errorFields(err)),
      );
    this.lastSeal = segment.tail;
    this.removeIfDone(segment);
  }

  /** One record of `segment` was delivered or dead-lettered. */
  delivered(segment: JournalSegment): void {
    segment.pending--;
    this.removeIfDone(segment);
  }

  /**
   * Appends on the calling thread, once per tick, to a descriptor kept open: a short write to the page
   * cache costs the caller less than an asynchronous one (the hops through libuv's pool and back, the
   * promise machinery of a FileHandle), on the server's thread as on the warehouse worker's. (A worker
   * that dies leaves its descriptor open until the process exits: one per death, which is logged.)
   */
  private write(segment: JournalSegment, body: string): Promise<void> {
    if (!segment.open) {
      const lines: string[] = [];
      const written = segment.tail.then(() => {
        segment.open = undefined; // records from now on wait for the next write
        segment.fd ??= openSync(segment.path, "a");
        appendFileSync(segment.fd, `${lines.join("\n")}\n`);
      });
      segment.open = { lines, written };
      segment.tail = written.catch(() => {});
    }
    segment.open.lines.push(body);
    return segment.open.written;
  }

  /** Waits for the removal of delivered segments: a segment left behind would be sent again later. */
  async close(): Promise<void> {
    this.seal();
    await this.lastSeal;
    while (this.removals.size > 0) await Promise.all(this.removals);
  }

  private removeIfDone(segment: JournalSegment): void {
    if (!segment.sealed || segment.pending > 0) return;
    const removal = segment.tail
      .then(() => rm(segment.path, { force: true }))
      .catch((err: unknown) =>
        this.logger.warn("a delivered queue journal segment could not be removed", errorFields(err)),
      )
      .finally(() => {
        this.removals.delete(removal);
        this.adopted.delete(segment.path);
      });
    this.removals.add(removal);
  }
}
