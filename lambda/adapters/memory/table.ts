/**
 * One table of an in-memory store: items by key, each operation on one item and atomic, as a DynamoDB
 * single-item write is. Items are copied in and out, so a caller that changes what it read changes
 * nothing stored (as with a real store). Every operation yields first (a microtask): operations
 * started at once interleave between their steps as a store's round trips do, so the adapters built
 * on it keep the DynamoDB adapters' step protocols and meet the same races.
 */
export class MemoryTable<T> {
  private readonly items = new Map<string, T>();

  async get(key: string): Promise<T | undefined> {
    await turn();
    const item = this.items.get(key);
    return item === undefined ? undefined : structuredClone(item);
  }

  /** Writes `item` if `condition` holds for what is stored (absent: always); true when written. */
  async put(key: string, item: T, condition?: (stored: T | undefined) => boolean): Promise<boolean> {
    await turn();
    if (condition && !condition(this.items.get(key))) return false;
    this.items.set(key, structuredClone(item));
    return true;
  }

  /**
   * Replaces the item with what `change` makes of a copy of it, atomically; `change` returns
   * undefined to leave it (a failed condition). The new item, or undefined when nothing changed.
   */
  async update(key: string, change: (stored: T | undefined) => T | undefined): Promise<T | undefined> {
    await turn();
    const stored = this.items.get(key);
    const next = change(stored === undefined ? undefined : structuredClone(stored));
    if (next === undefined) return undefined;
    this.items.set(key, structuredClone(next));
    return structuredClone(next);
  }

  /** Writes what `change` makes of a copy of the stored item (or of nothing), atomically; the new item. */
  async upsert(key: string, change: (stored: T | undefined) => T): Promise<T> {
    await turn();
    const stored = this.items.get(key);
    const next = change(stored === undefined ? undefined : structuredClone(stored));
    this.items.set(key, structuredClone(next));
    return structuredClone(next);
  }

  /** Removes the item if `condition` holds (absent: always); the item removed, or undefined. */
  async delete(key: string, condition?: (stored: T) => boolean): Promise<T | undefined> {
    await turn();
    const stored = this.items.get(key);
    if (stored === undefined || (condition && !condition(stored))) return undefined;
    this.items.delete(key);
    return stored;
  }

  /** Copies of the items whose key passes `filter` (all without one), in key order. */
  async scan(filter: (key: string, item: T) => boolean = () => true): Promise<[string, T][]> {
    await turn();
    return [...this.items]
      .filter(([key, item]) => filter(key, item))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, item]) => [key, structuredClone(item)]);
  }
}

/** One yield per operation: work started at once interleaves between the operations of its steps. */
const turn = () => Promise.resolve();
