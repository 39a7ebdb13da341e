import { setTimeout as sleep } from "node:timers/promises";
import { type CreditStore, type Hold, type HoldCharges, MAX_CALL_MICROS, newHoldId } from "../core/credits";
import { errorFields, type Logger } from "../core/logger";

/**
 * Credit leases: a process holds a slice of a project's balance ahead of demand (one ordinary hold,
 * several calls' worth) and takes each call's hold from it in memory, so a warm call reaches the vendor
 * without waiting for the store. Nobody spends credits they do not have: a lease is a hold, taken
 * atomically on the shared balance, and calls never hold more than it has left. After each call the
 * lease adds up its charges; they are noted on the hold (`recordCharges`) within `noteMs`, and the lease
 * is settled at its total once it is closed (full, old or idle) and its last call ended. A process that
 * dies loses no noted charge: the sweeper settles the expired hold at what was noted. Design and
 * trade-offs: docs/metering.md.
 */

export interface LeaseOptions {
  /**
   * A project's first lease holds this many times the hold of the call that needed it; the next ones
   * twice as many calls when a lease filled up in less than half its open time (to 1,024), half as
   * many when one served less than a quarter of its calls. At most a quarter of the balance it saw.
   */
  callsPerLease: number;
  /** New calls stop using a lease this long after it was taken; it settles once its calls ended. */
  openMs: number;
  /** A lease with no call running settles after this long unused. */
  idleMs: number;
  /**
   * Charges are noted on the store at most this long after a call ended; 0 notes them before the
   * call's after-work ends (Lambda, whose container may be frozen and reaped at any time after).
   */
  noteMs: number;
  /** How long a call may run: a lease's hold expires this long after it stopped taking calls. */
  holdTtlMs: number;
}

/** A host's lease times where they differ from the defaults (Lambda's: lambda/handlers/proxy.ts). */
export type LeaseTimes = Partial<Pick<LeaseOptions, "openMs" | "idleMs">>;

export const DEFAULT_LEASES: Omit<LeaseOptions, "holdTtlMs" | "noteMs"> = {
  callsPerLease: 16,
  openMs: 30_000,
  idleMs: 2_000,
};

/** One call's share of a lease: its hold, taken in memory. */
export interface Reservation {
  readonly lease: Lease;
  readonly micros: number;
}

export type ReserveResult = { ok: true; reservation: Reservation } | { ok: false; availableMicros: number };

export interface Lease {
  hold: Hold;
  /** The calls it was sized for, and the calls it took. */
  sizedFor: number;
  taken: number;
  /** Takes new calls. */
  open: boolean;
  /** Held by the calls running. */
  reservedMicros: number;
  running: number;
  charges: HoldCharges;
  /** The calls count the store has noted. */
  notedCalls: number;
  lastUsedAt: number;
  settled: boolean;
}

/** What a process knows of a project's demand. */
interface Demand {
  callsPerLease: number;
  /** The balance left after the last lease was taken. */
  availableMicros: number | undefined;
}

const MAX_CALLS_PER_LEASE = 1024;
const MAX_PROJECTS = 10_000;
/** The next lease is taken in the background once the current one has less than this share left. */
const RENEW_BELOW = 0.25;
/** Settlement attempts (each with the store client's own retries) and the first pause: ~4 s in all. */
const SETTLE_ATTEMPTS = 5;
const SETTLE_RETRY_BASE_MS = 250;

export class CreditLeases {
  /** Per project, the lease new calls take from. */
  private readonly current = new Map<string, Lease>();
  /** Per project, the lease being taken, and for what size of call. */
  private readonly opening = new Map<string, { micros: number; done: Promise<ReserveResult | undefined> }>();
  private readonly live = new Set<Lease>();
  /** Leases whose settlement is on its way to the store. */
  private readonly settling = new Set<Lease>();
  private readonly demand = new Map<string, Demand>();
  private readonly work = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private readonly options: LeaseOptions;

  constructor(
    /** The balance's holds; budgets lease their counters' room the same way (metering/budgets.ts). */
    private readonly store: Pick<CreditStore, "hold" | "recordCharges" | "settleCharges">,
    private readonly clock: () => number,
    private readonly logger: Logger,
    options: LeaseOptions,
  ) {
    // Never open longer than a hold lasts, so a dead process's lease is swept as soon as a hold would be.
    this.options = { ...options, openMs: Math.min(options.openMs, options.holdTtlMs) };
  }

  /**
   * What this process sees left under the project's limit: the room after its last lease was taken,
   * plus what its live leases have not spent or reserved. Undefined before any lease.
   */
  roomOf(projectId: string): number | undefined {
    const seen = this.demand.get(projectId)?.availableMicros;
    if (seen === undefined) return undefined;
    let room = seen;
    for (const lease of this.live) if (lease.hold.projectId === projectId) room += this.room(lease);
    return room;
  }

  /** What this process counts charged on a hold of its own (live or settling), or undefined. */
  chargedOf(holdId: string): number | undefined {
    for (const lease of [...this.live, ...this.settling]) {
      if (lease.hold.holdId === holdId) return lease.charges.chargedMicros + lease.charges.uncollectedMicros;
    }
    return undefined;
  }

  /** Holds `micros` for one call: in memory from the project's lease, or from a new lease. */
  async reserve(projectId: string, micros: number): Promise<ReserveResult> {
    for (;;) {
      const lease = this.current.get(projectId);
      if (lease && this.fits(lease, micros)) {
        const reservation = this.take(lease, micros);
        if (this.room(lease) < lease.hold.micros * RENEW_BELOW && !this.opening.has(projectId)) {
          // The next lease, before this one runs out: calls keep going meanwhile. Should it fail, the
          // call that finds no room takes one itself, and sees why.
          void this.track(
            this.open(projectId, micros).then(
              () => undefined,
              (err) =>
                this.logger.warn("taking the next credit lease failed", { ...errorFields(err), projectId }),
            ),
          );
        }
        return { ok: true, reservation };
      }
      if (lease) {
        const young = this.clock() - lease.hold.createdAt < this.options.openMs / 2;
        if (young) this.resize(projectId, 2);
        this.retire(lease);
      }
      // One lease taken at a time per project: the calls arriving meanwhile wait for it, then take from it.
      const pending = this.opening.get(projectId);
      if (pending) {
        const refused = await pending.done;
        // The balance could not cover a call as large: it cannot cover this one either, but for
        // what the live leases have left.
        if (refused && micros >= pending.micros) return this.spare(projectId, micros) ?? refused;
        continue;
      }
      const refused = await this.open(projectId, micros);
      if (refused) return this.spare(projectId, micros) ?? refused;
    }
  }

  /**
   * Near the end of a balance, what is left may be room in leases that take no new calls but whose
   * calls still run: a reservation from one of them, if any has room for `micros`.
   */
  private spare(projectId: string, micros: number): ReserveResult | undefined {
    const lease = [...this.live].find(
      (l) => l.hold.projectId === projectId && this.young(l) && this.room(l) >= micros,
    );
    return lease ? { ok: true, reservation: this.take(lease, micros) } : undefined;
  }

  private take(lease: Lease, micros: number): Reservation {
    lease.reservedMicros += micros;
    lease.running++;
    lease.taken++;
    lease.lastUsedAt = this.clock();
    return { lease, micros };
  }

  /**
   * A call ended: its reservation becomes its charge (at most what it held; the rest of its cost is
   * uncollected). Resolves once the charge is noted when `noteMs` is 0, at once otherwise.
   */
  async finish(reservation: Reservation, costMicros: number): Promise<void> {
    const { lease, micros } = reservation;
    lease.reservedMicros -= micros;
    lease.running--;
    if (costMicros > 0) {
      const charged = Math.min(costMicros, micros);
      lease.charges = {
        chargedMicros: lease.charges.chargedMicros + charged,
        uncollectedMicros: lease.charges.uncollectedMicros + (costMicros - charged),
        calls: lease.charges.calls + 1,
      };
    }
    lease.lastUsedAt = this.clock();
    if (lease.running === 0 && !this.usable(lease)) return this.track(this.settle(lease));
    if (this.options.noteMs === 0) return this.track(this.note(lease));
    this.schedule();
  }

  /** Closes every lease and settles those with no call running (the others as their last call ends). */
  async settleAll(): Promise<void> {
    for (const lease of this.live) this.retire(lease);
    await this.idle();
  }

  /** Resolves once no lease is being taken in the background, noted or settled. */
  async idle(): Promise<void> {
    while (this.work.size > 0) await Promise.allSettled([...this.work]);
  }

  private fits(lease: Lease, micros: number): boolean {
    return this.usable(lease) && this.room(lease) >= micros;
  }

  private room(lease: Lease): number {
    return lease.hold.micros - lease.reservedMicros - lease.charges.chargedMicros;
  }

  private demandOf(projectId: string): Demand {
    let demand = this.demand.get(projectId);
    if (!demand) {
      demand = { callsPerLease: this.options.callsPerLease, availableMicros: undefined };
      if (this.demand.size >= MAX_PROJECTS) this.demand.clear();
      this.demand.set(projectId, demand);
    }
    return demand;
  }

  private resize(projectId: string, factor: number): void {
    const demand = this.demandOf(projectId);
    demand.callsPerLease = Math.max(
      this.options.callsPerLease,
      Math.min(MAX_CALLS_PER_LEASE, Math.round(demand.callsPerLease * factor)),
    );
  }

  private open(projectId: string, micros: number): Promise<ReserveResult | undefined> {
    const done = this.openLease(projectId, micros).finally(() => this.opening.delete(projectId));
    this.opening.set(projectId, { micros, done });
    return done;
  }

  private usable(lease: Lease): boolean {
    return lease.open && this.young(lease);
  }

  /** Within its open time: a call it takes still ends before its hold expires. */
  private young(lease: Lease): boolean {
    return !lease.settled && this.clock() < lease.hold.createdAt + this.options.openMs;
  }

  /** No new calls take from the lease; it settles now if none is running, else when the last ends. */
  private retire(lease: Lease): void {
    this.stopTaking(lease);
    if (lease.running === 0) void this.track(this.settle(lease));
  }

  private stopTaking(lease: Lease): void {
    lease.open = false;
    if (this.current.get(lease.hold.projectId) === lease) this.current.delete(lease.hold.projectId);
  }

  /**
   * Takes a lease of the project's calls-per-lease holds like this one, at most a quarter of the
   * balance seen last; when the balance is short, half of what is left. It becomes the lease new
   * calls take from; the one before takes no more.
   */
  private async openLease(projectId: string, micros: number): Promise<ReserveResult | undefined> {
    const demand = this.demandOf(projectId);
    const expiresAt = () => this.clock() + this.options.openMs + this.options.holdTtlMs;
    // Whole calls' worth, so that calls alike leave no unusable remainder in a lease.
    const calls = (budget: number) => micros * Math.max(1, Math.floor(budget / micros));
    const seen = demand.availableMicros ?? Number.MAX_SAFE_INTEGER;
    const wanted = calls(Math.min(MAX_CALL_MICROS, micros * demand.callsPerLease, seen / 4));
    let result = await this.store.hold(projectId, newHoldId(), wanted, expiresAt());
    if (!result.ok && wanted > micros && result.availableMicros >= micros) {
      result = await this.store.hold(projectId, newHoldId(), calls(result.availableMicros / 2), expiresAt());
    }
    demand.availableMicros = result.availableMicros;
    if (!result.ok) return result;
    const lease: Lease = {
      hold: result.hold,
      sizedFor: Math.floor(result.hold.micros / micros),
      taken: 0,
      open: true,
      reservedMicros: 0,
      running: 0,
      charges: { chargedMicros: 0, uncollectedMicros: 0, calls: 0 },
      notedCalls: 0,
      lastUsedAt: this.clock(),
      settled: false,
    };
    const previous = this.current.get(projectId);
    this.current.set(projectId, lease);
    if (previous) this.retire(previous);
    this.live.add(lease);
    this.schedule();
    return undefined;
  }

  private async note(lease: Lease, settling = false): Promise<void> {
    const charges = lease.charges;
    if ((lease.settled && !settling) || charges.calls <= lease.notedCalls) return;
    try {
      await this.store.recordCharges(lease.hold, charges);
      lease.notedCalls = Math.max(lease.notedCalls, charges.calls);
    } catch (err) {
      // Noted at the next tick, or settled in full later; only a crash before either would lose it.
      this.logger.warn("noting credit charges failed", { ...errorFields(err), ...this.fields(lease) });
      this.schedule();
    }
  }

  /**
   * Settles the lease at its charges, retried a few times over seconds (each attempt is idempotent):
   * a lease left open is settled by the sweeper at expiry, at the charges noted on it.
   */
  private async settle(lease: Lease): Promise<void> {
    if (lease.settled) return;
    lease.settled = true;
    if (lease.taken < lease.sizedFor / 4) this.resize(lease.hold.projectId, 0.5);
    this.stopTaking(lease);
    this.live.delete(lease);
    this.settling.add(lease);
    try {
      await this.settleRetried(lease);
    } finally {
      this.settling.delete(lease);
    }
  }

  private async settleRetried(lease: Lease): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await this.store.settleCharges(lease.hold, lease.charges);
        return;
      } catch (err) {
        const final = attempt >= SETTLE_ATTEMPTS;
        this.logger[final ? "error" : "warn"](
          final
            ? "credit settlement failed; the sweeper settles the hold at expiry, at its noted charges"
            : "credit settlement retried",
          { ...errorFields(err), attempt, ...this.fields(lease) },
        );
        if (final) {
          // Then the sweeper settles at what is noted: the store may take that write still.
          await this.note(lease, true);
          return;
        }
        await sleep(SETTLE_RETRY_BASE_MS * 2 ** (attempt - 1));
      }
    }
  }

  /** One timer for all leases: notes charges and settles leases that are idle, old or closed. */
  private schedule(): void {
    if (this.timer || this.live.size === 0) return;
    const every = Math.min(this.options.idleMs, this.options.noteMs || this.options.idleMs);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const now = this.clock();
      for (const lease of this.live) {
        const done = !this.usable(lease) || now - lease.lastUsedAt >= this.options.idleMs;
        void this.track(lease.running === 0 && done ? this.settle(lease) : this.note(lease));
      }
      this.schedule();
    }, every);
    // A lease never keeps a process alive: shutdown settles them, and the sweeper covers a crash.
    this.timer.unref();
  }

  private track(work: Promise<void>): Promise<void> {
    this.work.add(work);
    void work.finally(() => this.work.delete(work));
    return work;
  }

  private fields(lease: Lease): Record<string, string> {
    return { projectId: lease.hold.projectId, holdId: lease.hold.holdId };
  }
}
