import { appendFile, mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";

/**
 * Which records already became rows. Queues deliver at least once (and a producer may send a record
 * twice after an ambiguous failure); the consumer commits ids after their file is written and drops
 * any id already committed, so each record lands once.
 */
export interface DeliveryLedger {
  /** The ids among `ids` already committed. */
  committed(ids: string[]): Promise<Set<string>>;
  commit(ids: string[]): Promise<void>;
}

const DAY_MS = 86_400_000;
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * The local ledger: ids in memory, appended to one file per UTC day under `dir`. Locally a message is
 * redelivered within seconds, so the ledger keeps today's and yesterday's ids and drops older files.
 */
export class FileDeliveryLedger implements DeliveryLedger {
  private current: { day: string; ids: Set<string> };
  private previous: Set<string>;

  private constructor(
    private readonly dir: string,
    private readonly clock: () => number,
    current: { day: string; ids: Set<string> },
    previous: Set<string>,
  ) {
    this.current = current;
    this.previous = previous;
  }

  static async open(dir: string, clock: () => number = Date.now): Promise<FileDeliveryLedger> {
    await mkdir(dir, { recursive: true });
    const today = dayOf(clock());
    const yesterday = dayOf(clock() - DAY_MS);
    const load = async (day: string) => {
      const text = await readFile(join(dir, `${day}.ids`), "utf8").catch(() => "");
      return new Set(text.split("\n").filter(Boolean));
    };
    for (const name of await readdir(dir)) {
      if (name.endsWith(".ids") && name < `${yesterday}.ids`) await rm(join(dir, name), { force: true });
    }
    return new FileDeliveryLedger(dir, clock, { day: today, ids: await load(today) }, await load(yesterday));
  }

  async committed(ids: string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const id of ids) if (this.current.ids.has(id) || this.previous.has(id)) found.add(id);
    return found;
  }

  async commit(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const day = dayOf(this.clock());
    if (day !== this.current.day) {
      this.previous = this.current.ids;
      this.current = { day, ids: new Set() };
    }
    await appendFile(join(this.dir, `${day}.ids`), `${ids.join("\n")}\n`);
    for (const id of ids) this.current.ids.add(id);
  }
}
