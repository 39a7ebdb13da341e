import type { BudgetCounters } from "../../core/budgets";
import { type Budget, projectOfBudget } from "../../core/budgets";
import type { Hold, HoldCharges, HoldResult, Settlement } from "../../core/credits";
import { MemoryTable } from "./table";

/**
 * Budgets in memory, by the protocol of adapters/dynamodb/budgets.ts: definitions by budget id, and one
 * counter item per budget and window (the window is part of the counter's id) holding `used` (what its
 * holds reserve plus what its settled holds cost), `spent` (the settled part) and a marker per open
 * hold. A hold (h1), a note (n1) and a settlement (s1) are each one conditional update of that item, so
 * no number of callers takes a window past the limit they hold under; the sweeper settles expired
 * holds at the charges noted on them.
 */

interface HoldMarker {
  m: number;
  t: number;
  x: number;
  c?: number;
  u?: number;
  k?: number;
}

interface CounterItem {
  used: number;
  spent: number;
  holds: Record<string, HoldMarker>;
}

export class MemoryBudgets implements BudgetCounters {
  private readonly definitions = new MemoryTable<Budget>();
  private readonly counters = new MemoryTable<CounterItem>();

  constructor(private readonly clock: () => number = Date.now) {}

  async put(budget: Budget): Promise<void> {
    await this.definitions.put(budget.budgetId, budget);
  }

  async get(budgetId: string): Promise<Budget | undefined> {
    return projectOfBudget(budgetId) ? this.definitions.get(budgetId) : undefined;
  }

  async list(projectId: string): Promise<Budget[]> {
    return (await this.definitions.scan((_, budget) => budget.projectId === projectId)).map(([, b]) => b);
  }

  async delete(budgetId: string): Promise<boolean> {
    return (await this.definitions.delete(budgetId)) !== undefined;
  }

  async spend(counterId: string): Promise<{ spentMicros: number; heldMicros: number }> {
    const item = await this.counters.get(counterId);
    const noted = Object.values(item?.holds ?? {}).reduce((sum, m) => sum + (m.c ?? 0) + (m.u ?? 0), 0);
    const spent = (item?.spent ?? 0) + noted;
    return { spentMicros: spent, heldMicros: (item?.used ?? 0) - spent };
  }

  async startFrom(counterId: string, micros: number): Promise<void> {
    const item = (await this.counters.get(counterId)) ?? { used: 0, spent: 0, holds: {} };
    const { spentMicros } = await this.spend(counterId);
    if (micros <= spentMicros) return;
    const delta = micros - spentMicros;
    await this.counters.put(counterId, { ...item, used: item.used + delta, spent: item.spent + delta });
  }

  async charges(counterId: string): Promise<{ settledMicros: number; noted: Map<string, number> }> {
    const item = await this.counters.get(counterId);
    const noted = new Map<string, number>();
    for (const [holdId, marker] of Object.entries(item?.holds ?? {})) {
      noted.set(holdId, (marker.c ?? 0) + (marker.u ?? 0));
    }
    return { settledMicros: item?.spent ?? 0, noted };
  }

  /** h1: holds `micros` of the counter's room under `limitMicros`, or says how much room is left. */
  async hold(
    counterId: string,
    holdId: string,
    micros: number,
    expiresAt: number,
    limitMicros: number,
  ): Promise<HoldResult> {
    const createdAt = this.clock();
    const hold: Hold = { projectId: counterId, holdId, micros, createdAt, expiresAt };
    let seen: CounterItem | undefined;
    const taken = await this.counters.update(counterId, (stored) => {
      seen = stored;
      const item = stored ?? { used: 0, spent: 0, holds: {} };
      if (item.holds[holdId] || item.used > limitMicros - micros) return undefined;
      item.used += micros;
      item.holds[holdId] = { m: micros, t: createdAt, x: expiresAt };
      return item;
    });
    if (taken) return { ok: true, hold, availableMicros: limitMicros - taken.used };
    const open = seen?.holds[holdId];
    if (open && open.m === micros && open.t === createdAt) {
      return { ok: true, hold, availableMicros: limitMicros - (seen?.used ?? 0) };
    }
    return { ok: false, availableMicros: limitMicros - (seen?.used ?? 0) };
  }

  /** n1. False when the hold is settled already, or a total with as many calls was noted. */
  async recordCharges(hold: Hold, charges: HoldCharges): Promise<boolean> {
    const noted = await this.counters.update(hold.projectId, (item) => {
      const marker = item?.holds[hold.holdId];
      if (!item || !marker || marker.m !== hold.micros || marker.t !== hold.createdAt) return undefined;
      if (marker.k !== undefined && marker.k >= charges.calls) return undefined;
      marker.c = charges.chargedMicros;
      marker.u = charges.uncollectedMicros;
      marker.k = charges.calls;
      return item;
    });
    return noted !== undefined;
  }

  /** s1, at the charges given. A repeat finds no marker and changes nothing. */
  async settleCharges(hold: Hold, charges: HoldCharges): Promise<Settlement> {
    await this.settleMarker(hold, charges);
    return {
      projectId: hold.projectId,
      holdId: hold.holdId,
      outcome: charges.chargedMicros > 0 ? "settled" : "released",
      heldMicros: hold.micros,
      chargedMicros: charges.chargedMicros,
      uncollectedMicros: charges.uncollectedMicros,
      calls: charges.calls,
      at: this.clock(),
    };
  }

  /** The sweeper: settles every expired hold at the charges noted on it. Idempotent. */
  async releaseExpired(now: number): Promise<{ holdsSettled: number }> {
    let holdsSettled = 0;
    for (const [counterId, item] of await this.counters.scan((_, c) => Object.keys(c.holds).length > 0)) {
      for (const [holdId, marker] of Object.entries(item.holds)) {
        if (marker.x > now) continue;
        const hold: Hold = {
          projectId: counterId,
          holdId,
          micros: marker.m,
          createdAt: marker.t,
          expiresAt: marker.x,
        };
        const noted = {
          chargedMicros: marker.c ?? 0,
          uncollectedMicros: marker.u ?? 0,
          calls: marker.k ?? 0,
        };
        if (await this.settleMarker(hold, noted)) holdsSettled++;
      }
    }
    return { holdsSettled };
  }

  private async settleMarker(hold: Hold, charges: HoldCharges): Promise<boolean> {
    const cost = charges.chargedMicros + charges.uncollectedMicros;
    const settled = await this.counters.update(hold.projectId, (item) => {
      const marker = item?.holds[hold.holdId];
      if (!item || !marker || marker.m !== hold.micros || marker.t !== hold.createdAt) return undefined;
      item.used += cost - hold.micros;
      item.spent += cost;
      delete item.holds[hold.holdId];
      return item;
    });
    return settled !== undefined;
  }
}
