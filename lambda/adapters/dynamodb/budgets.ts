import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import { type Budget, type BudgetStore, counterExpiry, projectOfBudget } from "../../core/budgets";
import type { Hold, HoldCharges, HoldResult, Settlement } from "../../core/credits";
import { type HoldItem, HoldItems } from "./hold-items";
import { queryAll, readItem } from "./paging";
import type { TableNames } from "./tables";

/**
 * Budgets over DynamoDB: their definitions, and one counter item per budget and window, written with
 * single-item conditional updates only (dynalite has no transactions), as the credits are.
 *
 * Items. `budgets`: a definition per (projectId, budgetId). `budgetCounters`: per counter id
 * (`<budgetId>#<window>[#<user hash>]`, core/budgets.ts; the tokens-per-minute counters are
 * `tpm#<keyId>#t<minute>`):
 *   { counterId, used, spent, open, h_<holdId>: {m, t, x, c?, u?, k?}, gcAt? }
 * `used` is what the window's holds reserve plus what its settled holds spent, `spent` the settled part,
 * `open` the number of hold markers, `gcAt` (epoch seconds, DynamoDB TTL) when a counter that only
 * matters in its own window may go: a past minute's TPM counter (core/budgets.ts `counterExpiry`).
 * The window is part of the key: a new day is a new item, so nothing resets a counter and no job has
 * to run at midnight.
 *
 * Hold (one round trip):
 *   h1  used += m, open += 1, h_<h> = {m,t,x}        if h_<h> absent and (used absent or used <= limit - m)
 * A condition cannot add two attributes, so `used` carries both parts and the limit is compared once.
 * The limit is the caller's (the budget's current definition): lowering it refuses new holds at once.
 * Note charges (a hold paying for several calls, a lease):
 *   n1  h_<h>.c,u,k = totals                           if h_<h> matches and (k absent or k < :k)
 * Settle (exactly once, by the marker's condition):
 *   s1  used += charged + uncollected - m, spent += charged + uncollected, open -= 1, REMOVE h_<h>
 *                                                      if h_<h> matches
 * A window's `spent` is what its calls cost, uncollected excess included: a managed call's record says
 * what the credits charged (capped at the same hold), so `spent` equals the sum of the records' costs.
 * Sweeper (`releaseExpired`): scans counters with open markers; settles each expired one at the
 * charges noted on it (s1), as the credit sweeper does. A crash between h1 and s1 therefore counts, at
 * expiry, what was noted, and returns the rest of the hold to the window.
 */

const MARKER = "h_";
/** A window's spend and its open holds are read at most twice over (hold-items.ts `readWithHolds`). */
const READ_ROUNDS = 2;

interface HoldMarker {
  m: number;
  t: number;
  x: number;
  c?: number;
  u?: number;
  k?: number;
}

interface CounterItem {
  counterId: string;
  used?: number;
  spent?: number;
  open?: number;
  /** Counts takes and resolutions of its hold items (hold-items.ts). */
  seq?: number;
  [marker: `h_${string}`]: HoldMarker;
}

export interface BudgetSweepReport {
  holdsSettled: number;
}

export class DynamoBudgets implements BudgetStore {
  private readonly holds: HoldItems;

  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "budgets" | "budgetCounters">,
    private readonly clock: () => number = Date.now,
  ) {
    this.holds = new HoldItems(db, tables.budgetCounters, "counterId", clock);
  }

  async put(budget: Budget): Promise<void> {
    await this.db.send(
      new PutItemCommand({
        TableName: this.tables.budgets,
        Item: marshall(budget, { removeUndefinedValues: true }),
      }),
    );
  }

  async get(budgetId: string): Promise<Budget | undefined> {
    const projectId = projectOfBudget(budgetId);
    if (!projectId) return undefined;
    return (await readItem(this.db, this.tables.budgets, { projectId, budgetId })) as Budget | undefined;
  }

  async list(projectId: string): Promise<Budget[]> {
    const budgets = await queryAll(this.db, {
      TableName: this.tables.budgets,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
      ConsistentRead: true,
    });
    return budgets as Budget[];
  }

  async delete(budgetId: string): Promise<boolean> {
    const projectId = projectOfBudget(budgetId);
    if (!projectId) return false;
    const out = await this.db.send(
      new DeleteItemCommand({
        TableName: this.tables.budgets,
        Key: marshall({ projectId, budgetId }),
        ReturnValues: "ALL_OLD",
      }),
    );
    return out.Attributes !== undefined;
  }

  async spend(counterId: string): Promise<{ spentMicros: number; heldMicros: number }> {
    const { item, holds } = await this.holds.readWithHolds<CounterItem>(counterId, READ_ROUNDS);
    const spent = (item?.spent ?? 0) + notedCharges(item, holds);
    return { spentMicros: spent, heldMicros: (item?.used ?? 0) - spent };
  }

  /**
   * Raises the counter's spend to `micros` when it counts less: one conditional update on the
   * settled spend it read (a settlement meanwhile moves noted charges into it: read again).
   */
  async startFrom(counterId: string, micros: number): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const { item, holds } = await this.holds.readWithHolds<CounterItem>(counterId, READ_ROUNDS);
      const counted = (item?.spent ?? 0) + notedCharges(item, holds);
      if (micros <= counted) return;
      try {
        await this.db.send(
          new UpdateItemCommand({
            TableName: this.tables.budgetCounters,
            Key: marshall({ counterId }),
            UpdateExpression:
              "SET used = if_not_exists(used, :zero) + :d, spent = if_not_exists(spent, :zero) + :d",
            ConditionExpression: item?.spent === undefined ? "attribute_not_exists(spent)" : "spent = :seen",
            ExpressionAttributeValues: marshall({
              ":zero": 0,
              ":d": micros - counted,
              ...(item?.spent !== undefined && { ":seen": item.spent }),
            }),
          }),
        );
        return;
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
      }
    }
    throw new Error(`budget counter ${counterId} kept changing; its window's recorded spend was not added`);
  }

  async charges(counterId: string): Promise<{ settledMicros: number; noted: Map<string, number> }> {
    const { item, holds } = await this.holds.readWithHolds<CounterItem>(counterId, READ_ROUNDS);
    const noted = new Map<string, number>();
    for (const [name, marker] of item ? markers(item) : []) {
      noted.set(name.slice(MARKER.length), (marker.c ?? 0) + (marker.u ?? 0));
    }
    for (const hold of holds) noted.set(hold.holdId, (hold.c ?? 0) + (hold.u ?? 0));
    return { settledMicros: item?.spent ?? 0, noted };
  }

  /** t1 (hold-items.ts): holds `micros` of the counter's room under `limitMicros`, or says how much is left. */
  async hold(
    counterId: string,
    holdId: string,
    micros: number,
    expiresAt: number,
    limitMicros: number,
  ): Promise<HoldResult> {
    const createdAt = this.clock();
    const hold: Hold = { projectId: counterId, holdId, micros, createdAt, expiresAt };
    // A counter the store may drop later carries its TTL (in seconds) from its first hold.
    const dropAt = counterExpiry(counterId);
    const gc = dropAt === undefined ? "" : ", gcAt = if_not_exists(gcAt, :gc)";
    if (micros > limitMicros) {
      const item = await this.readCounter(counterId);
      return { ok: false, availableMicros: limitMicros - (item?.used ?? 0) };
    }
    const taken = await this.holds.take(
      counterId,
      holdId,
      { m: micros, t: createdAt, x: expiresAt },
      {
        set: `used = if_not_exists(used, :zero) + :m, spent = if_not_exists(spent, :zero)${gc}`,
        condition: "(attribute_not_exists(used) OR used <= :room)",
        values: {
          ":room": limitMicros - micros,
          ...(dropAt !== undefined && { ":gc": Math.ceil(dropAt / 1000) }),
        },
      },
      { set: "used = used - :m", values: {} },
    );
    const used = (taken.owner?.used as number | undefined) ?? 0;
    return taken.taken
      ? { ok: true, hold, availableMicros: limitMicros - used }
      : { ok: false, availableMicros: limitMicros - used };
  }

  /** n1, on the hold's own item. False when the hold is settled already. */
  async recordCharges(hold: Hold, charges: HoldCharges): Promise<boolean> {
    const legacy = await this.legacyMarker(hold);
    if (legacy) {
      return this.updateIfMarked(
        hold,
        "SET #h.c = :c, #h.u = :u, #h.k = :k",
        "#h.m = :m AND #h.t = :t AND (attribute_not_exists(#h.k) OR #h.k < :k)",
        { ":c": charges.chargedMicros, ":u": charges.uncollectedMicros, ":k": charges.calls },
      );
    }
    return this.holds.note(hold, charges);
  }

  /** r1-r5 (hold-items.ts), at the charges given. A repeat finds no hold and changes nothing. */
  async settleCharges(hold: Hold, charges: HoldCharges): Promise<Settlement> {
    const done = await this.settleItem(hold.projectId, hold.holdId, hold.micros, hold.createdAt, charges);
    if (done.done !== "now") await this.settleMarker(hold, charges);
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

  /** The sweeper: settles every expired hold at the charges noted on it. Idempotent; reads only what is open. */
  async releaseExpired(now: number): Promise<BudgetSweepReport> {
    const report: BudgetSweepReport = { holdsSettled: 0 };
    const swept = await this.holds.sweep(
      now,
      async (item) =>
        (await this.settleItem(item.owner, item.holdId, item.m, item.t, undefined, now)).done === "now",
      // A hold whose item was never written: nothing was noted; its room goes back to the window.
      async () => ({ set: "used = used - :m", values: {} }),
      async (raw) => {
        // Holds marked on the counter itself (taken before holds had items of their own).
        const item = raw as unknown as CounterItem;
        for (const [name, marker] of markers(item)) {
          if (marker.x > now) continue;
          const hold: Hold = {
            projectId: item.counterId,
            holdId: name.slice(MARKER.length),
            micros: marker.m,
            createdAt: marker.t,
            expiresAt: marker.x,
          };
          const noted = {
            chargedMicros: marker.c ?? 0,
            uncollectedMicros: marker.u ?? 0,
            calls: marker.k ?? 0,
          };
          if (await this.settleMarker(hold, noted)) report.holdsSettled++;
        }
      },
    );
    report.holdsSettled += swept.resolved + swept.released;
    return report;
  }

  private settleItem(
    counterId: string,
    holdId: string,
    micros: number,
    createdAt: number,
    charges: HoldCharges | undefined,
    now = this.clock(),
  ) {
    return this.holds.resolve(
      { projectId: counterId, holdId, micros, createdAt },
      charges,
      async (item: HoldItem) => {
        const cost = (item.c ?? 0) + (item.u ?? 0);
        return {
          write: {
            set: "used = used + :delta, spent = spent + :cost",
            values: { ":delta": cost - item.m, ":cost": cost },
          },
          value: undefined,
        };
      },
      now,
    );
  }

  private async legacyMarker(hold: Hold): Promise<HoldMarker | undefined> {
    // Only a counter that still has markers of its own can hold this one: most have none.
    const item = await this.readCounter(hold.projectId);
    return item?.[`${MARKER}${hold.holdId}`];
  }

  private settleMarker(hold: Hold, charges: HoldCharges): Promise<boolean> {
    const cost = charges.chargedMicros + charges.uncollectedMicros;
    return this.updateIfMarked(
      hold,
      "SET used = used + :delta, spent = spent + :cost, #open = #open - :one REMOVE #h",
      "#h.m = :m AND #h.t = :t",
      { ":delta": cost - hold.micros, ":cost": cost, ":one": 1 },
      { "#open": "open" },
    );
  }

  private async updateIfMarked(
    hold: Hold,
    update: string,
    condition: string,
    values: Record<string, number>,
    names: Record<string, string> = {},
  ): Promise<boolean> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.budgetCounters,
          Key: marshall({ counterId: hold.projectId }),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeNames: { "#h": MARKER + hold.holdId, ...names },
          ExpressionAttributeValues: marshall({ ...values, ":m": hold.micros, ":t": hold.createdAt }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  private async readCounter(counterId: string): Promise<CounterItem | undefined> {
    return (await readItem(this.db, this.tables.budgetCounters, { counterId })) as CounterItem | undefined;
  }
}

/** What open holds already charged (noted): spent, though not settled yet. */
function notedCharges(item: CounterItem | undefined, holds: HoldItem[]): number {
  const legacy = item
    ? markers(item).reduce((sum, [, marker]) => sum + (marker.c ?? 0) + (marker.u ?? 0), 0)
    : 0;
  return legacy + holds.reduce((sum, hold) => sum + (hold.c ?? 0) + (hold.u ?? 0), 0);
}

function markers(item: CounterItem): [string, HoldMarker][] {
  return Object.entries(item).filter((entry): entry is [string, HoldMarker] => entry[0].startsWith(MARKER));
}
