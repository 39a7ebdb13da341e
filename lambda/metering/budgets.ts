import {
  type Budget,
  type BudgetCounters,
  type BudgetWatcher,
  budgetExceededError,
  budgetHeaders,
  budgetsFor,
  counterId,
  tpmCounterId,
  tpmExceededError,
  tpmShardCount,
  tpmShardLimit,
  tpmSpan,
  type WindowSpan,
  windowSpan,
} from "../core/budgets";
import { MAX_BALANCE_MICROS, type SweepReport } from "../core/credits";
import type { ApiError } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";
import {
  CreditLeases,
  DEFAULT_LEASES,
  type LeaseTimes,
  type Reservation,
  type ReserveResult,
} from "./credit-leases";

/**
 * Budgets and tokens-per-minute limits as holds, the way the balance is held: a call holds its
 * maximum cost against the counter of every budget that applies (its window is part of the counter's
 * key) and its estimated tokens against its key's minute; each hold comes from a lease this process
 * took on the shared counter (credit-leases.ts), so a warm call waits for no store round trip, and
 * no number of calls or processes takes a window past its limit. A call ends by turning each hold into
 * its charge: the cost (budgets) or the real tokens (TPM). Design: docs/metering.md "Budgets".
 */

export interface BudgetGuardDeps {
  counters: BudgetCounters;
  clock: () => number;
  logger: Logger;
  /** How long a budget or policy change may take to apply: the definitions are cached this long. */
  cacheMs: number;
  holdTtlMs: number;
  noteChargesMs: number;
  /** How long a lease takes new calls, and stays unused before it settles (DEFAULT_LEASES unless set). */
  leases?: LeaseTimes;
  /** The alert rules: told of each budget's spend after a call's charge, and of refusals. */
  watcher?: BudgetWatcher;
  /**
   * The most counters a key's TPM minute is split over (core/budgets.ts `tpmShardCount`); 1, the
   * default, keeps one. Hosts of many processes (Lambda) split it; a process takes from its own shard
   * first, and from the others only when its own refuses, so the minute's limit holds exactly.
   */
  tpmShards?: number;
  /** This process's own shard (random unless set). */
  tpmShard?: number;
}

/** What a call asks of its budgets and its key's TPM limit. */
export interface BudgetClaim {
  projectId: string;
  keyId: string;
  /** The key's name, when known: a refusal names the key by both. */
  keyName?: string;
  userId: string | null;
  managed: boolean;
  /** The call's maximum cost, when it has a price (0: it counts against no budget). */
  maxCostMicros: () => number;
  /** The key's tokens-per-minute limit and the call's estimated tokens. */
  tpm?: { limit: number; estimate: () => number };
}

/** A budget's window a call counted against (or was refused by). */
export interface BudgetWindowOf {
  budget: Budget;
  windowId: string;
  counterId: string;
  /** When it refused the call: the call's maximum cost. */
  refusedMicros?: number;
}

/** What a call took: given back by `finish`. */
export interface BudgetHolds {
  budgets: (BudgetWindowOf & { reservation: Reservation })[];
  tokens?: Reservation;
}

/** Who made the call, for the reports to the watcher. */
export interface BudgetCaller {
  userId: string | null;
  hideUserId: boolean;
}

export type BudgetAdmission =
  | { ok: true; holds: BudgetHolds; headers: Record<string, string> }
  | { ok: false; error: ApiError; refusedBy?: BudgetWindowOf };

/**
 * A TPM lease's charges are noted at most this long after a call, even where budgets' are noted before
 * the call ends (Lambda): a note saves nothing a limit needs (an open hold counts in full until it is
 * settled, and a minute's counter matters only in its minute), and per call it was a third write.
 */
const TPM_NOTE_MS = 1_000;

/** A soft budget is counted under a limit no call reaches: it only reports. */
const SOFT_LIMIT = MAX_BALANCE_MICROS;
const MAX_CACHED = 10_000;

interface Counted {
  counterId: string;
  limitMicros: number;
  micros: number;
  budget?: Budget;
  span: WindowSpan;
  /** A TPM shard: the key's limit, the minute's shards and this one. */
  shard?: { limit: number; count: number; index: number; keyId: string };
}

export class BudgetGuard {
  private readonly leases: CreditLeases;
  /** The limit each counter is held under, as the definitions said last. */
  private readonly limits = new Map<string, number>();
  private readonly cache = new Map<string, { budgets: Promise<Budget[]>; expires: number }>();
  private readonly reported = new Set<string>();
  /** TPM shards that refused this process (their ids carry the minute): not asked again that minute. */
  private readonly fullShards = new Set<string>();
  private readonly ownShard: number;
  /** The TPM leases: their charges noted in batches even in Lambda (TPM_NOTE_MS). */
  private readonly tokenLeases: CreditLeases;

  constructor(private readonly deps: BudgetGuardDeps) {
    const { counters } = deps;
    this.ownShard = deps.tpmShard ?? Math.floor(Math.random() * 1_000_000);
    const leases = (noteMs: number) =>
      new CreditLeases(
        {
          hold: (id, holdId, micros, expiresAt) =>
            counters.hold(id, holdId, micros, expiresAt, this.limits.get(id) ?? 0),
          recordCharges: (hold, charges) => counters.recordCharges(hold, charges),
          settleCharges: (hold, charges) => counters.settleCharges(hold, charges),
        },
        deps.clock,
        deps.logger,
        {
          ...DEFAULT_LEASES,
          holdTtlMs: deps.holdTtlMs,
          noteMs,
          ...deps.leases,
        },
      );
    this.leases = leases(deps.noteChargesMs);
    this.tokenLeases = leases(Math.max(deps.noteChargesMs, TPM_NOTE_MS));
  }

  /**
   * Holds the call against every budget that applies and its key's TPM limit, side by side. When one
   * refuses, what the others took goes back at once, and the refusal names the tightest budget (a TPM
   * refusal, a 429, wins: it passes within a minute).
   */
  async admit(claim: BudgetClaim): Promise<BudgetAdmission> {
    const now = this.deps.clock();
    const budgets = budgetsFor(await this.budgetsOf(claim.projectId), claim);
    const counted: Counted[] = [];
    const cost = budgets.length > 0 ? claim.maxCostMicros() : 0;
    if (cost > 0) {
      for (const budget of budgets) {
        const span = windowSpan(budget.window, now);
        counted.push({
          counterId: counterId(budget, span, claim.userId),
          limitMicros: budget.soft ? SOFT_LIMIT : budget.limitMicros,
          micros: cost,
          budget,
          span,
        });
      }
    }
    const estimate = claim.tpm ? claim.tpm.estimate() : 0;
    if (claim.tpm && estimate > 0) {
      const span = tpmSpan(now);
      const count = tpmShardCount(claim.tpm.limit, this.deps.tpmShards ?? 1);
      const index = this.ownShard % count;
      counted.push(
        count === 1
          ? {
              counterId: tpmCounterId(claim.keyId, span),
              limitMicros: claim.tpm.limit,
              micros: estimate,
              span,
            }
          : {
              counterId: tpmCounterId(claim.keyId, span, index),
              limitMicros: tpmShardLimit(claim.tpm.limit, count, index),
              micros: estimate,
              span,
              shard: { limit: claim.tpm.limit, count, index, keyId: claim.keyId },
            },
      );
    }
    if (counted.length === 0) return { ok: true, holds: { budgets: [] }, headers: {} };
    if (this.limits.size > MAX_CACHED * 4) this.limits.clear();
    for (const each of counted) this.limits.set(each.counterId, each.limitMicros);

    // A fixed order, all at once: one store round trip at most, and only when a lease runs out.
    counted.sort((a, b) => (a.counterId < b.counterId ? -1 : 1));
    const results = await Promise.allSettled(
      counted.map((each) =>
        each.shard
          ? this.reserveTokens(each, each.shard)
          : (each.budget ? this.leases : this.tokenLeases).reserve(each.counterId, each.micros),
      ),
    );
    const holds: BudgetHolds = { budgets: [] };
    let refusal: { error: ApiError; remaining: number; by?: BudgetWindowOf } | undefined;
    let failure: unknown;
    let tightest: { remaining: number; span: WindowSpan } | undefined;
    results.forEach((result, i) => {
      const each = counted[i] as Counted;
      if (result.status === "rejected") {
        failure ??= result.reason;
        return;
      }
      if (!result.value.ok) {
        const remaining = result.value.availableMicros;
        const error = each.budget
          ? budgetExceededError(each.budget, each.span, each.micros, remaining, claim.keyName)
          : tpmExceededError(claim.tpm?.limit ?? 0, each.span, now);
        // The TPM refusal first, then the budget with the least left.
        const rank = each.budget ? remaining : Number.NEGATIVE_INFINITY;
        if (!refusal || rank < refusal.remaining) {
          refusal = {
            error,
            remaining: rank,
            ...(each.budget && {
              by: {
                budget: each.budget,
                windowId: each.span.id,
                counterId: each.counterId,
                refusedMicros: each.micros,
              },
            }),
          };
        }
        return;
      }
      const reservation = result.value.reservation;
      if (!each.budget) {
        holds.tokens = reservation;
        return;
      }
      holds.budgets.push({
        budget: each.budget,
        windowId: each.span.id,
        counterId: each.counterId,
        reservation,
      });
      const room = this.leases.roomOf(each.counterId) ?? 0;
      const remaining = each.budget.soft ? each.budget.limitMicros - (SOFT_LIMIT - room) : room;
      if (each.budget.soft && remaining < 0) this.logSoftExceeded(each, SOFT_LIMIT - room);
      if (!tightest || remaining < tightest.remaining) tightest = { remaining, span: each.span };
    });
    if (failure !== undefined || refusal) {
      await this.finish(holds, 0, 0);
      if (failure !== undefined) throw failure;
      const { error, by } = refusal as { error: ApiError; by?: BudgetWindowOf };
      return { ok: false, error, ...(by && { refusedBy: by }) };
    }
    return { ok: true, holds, headers: tightest ? budgetHeaders(tightest.remaining, tightest.span) : {} };
  }

  /**
   * The call's tokens from its own TPM shard, or when that one is short from the others in turn,
   * skipping those that refused this process this minute (a refusal costs a write: not one per call).
   * Refused only when every shard is short; with all known short, the own shard is asked again.
   */
  private async reserveTokens(own: Counted, shard: NonNullable<Counted["shard"]>) {
    let refused: ReserveResult | undefined;
    for (let step = 0; step < shard.count; step++) {
      const index = (shard.index + step) % shard.count;
      const id = tpmCounterId(shard.keyId, own.span, index);
      if (this.fullShards.has(id)) continue;
      this.limits.set(id, tpmShardLimit(shard.limit, shard.count, index));
      const result = await this.tokenLeases.reserve(id, own.micros);
      if (result.ok) return result;
      refused ??= result;
      this.markFull(id);
    }
    if (refused) return refused;
    const result = await this.tokenLeases.reserve(own.counterId, own.micros);
    if (result.ok) this.fullShards.delete(own.counterId);
    return result;
  }

  private markFull(counterId: string): void {
    if (this.fullShards.size >= MAX_CACHED) this.fullShards.clear();
    this.fullShards.add(counterId);
  }

  /** The call ended: each budget hold becomes its cost, the TPM hold its real tokens. */
  async finish(holds: BudgetHolds, costMicros: number, tokens: number): Promise<void> {
    await Promise.all([
      ...holds.budgets.map((each) => this.leases.finish(each.reservation, costMicros)),
      holds.tokens ? this.tokenLeases.finish(holds.tokens, tokens) : undefined,
    ]);
  }

  /**
   * Tells the watcher, once the call's charge is counted, each window's spend (or the refusal). Runs
   * in the call's after-work; a failure is logged, never the call's. Reads a counter only when a rule
   * watches it.
   */
  async report(caller: BudgetCaller, windows: readonly BudgetWindowOf[]): Promise<void> {
    const watcher = this.deps.watcher;
    if (!watcher) return;
    await Promise.all(
      windows.map(async (each) => {
        try {
          if (!(await watcher.watching(each.budget, each.counterId))) return;
          const usedMicros = await this.spent(each.counterId);
          await watcher.report({ ...each, ...caller, usedMicros });
        } catch (err) {
          this.deps.logger.error("budget alert check failed", {
            ...errorFields(err),
            budgetId: each.budget.budgetId,
          });
        }
      }),
    );
  }

  /**
   * A window's spend: its settled spend, plus each open hold's charges: noted on the store, or this
   * process's own count when it is further along (its charges are noted in batches, `noteChargesMs`).
   */
  private async spent(counterId: string): Promise<number> {
    const { settledMicros, noted } = await this.deps.counters.charges(counterId);
    let used = settledMicros;
    for (const [holdId, micros] of noted) used += Math.max(micros, this.leases.chargedOf(holdId) ?? 0);
    return used;
  }

  /** Settles every lease (a clean shutdown). */
  settle(): Promise<void> {
    return Promise.all([this.leases.settleAll(), this.tokenLeases.settleAll()]).then(() => undefined);
  }

  /** The project's budgets, cached `cacheMs` (a change applies within it); one read per project in flight. */
  private budgetsOf(projectId: string): Promise<Budget[]> {
    const now = this.deps.clock();
    const hit = this.cache.get(projectId);
    if (hit && hit.expires > now) return hit.budgets;
    const budgets = this.deps.counters.list(projectId);
    if (this.cache.size >= MAX_CACHED) this.cache.clear();
    this.cache.set(projectId, { budgets, expires: now + this.deps.cacheMs });
    budgets.catch(() => {
      if (this.cache.get(projectId)?.budgets === budgets) this.cache.delete(projectId);
    });
    return budgets;
  }

  /** Logged once per window and process; the alerts (`watcher`) tell the project. */
  private logSoftExceeded(each: Counted, usedMicros: number): void {
    if (!each.budget || this.reported.has(each.counterId)) return;
    if (this.reported.size >= MAX_CACHED) this.reported.clear();
    this.reported.add(each.counterId);
    this.deps.logger.warn("soft budget exceeded", {
      budgetId: each.budget.budgetId,
      projectId: each.budget.projectId,
      window: each.span.id,
      usedMicros,
      limitMicros: each.budget.limitMicros,
    });
  }
}

/**
 * One sweep of both kinds of holds a crash may leave open: the credits' and the budget counters'
 * (each settled at expiry at the charges noted on it).
 */
export function sweepHolds(
  credits: { releaseExpired(now: number): Promise<SweepReport> },
  counters: { releaseExpired(now: number): Promise<{ holdsSettled: number }> },
): { releaseExpired(now: number): Promise<SweepReport & { budgetHoldsSettled: number }> } {
  return {
    async releaseExpired(now) {
      const [report, budgets] = await Promise.all([
        credits.releaseExpired(now),
        counters.releaseExpired(now),
      ]);
      return { ...report, budgetHoldsSettled: budgets.holdsSettled };
    },
  };
}
