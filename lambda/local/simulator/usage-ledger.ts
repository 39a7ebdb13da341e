/** What the simulator served, per vendor, day and model: what its usage reports answer from. */

/** Token counts of one call, in the vendor's own split. */
export interface ServedUsage {
  model: string;
  /** Input not read from or written to a cache. */
  uncachedInput: number;
  cachedInput: number;
  cacheWrite5m?: number;
  cacheWrite1h?: number;
  output: number;
  /** UTC day (YYYY-MM-DD); today when absent. */
  day?: string;
}

export type Sums = Required<Omit<ServedUsage, "model" | "day">> & { requests: number };

export const emptySums = (): Sums => ({
  uncachedInput: 0,
  cachedInput: 0,
  cacheWrite5m: 0,
  cacheWrite1h: 0,
  output: 0,
  requests: 0,
});

/** What the simulator served, per vendor, day and model. */
export class UsageLedger {
  private readonly sums = new Map<string, Map<string, Map<string, Sums>>>();

  add(vendor: string, usage: ServedUsage): void {
    const day = usage.day ?? new Date().toISOString().slice(0, 10);
    const byDay = this.sums.get(vendor) ?? new Map<string, Map<string, Sums>>();
    this.sums.set(vendor, byDay);
    const byModel = byDay.get(day) ?? new Map<string, Sums>();
    byDay.set(day, byModel);
    const sum = byModel.get(usage.model) ?? emptySums();
    sum.uncachedInput += usage.uncachedInput;
    sum.cachedInput += usage.cachedInput;
    sum.cacheWrite5m += usage.cacheWrite5m ?? 0;
    sum.cacheWrite1h += usage.cacheWrite1h ?? 0;
    sum.output += usage.output;
    sum.requests += 1;
    byModel.set(usage.model, sum);
  }

  day(vendor: string, day: string): [string, Sums][] {
    return [...(this.sums.get(vendor)?.get(day) ?? new Map<string, Sums>()).entries()].sort(([a], [b]) =>
      a < b ? -1 : 1,
    );
  }

  clear(): void {
    this.sums.clear();
  }
}
