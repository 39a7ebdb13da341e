import { randomBytes } from "node:crypto";
import {
  type Adjustment,
  type AdjustmentResult,
  type CreditBalance,
  type CreditStore,
  formatUsd,
  type Hold,
  type HoldCharges,
  type HoldResult,
  type LedgerEntry,
  type LedgerPage,
  MAX_BALANCE_MICROS,
  MAX_CALL_MICROS,
  type Settlement,
  type SweepReport,
  validateAdjustment,
  validateCharges,
  validateGrant,
  validateHold,
  validateMicros,
} from "../../core/credits";
import { errors } from "../../core/errors";
import { MemoryTable } from "./table";

/**
 * Credits in memory, by the protocol of adapters/dynamodb/credits.ts step for step: one balance item
 * per project carrying a marker per open hold and per unfinished grant, ledger entries with
 * deterministic ids written put-if-absent, and every move of money a conditional update of the balance
 * item that moves the money and its marker together. Steps run as separate operations (MemoryTable), so
 * settlements raced against each other resolve exactly once here as they do in DynamoDB. Expiries are
 * the caller's `now` (the sweeper) and the injected clock, never a timer.
 */

/** A grant's own request completes in milliseconds; the sweeper leaves younger grant markers alone. */
export const GRANT_REPAIR_DELAY_MS = 60_000;
const MAX_LEDGER_PAGE = 1000;

interface HoldMarker {
  m: number;
  t: number;
  x: number;
  c?: number;
  u?: number;
  k?: number;
}

interface GrantMarker {
  m: number;
  t: number;
  s: string;
  n?: string;
  u?: number;
}

interface BalanceItem {
  projectId: string;
  available: number;
  holds: Record<string, HoldMarker>;
  grants: Record<string, GrantMarker>;
}

type Proposal = Pick<Settlement, "outcome" | "chargedMicros" | "uncollectedMicros" | "calls">;
const RELEASE: Proposal = { outcome: "released", chargedMicros: 0, uncollectedMicros: 0, calls: 0 };

const proposalOf = (charges: HoldCharges): Proposal => ({
  outcome: charges.chargedMicros > 0 ? "settled" : "released",
  ...charges,
});

const notedProposal = (marker: HoldMarker): Proposal =>
  proposalOf({ chargedMicros: marker.c ?? 0, uncollectedMicros: marker.u ?? 0, calls: marker.k ?? 0 });

/** The hold's marker as it was taken (amount and time): a marker of the same id but another hold is not it. */
const sameHold = (marker: HoldMarker | undefined, m: number, t: number) => marker?.m === m && marker.t === t;

export class MemoryCredits implements CreditStore {
  private readonly balances = new MemoryTable<BalanceItem>();
  private readonly entries = new MemoryTable<LedgerEntry>();

  constructor(private readonly clock: () => number = Date.now) {}

  async grant(projectId: string, micros: number, source: string, note?: string): Promise<LedgerEntry> {
    validateGrant(micros, source, note);
    const grantId = randomBytes(12).toString("base64url");
    const marker: GrantMarker = {
      m: micros,
      t: this.clock(),
      s: source,
      ...(note !== undefined && { n: note }),
    };
    // g0 + g1 (an absent item counts as an empty balance, as g0 creates it).
    const applied = await this.balances.update(projectId, (stored) => {
      const item = stored ?? emptyBalance(projectId);
      if (item.grants[grantId] || item.available > MAX_BALANCE_MICROS - micros) return undefined;
      item.available += micros;
      item.grants[grantId] = marker;
      return item;
    });
    if (!applied) {
      throw errors.invalidField("amount", `would take the balance above ${formatUsd(MAX_BALANCE_MICROS)}`);
    }
    return (await this.completeGrant(projectId, grantId, marker)).entry;
  }

  /** As adapters/dynamodb/credits.ts: the payment's id and time name the entry; a debit takes what is there. */
  async adjust(projectId: string, adjustment: Adjustment): Promise<AdjustmentResult> {
    validateAdjustment(adjustment);
    const { ref, at } = adjustment;
    const done = await this.entries.get(entryKey(projectId, entryId(at, ref, 0)));
    if (done) return { entry: done, applied: false };
    let open: GrantMarker | undefined;
    let marker: GrantMarker | undefined;
    const applied = await this.balances.update(projectId, (stored) => {
      const item = stored ?? emptyBalance(projectId);
      open = item.grants[ref];
      if (open) return undefined;
      const wanted = adjustment.micros;
      const moved = wanted > 0 ? wanted : 0 - Math.min(-wanted, Math.max(item.available, 0));
      if (wanted > 0 && item.available > MAX_BALANCE_MICROS - moved) return undefined;
      marker = {
        m: moved,
        t: at,
        s: adjustment.source,
        ...(adjustment.note !== undefined && { n: adjustment.note }),
        ...(wanted < 0 && { u: -wanted + moved }),
      };
      item.available += moved;
      item.grants[ref] = marker;
      return item;
    });
    if (open) return { entry: (await this.completeGrant(projectId, ref, open)).entry, applied: false };
    if (!applied || !marker) {
      throw errors.invalidField("amount", `would take the balance above ${formatUsd(MAX_BALANCE_MICROS)}`);
    }
    return { entry: (await this.completeGrant(projectId, ref, marker)).entry, applied: true };
  }

  async hold(projectId: string, holdId: string, micros: number, expiresAt: number): Promise<HoldResult> {
    const createdAt = this.clock();
    validateHold(holdId, micros, expiresAt, createdAt);
    const hold: Hold = { projectId, holdId, micros, createdAt, expiresAt };
    let seen: BalanceItem | undefined;
    // h1
    const taken = await this.balances.update(projectId, (item) => {
      seen = item;
      if (!item || item.available < micros || item.holds[holdId]) return undefined;
      item.available -= micros;
      item.holds[holdId] = { m: micros, t: createdAt, x: expiresAt };
      return item;
    });
    if (taken) return { ok: true, hold, availableMicros: taken.available };
    const open = seen?.holds[holdId];
    if (open) {
      if (sameHold(open, micros, createdAt)) return { ok: true, hold, availableMicros: seen?.available ?? 0 };
      throw new Error(`Hold id ${holdId} is already in use in project ${projectId}.`);
    }
    return { ok: false, availableMicros: seen?.available ?? 0 };
  }

  settle(hold: Hold, actualMicros: number): Promise<Settlement> {
    validateMicros("actualMicros", actualMicros, MAX_CALL_MICROS, 0);
    const chargedMicros = Math.min(actualMicros, hold.micros);
    return this.resolve(hold, {
      outcome: "settled",
      chargedMicros,
      uncollectedMicros: actualMicros - chargedMicros,
      calls: 1,
    });
  }

  release(hold: Hold): Promise<Settlement> {
    return this.resolve(hold, RELEASE);
  }

  async settleCharges(hold: Hold, charges: HoldCharges): Promise<Settlement> {
    validateCharges(hold, charges);
    return this.resolve(hold, proposalOf(charges));
  }

  async recordCharges(hold: Hold, charges: HoldCharges): Promise<boolean> {
    validateCharges(hold, charges);
    // n1: absolute totals, only while the hold is open and only when the calls count grows.
    const noted = await this.balances.update(hold.projectId, (item) => {
      const marker = item?.holds[hold.holdId];
      if (!item || !marker || !sameHold(marker, hold.micros, hold.createdAt)) return undefined;
      if (marker.k !== undefined && marker.k >= charges.calls) return undefined;
      marker.c = charges.chargedMicros;
      marker.u = charges.uncollectedMicros;
      marker.k = charges.calls;
      return item;
    });
    return noted !== undefined;
  }

  async releaseExpired(now: number): Promise<SweepReport> {
    const report: SweepReport = { holdsReleased: 0, settlementsCompleted: 0, grantsCompleted: 0 };
    const marked = await this.balances.scan(
      (_, item) => Object.keys(item.holds).length > 0 || Object.keys(item.grants).length > 0,
    );
    for (const [, item] of marked) {
      for (const [holdId, marker] of Object.entries(item.holds)) {
        if (marker.x > now) continue;
        const done = await this.applyResolution(item.projectId, holdId, marker, notedProposal(marker), now);
        if (!done.applied) continue;
        if (done.proposalWon) report.holdsReleased++;
        else report.settlementsCompleted++;
      }
      for (const [grantId, marker] of Object.entries(item.grants)) {
        if (marker.t > now - GRANT_REPAIR_DELAY_MS) continue;
        if ((await this.completeGrant(item.projectId, grantId, marker)).applied) report.grantsCompleted++;
      }
    }
    return report;
  }

  async balance(projectId: string): Promise<CreditBalance> {
    const item = await this.balances.get(projectId);
    const holds = Object.values(item?.holds ?? {});
    return {
      projectId,
      availableMicros: item?.available ?? 0,
      heldMicros: holds.reduce((sum, hold) => sum + hold.m - (hold.c ?? 0), 0),
      chargedInFlightMicros: holds.reduce((sum, hold) => sum + (hold.c ?? 0), 0),
      openHolds: holds.length,
    };
  }

  async ledger(projectId: string, options: { limit?: number; cursor?: string } = {}): Promise<LedgerPage> {
    const limit = options.limit ?? 50;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LEDGER_PAGE) {
      throw errors.invalidField("limit", `must be a whole number from 1 to ${MAX_LEDGER_PAGE}`);
    }
    const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor);
    const prefix = `${projectId}\n`;
    const older = (await this.entries.scan((key) => key.startsWith(prefix)))
      .map(([, entry]) => entry)
      .reverse()
      .filter((entry) => after === undefined || entry.entryId < after);
    const entries = older.slice(0, limit);
    const last = entries.at(-1);
    // As DynamoDB's Limit does: a full page names its last key, even when nothing follows it.
    return last && entries.length === limit
      ? { entries, cursor: Buffer.from(last.entryId).toString("base64url") }
      : { entries };
  }

  /** The open holds' and unfinished grants' markers of a project: what a crash would leave to the sweeper. */
  async markers(projectId: string): Promise<{ holds: string[]; grants: string[] }> {
    const item = await this.balances.get(projectId);
    return { holds: Object.keys(item?.holds ?? {}), grants: Object.keys(item?.grants ?? {}) };
  }

  private async resolve(hold: Hold, proposal: Proposal): Promise<Settlement> {
    // r0
    const marker = (await this.balances.get(hold.projectId))?.holds[hold.holdId];
    if (!marker) {
      const first = await this.entries.get(entryKey(hold.projectId, entryId(hold.createdAt, hold.holdId, 1)));
      if (!first) throw new Error(`No hold ${hold.holdId} in project ${hold.projectId}.`);
      return settlementOf(first);
    }
    if (!sameHold(marker, hold.micros, hold.createdAt)) {
      throw new Error(`Hold ${hold.holdId} does not match the open hold of that id.`);
    }
    return (await this.applyResolution(hold.projectId, hold.holdId, marker, proposal, this.clock()))
      .settlement;
  }

  /** s1-s3: the ledger entries first, then the balance, which applies the winning resolution once. */
  private async applyResolution(
    projectId: string,
    holdId: string,
    marker: HoldMarker,
    proposal: Proposal,
    at: number,
  ): Promise<{ settlement: Settlement; proposalWon: boolean; applied: boolean }> {
    const proposed = resolutionEntry(projectId, holdId, marker, proposal, at);
    const [, proposalWon] = await Promise.all([
      this.putEntry(holdEntry(projectId, holdId, marker)),
      this.putEntry(proposed),
    ]);
    const entry = proposalWon ? proposed : await this.entries.get(entryKey(projectId, proposed.entryId));
    if (!entry) throw new Error(`The resolution of hold ${holdId} vanished from the ledger.`);
    const applied = await this.balances.update(projectId, (item) => {
      if (!item || !sameHold(item.holds[holdId], marker.m, marker.t)) return undefined;
      item.available += entry.deltaMicros;
      delete item.holds[holdId];
      return item;
    });
    return { settlement: settlementOf(entry), proposalWon, applied: applied !== undefined };
  }

  /** g2-g3. */
  private async completeGrant(
    projectId: string,
    grantId: string,
    marker: GrantMarker,
  ): Promise<{ entry: LedgerEntry; applied: boolean }> {
    const entry: LedgerEntry = {
      projectId,
      entryId: entryId(marker.t, grantId, 0),
      type: marker.m < 0 || marker.u !== undefined ? "debit" : "grant",
      deltaMicros: marker.m,
      at: marker.t,
      ref: grantId,
      source: marker.s,
      ...(marker.n !== undefined && { note: marker.n }),
      ...(marker.u !== undefined && { uncollectedMicros: marker.u }),
    };
    await this.putEntry(entry);
    const applied = await this.balances.update(projectId, (item) => {
      if (!item?.grants[grantId]) return undefined;
      delete item.grants[grantId];
      return item;
    });
    return { entry, applied: applied !== undefined };
  }

  /** Put-if-absent; true when this call wrote it. */
  private putEntry(entry: LedgerEntry): Promise<boolean> {
    return this.entries.put(
      entryKey(entry.projectId, entry.entryId),
      entry,
      (stored) => stored === undefined,
    );
  }
}

function emptyBalance(projectId: string): BalanceItem {
  return { projectId, available: 0, holds: {}, grants: {} };
}

const entryKey = (projectId: string, id: string) => `${projectId}\n${id}`;

const ENTRY_ID = /^\d{15}#[A-Za-z0-9_-]{1,100}#[01]$/;

/** Time-ordered and deterministic: a hold's `hold` entry (0) is followed by its resolution (1). */
function entryId(at: number, ref: string, part: 0 | 1): string {
  return `${String(at).padStart(15, "0")}#${ref}#${part}`;
}

function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, "base64url").toString("utf8");
  if (!ENTRY_ID.test(id)) throw errors.invalidField("cursor", "is not a cursor from a previous page");
  return id;
}

function holdEntry(projectId: string, holdId: string, marker: HoldMarker): LedgerEntry {
  return {
    projectId,
    entryId: entryId(marker.t, holdId, 0),
    type: "hold",
    deltaMicros: -marker.m,
    at: marker.t,
    ref: holdId,
    heldMicros: marker.m,
  };
}

function resolutionEntry(
  projectId: string,
  holdId: string,
  marker: HoldMarker,
  proposal: Proposal,
  at: number,
): LedgerEntry {
  return {
    projectId,
    entryId: entryId(marker.t, holdId, 1),
    type: proposal.outcome === "settled" ? "settle" : "release",
    deltaMicros: marker.m - proposal.chargedMicros,
    at,
    ref: holdId,
    heldMicros: marker.m,
    chargedMicros: proposal.chargedMicros,
    uncollectedMicros: proposal.uncollectedMicros,
    calls: proposal.calls,
  };
}

function settlementOf(entry: LedgerEntry): Settlement {
  return {
    projectId: entry.projectId,
    holdId: entry.ref,
    outcome: entry.type === "settle" ? "settled" : "released",
    heldMicros: entry.heldMicros ?? 0,
    chargedMicros: entry.chargedMicros ?? 0,
    uncollectedMicros: entry.uncollectedMicros ?? 0,
    calls: entry.calls ?? 0,
    at: entry.at,
  };
}
