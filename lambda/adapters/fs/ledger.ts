import { appendFile, mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { type ClaimRequest, type Delivery, type DeliveryLedger, WRITTEN } from "../../core/delivery-ledger";

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** One day's file of the local ledger, in memory: the latest claim of each id, the committed files. */
interface Day {
  day: string;
  claims: Map<string, string>;
  committed: Set<string>;
}

/** A line of the local ledger's files. */
type Entry = { claim: string; ids: string[] } | { commit: string };

/** The file that ids of the ledger's first format (one written id per line) count as claimed on. */
const FIRST_FORMAT = "";

const emptyDay = (day: string): Day => ({ day, claims: new Map(), committed: new Set([FIRST_FORMAT]) });

/**
 * The local ledger, for one process (the local stack's consumer): state in memory, each change
 * appended as a JSON line to one file per UTC day under `dir`. Locally a message is redelivered within
 * seconds, so the ledger keeps today's and yesterday's entries and drops older files.
 *
 * A claim is live while this process writes its file; claims read back at start belong to a process
 * that ended, so none is. Abandoning needs no line for the same reason. Each line is written after a
 * newline: a line a killed process left half-written stays on its own and does not parse, and its
 * claim's put never ran.
 */
export class FileDeliveryLedger implements DeliveryLedger {
  private current: Day;
  private previous: Day;
  /** Files this process claimed ids for and has not committed or abandoned. */
  private readonly writing = new Set<string>();
  /** Appends run one after another: one line per write, in the order of the changes. */
  private appending: Promise<void> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    private readonly clock: () => number,
    current: Day,
    previous: Day,
  ) {
    this.current = current;
    this.previous = previous;
  }

  static async open(dir: string, clock: () => number = Date.now): Promise<FileDeliveryLedger> {
    await mkdir(dir, { recursive: true });
    const yesterday = dayOf(clock() - DAY_MS);
    for (const name of await readdir(dir)) {
      if (name.endsWith(".ids") && name < `${yesterday}.ids`) await rm(join(dir, name), { force: true });
    }
    const load = async (day: string): Promise<Day> => {
      const loaded = emptyDay(day);
      const text = await readFile(join(dir, `${day}.ids`), "utf8").catch(() => "");
      for (const line of text.split("\n")) {
        if (!line) continue;
        if (!line.startsWith("{")) {
          loaded.claims.set(line, FIRST_FORMAT);
          continue;
        }
        let entry: Entry;
        try {
          entry = JSON.parse(line) as Entry;
        } catch {
          continue; // cut short by a killed process
        }
        if ("commit" in entry) loaded.committed.add(entry.commit);
        else for (const id of entry.ids) loaded.claims.set(id, entry.claim);
      }
      return loaded;
    };
    return new FileDeliveryLedger(dir, clock, await load(dayOf(clock())), await load(yesterday));
  }

  async lookup(ids: readonly string[]): Promise<Map<string, Delivery>> {
    const found = new Map<string, Delivery>();
    for (const id of ids) {
      const file = this.current.claims.get(id) ?? this.previous.claims.get(id);
      if (file === undefined) continue;
      const committed = this.current.committed.has(file) || this.previous.committed.has(file);
      found.set(id, committed ? WRITTEN : { state: "claimed", file, live: this.writing.has(file) });
    }
    return found;
  }

  async claim(file: string, requests: readonly ClaimRequest[]): Promise<Set<string>> {
    const day = this.today();
    const won: string[] = [];
    for (const { id, replaces } of requests) {
      if ((day.claims.get(id) ?? this.previous.claims.get(id)) === replaces) won.push(id);
    }
    if (won.length === 0) return new Set();
    // In memory first, so that a claim made meanwhile sees these; if the line is not written, the
    // consumer abandons the file, which was not put.
    for (const id of won) day.claims.set(id, file);
    this.writing.add(file);
    await this.append(day.day, { claim: file, ids: won });
    return new Set(won);
  }

  async commit(file: string): Promise<void> {
    const day = this.today();
    day.committed.add(file);
    this.writing.delete(file);
    await this.append(day.day, { commit: file });
  }

  async abandon(file: string): Promise<void> {
    this.writing.delete(file);
  }

  private today(): Day {
    const day = dayOf(this.clock());
    if (day !== this.current.day) {
      this.previous = this.current;
      this.current = emptyDay(day);
    }
    return this.current;
  }

  private append(day: string, entry: Entry): Promise<void> {
    const write = this.appending.then(() =>
      appendFile(join(this.dir, `${day}.ids`), `\n${JSON.stringify(entry)}`),
    );
    this.appending = write.catch(() => undefined);
    return write;
  }
}
