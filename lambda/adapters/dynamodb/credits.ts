import { randomBytes } from "node:crypto";
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
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
import { type HoldItem, HoldItems, type HoldMarker as ItemMarker, type OwnerWrite } from "./hold-items";
import { readItem } from "./paging";
import type { TableNames } from "./tables";

/**
 * Credits over DynamoDB with single-item conditional writes only (dynalite has no transactions).
 *
 * Items. `credits` holds one balance item per project: `{ projectId, available, open, held, grants:
 * { <grantId>: {m, t, s, n, u?} } }`, the money and counts only. Each open hold (a process's credit
 * lease) is an item of its own beside it, which carries the charges noted on the lease: the steps
 * t1-t3 and r1-r5 of hold-items.ts, the design in docs/metering.md "No hot item". A balance may still
 * carry `holds: { <holdId>: {m, t, x, c?, u?, k?} }` from before holds had items; the sweeper resolves
 * them (s1-s3 below) until none is left. `grants` marks every grant whose ledger entry may not be
 * written yet. `ledger` holds immutable entries under (projectId, entryId), with deterministic ids, so
 * a repeated write of the same entry is a no-op (put-if-absent).
 *
 * Each write of the balance moves money and its marker together, conditionally, so it applies exactly
 * once whatever is retried. Ledger entries are written before the balance write that removes a marker,
 * so a marker still present tells a sweeper exactly what to finish, and a missing one means its
 * entries exist.
 *
 * Resolve (a hold's settlement or release, off the critical path; r2 of hold-items.ts):
 *   s1  ledger: put-if-absent `hold` entry (-m)                          } in parallel
 *   s2  ledger: put-if-absent resolution entry, `settle` (+m-charged) or  } the first writer of s2
 *       `release` (+m)                                                     } decides the outcome
 *   then the refund of the winning s2 on the balance, once (r3 of hold-items.ts; s3 for a legacy hold)
 * Grant (and an outside payment's adjustment):
 *   g0  create the balance item if absent
 *   g1  balance: available += m, grants[g] = {m,t,s,n}   if grants[g] absent and room below the cap
 *   g2  ledger: put-if-absent `grant` entry (+m)
 *   g3  balance: remove grants[g]
 * Sweeper (`releaseExpired`): the balances due in the index `holdsDue`, never a Scan; for each expired
 * hold the steps above with a proposal of its noted charges (`release` when none; a settlement already
 * written in s2 wins); for each grant marker older than GRANT_REPAIR_DELAY_MS, g2-g3. So the ledger's
 * deltas sum to the balance's change whenever no marker is left.
 */

/** A grant's own request completes in milliseconds; the sweeper leaves younger grant markers alone. */
export const GRANT_REPAIR_DELAY_MS = 60_000;
const MAX_LEDGER_PAGE = 1000;

interface HoldMarker {
  m: number;
  t: number;
  x: number;
  /** Charges noted so far (recordCharges): charged, uncollected, calls. */
  c?: number;
  u?: number;
  k?: number;
}

interface GrantMarker {
  /** Negative for an adjustment's debit. */
  m: number;
  t: number;
  s: string;
  n?: string;
  /** A debit: what it could not take back (spent already). */
  u?: number;
}

/** Tries of a debit whose read balance moved before its write (calls spending meanwhile). */
const DEBIT_TRIES = 20;
/** A balance and its open holds are read at most five times over (hold-items.ts `readWithHolds`). */
const BALANCE_READ_ROUNDS = 5;

interface BalanceItem {
  projectId: string;
  available: number;
  /** Holds taken before holds had items of their own; new holds are items (hold-items.ts). */
  holds?: Record<string, HoldMarker>;
  grants: Record<string, GrantMarker>;
  /** Open hold items, and what they hold (hold-items.ts); `seq` counts takes and resolutions. */
  open?: number;
  held?: number;
  seq?: number;
}

type Proposal = Pick<Settlement, "outcome" | "chargedMicros" | "uncollectedMicros" | "calls">;
const RELEASE: Proposal = { outcome: "released", chargedMicros: 0, uncollectedMicros: 0, calls: 0 };

function proposalOf(charges: HoldCharges): Proposal {
  return { outcome: charges.chargedMicros > 0 ? "settled" : "released", ...charges };
}

/** What the sweeper settles an expired hold at: the charges noted on it, else nothing. */
function notedProposal(marker: HoldMarker): Proposal {
  return proposalOf({ chargedMicros: marker.c ?? 0, uncollectedMicros: marker.u ?? 0, calls: marker.k ?? 0 });
}

const opts = { removeUndefinedValues: true };

export class DynamoCredits implements CreditStore {
  private readonly holds: HoldItems;

  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "credits" | "ledger">,
    private readonly clock: () => number = Date.now,
  ) {
    this.holds = new HoldItems(db, tables.credits, "projectId", clock);
  }

  async grant(projectId: string, micros: number, source: string, note?: string): Promise<LedgerEntry> {
    validateGrant(micros, source, note);
    const grantId = randomBytes(12).toString("base64url");
    const marker: GrantMarker = { m: micros, t: this.clock(), s: source, n: note };
    await this.createBalance(projectId);
    try {
      await this.markGrant(projectId, grantId, marker, "available <= :room", {
        ":room": MAX_BALANCE_MICROS - micros,
      });
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      // A retried request whose first attempt landed finds its own marker; otherwise the cap refused it.
      if (!(await this.readBalance(projectId))?.grants[grantId]) {
        throw errors.invalidField("amount", `would take the balance above ${formatUsd(MAX_BALANCE_MICROS)}`);
      }
    }
    return (await this.completeGrant(projectId, grantId, marker)).entry;
  }

  /**
   * An outside payment's adjustment: g1-g3 with the payment's own id and time, so the entry is
   * `entryId(at, ref)` whatever repeats it. A repeat finds the entry (done) or the marker (finished here).
   * A debit reads the balance and takes at most what is available, conditional on it still being there.
   */
  async adjust(projectId: string, adjustment: Adjustment): Promise<AdjustmentResult> {
    validateAdjustment(adjustment);
    const { ref, at } = adjustment;
    const done = await this.readEntry(projectId, entryId(at, ref, "origin"));
    if (done) return { entry: done, applied: false };
    await this.createBalance(projectId);
    for (let tries = 0; tries < DEBIT_TRIES; tries++) {
      const item = await this.readBalance(projectId);
      const open = item?.grants[ref];
      if (open) return { entry: (await this.completeGrant(projectId, ref, open)).entry, applied: false };
      const available = item?.available ?? 0;
      const wanted = adjustment.micros;
      const moved = wanted > 0 ? wanted : 0 - Math.min(-wanted, Math.max(available, 0));
      const marker: GrantMarker = { m: moved, t: at, s: adjustment.source, n: adjustment.note };
      if (wanted < 0) marker.u = -wanted + moved;
      try {
        await this.markGrant(
          projectId,
          ref,
          marker,
          wanted > 0 ? "available <= :room" : "available >= :take",
          wanted > 0 ? { ":room": MAX_BALANCE_MICROS - moved } : { ":take": -moved },
        );
        return { entry: (await this.completeGrant(projectId, ref, marker)).entry, applied: true };
      } catch (err) {
        if (!(err instanceof ConditionalCheckFailedException)) throw err;
        if (wanted > 0 && !(await this.readBalance(projectId))?.grants[ref]) {
          throw errors.invalidField(
            "amount",
            `would take the balance above ${formatUsd(MAX_BALANCE_MICROS)}`,
          );
        }
      }
    }
    throw new Error(`The balance of ${projectId} kept moving; the debit ${ref} was not applied.`);
  }

  async hold(projectId: string, holdId: string, micros: number, expiresAt: number): Promise<HoldResult> {
    const createdAt = this.clock();
    validateHold(holdId, micros, expiresAt, createdAt);
    const hold: Hold = { projectId, holdId, micros, createdAt, expiresAt };
    const taken = await this.holds.take(
      projectId,
      holdId,
      { m: micros, t: createdAt, x: expiresAt },
      { set: "available = available - :m", condition: "available >= :m", values: {} },
      { set: "available = available + :m", values: {} },
    );
    const available = (taken.owner?.available as number | undefined) ?? 0;
    return taken.taken
      ? { ok: true, hold, availableMicros: available }
      : { ok: false, availableMicros: available };
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
    // On the hold's own item: absolute totals, conditional on the calls count growing.
    return this.holds.note(hold, charges);
  }

  async releaseExpired(now: number): Promise<SweepReport> {
    const report: SweepReport = { holdsReleased: 0, settlementsCompleted: 0, grantsCompleted: 0 };
    const swept = await this.holds.sweep(
      now,
      async (item) => {
        const done = await this.resolveItem(item.owner, item.holdId, item.m, item.t, undefined, now);
        if (done.done !== "now") return false;
        if (done.value.proposalWon) report.holdsReleased++;
        else report.settlementsCompleted++;
        return true;
      },
      // A hold whose item was never written: nothing was noted on it; released in full.
      async (marker) => (await this.ledgerFirst(marker.owner, marker.holdId, marker, RELEASE, now)).write,
      async (item) => {
        const balance = item as unknown as BalanceItem;
        // Holds taken before holds had items of their own (marked on the balance), and grants.
        for (const [holdId, marker] of Object.entries(balance.holds ?? {})) {
          if (marker.x > now) continue;
          const done = await this.applyResolution(
            balance.projectId,
            holdId,
            marker,
            notedProposal(marker),
            now,
          );
          if (!done.applied) continue;
          if (done.proposalWon) report.holdsReleased++;
          else report.settlementsCompleted++;
        }
        for (const [grantId, marker] of Object.entries(balance.grants ?? {})) {
          if (marker.t > now - GRANT_REPAIR_DELAY_MS) continue;
          if ((await this.completeGrant(balance.projectId, grantId, marker)).applied)
            report.grantsCompleted++;
        }
      },
    );
    report.holdsReleased += swept.released;
    return report;
  }

  async balance(projectId: string): Promise<CreditBalance> {
    // Noted charges live on open holds' items, read beside the balance (hold-items.ts `readWithHolds`).
    const { item, holds } = await this.holds.readWithHolds<BalanceItem>(projectId, BALANCE_READ_ROUNDS);
    const noted = holds.reduce((sum, h) => sum + (h.c ?? 0), 0);
    const legacy = Object.values(item?.holds ?? {});
    const legacyCharged = legacy.reduce((sum, hold) => sum + (hold.c ?? 0), 0);
    return {
      projectId,
      availableMicros: item?.available ?? 0,
      // What open holds still reserve: their charges noted so far are spent.
      heldMicros: legacy.reduce((sum, hold) => sum + hold.m - (hold.c ?? 0), 0) + (item?.held ?? 0) - noted,
      chargedInFlightMicros: legacyCharged + noted,
      openHolds: legacy.length + (item?.open ?? 0),
    };
  }

  async ledger(projectId: string, options: { limit?: number; cursor?: string } = {}): Promise<LedgerPage> {
    const limit = options.limit ?? 50;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LEDGER_PAGE) {
      throw errors.invalidField("limit", `must be a whole number from 1 to ${MAX_LEDGER_PAGE}`);
    }
    const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor);
    const page = await this.db.send(
      new QueryCommand({
        TableName: this.tables.ledger,
        KeyConditionExpression: "projectId = :p",
        ExpressionAttributeValues: marshall({ ":p": projectId }),
        ScanIndexForward: false,
        Limit: limit,
        ExclusiveStartKey: after === undefined ? undefined : marshall({ projectId, entryId: after }),
      }),
    );
    const entries = (page.Items ?? []).map((item) => unmarshall(item) as LedgerEntry);
    const last = page.LastEvaluatedKey && (unmarshall(page.LastEvaluatedKey) as LedgerEntry);
    return last ? { entries, cursor: Buffer.from(last.entryId).toString("base64url") } : { entries };
  }

  private async resolve(hold: Hold, proposal: Proposal): Promise<Settlement> {
    const done = await this.resolveItem(hold.projectId, hold.holdId, hold.micros, hold.createdAt, proposal);
    if (done.done === "now") return done.value.settlement;
    // A hold marked on the balance itself (taken before holds had items of their own).
    const marker = (await this.readBalance(hold.projectId))?.holds?.[hold.holdId];
    if (marker) {
      if (marker.m !== hold.micros || marker.t !== hold.createdAt) {
        throw new Error(`Hold ${hold.holdId} does not match the open hold of that id.`);
      }
      return (await this.applyResolution(hold.projectId, hold.holdId, marker, proposal, this.clock()))
        .settlement;
    }
    // Resolved before, or right now by another process: its resolution is in the ledger (r2 precedes r3).
    const id = entryId(hold.createdAt, hold.holdId, "resolution");
    for (let attempt = 0; attempt < 20; attempt++) {
      const first = await this.readEntry(hold.projectId, id);
      if (first) return settlementOf(first);
      if (done.done === "before") break;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`No hold ${hold.holdId} in project ${hold.projectId}.`);
  }

  /** r1-r5 on the hold's item, with the ledger's entries (s1, s2) as r2: the first resolution wins. */
  private resolveItem(
    projectId: string,
    holdId: string,
    micros: number,
    createdAt: number,
    /** The caller's resolution; undefined: at the charges noted on the item (the sweeper). */
    proposal: Proposal | undefined,
    now = this.clock(),
  ) {
    const charges = proposal && {
      chargedMicros: proposal.chargedMicros,
      uncollectedMicros: proposal.uncollectedMicros,
      calls: proposal.calls,
    };
    return this.holds.resolve(
      { projectId, holdId, micros, createdAt },
      charges,
      async (item: HoldItem) =>
        this.ledgerFirst(projectId, holdId, item, proposal ?? notedProposal(item), now),
      now,
    );
  }

  /** s1, s2; then the balance's part (r3): the winning resolution's refund. */
  private async ledgerFirst(
    projectId: string,
    holdId: string,
    marker: ItemMarker,
    proposal: Proposal,
    at: number,
  ): Promise<{ write: OwnerWrite; value: { settlement: Settlement; proposalWon: boolean } }> {
    const proposed = resolutionEntry(projectId, holdId, marker, proposal, at);
    const [, proposalWon] = await Promise.all([
      this.putEntry(holdEntry(projectId, holdId, marker)),
      this.putEntry(proposed),
    ]);
    const entry = proposalWon ? proposed : await this.readEntry(projectId, proposed.entryId);
    if (!entry) throw new Error(`The resolution of hold ${holdId} vanished from the ledger.`);
    const write: OwnerWrite = {
      set: "available = available + :refund",
      values: { ":refund": entry.deltaMicros },
    };
    return { write, value: { settlement: settlementOf(entry), proposalWon } };
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
    const entry = proposalWon ? proposed : await this.readEntry(projectId, proposed.entryId);
    if (!entry) throw new Error(`The resolution of hold ${holdId} vanished from the ledger.`);
    const applied = await this.updateIfMarked(
      projectId,
      "SET available = available + :refund REMOVE holds.#h",
      "holds.#h.m = :m AND holds.#h.t = :t",
      holdId,
      { ":refund": entry.deltaMicros, ":m": marker.m, ":t": marker.t },
    );
    return { settlement: settlementOf(entry), proposalWon, applied };
  }

  /**
   * g1: the grant's amount on the balance with its marker, if the marker is not there yet and
   * `condition` holds. The balance goes into the sweeper's index should the grant stop halfway.
   */
  private async markGrant(
    projectId: string,
    grantId: string,
    marker: GrantMarker,
    condition: string,
    values: Record<string, number>,
  ): Promise<void> {
    await this.db.send(
      new UpdateItemCommand({
        TableName: this.tables.credits,
        Key: marshall({ projectId }),
        UpdateExpression:
          "SET available = available + :m, grants.#g = :marker, holdOwner = :shard, " +
          "#due = if_not_exists(#due, :due), seq = if_not_exists(seq, :zero) + :one",
        ConditionExpression: `attribute_not_exists(grants.#g) AND ${condition}`,
        ExpressionAttributeNames: { "#g": grantId, "#due": "due" },
        ExpressionAttributeValues: marshall(
          {
            ...values,
            ":m": marker.m,
            ":marker": marker,
            ":shard": HoldItems.shardOf(projectId),
            ":due": this.clock() + GRANT_REPAIR_DELAY_MS,
            ":zero": 0,
            ":one": 1,
          },
          opts,
        ),
      }),
    );
  }

  /** g2-g3. */
  private async completeGrant(
    projectId: string,
    grantId: string,
    marker: GrantMarker,
  ): Promise<{ entry: LedgerEntry; applied: boolean }> {
    const entry: LedgerEntry = {
      projectId,
      entryId: entryId(marker.t, grantId, "origin"),
      type: marker.m < 0 || marker.u !== undefined ? "debit" : "grant",
      deltaMicros: marker.m,
      at: marker.t,
      ref: grantId,
      source: marker.s,
      note: marker.n,
      uncollectedMicros: marker.u,
    };
    await this.putEntry(entry);
    const applied = await this.updateIfMarked(
      projectId,
      "REMOVE grants.#h",
      "attribute_exists(grants.#h)",
      grantId,
    );
    return { entry, applied };
  }

  private async updateIfMarked(
    projectId: string,
    update: string,
    condition: string,
    markerId: string,
    values?: Record<string, number>,
  ): Promise<boolean> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.credits,
          Key: marshall({ projectId }),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeNames: { "#h": markerId },
          ExpressionAttributeValues: values && marshall(values),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  private async createBalance(projectId: string): Promise<void> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.credits,
          Item: marshall({ projectId, available: 0, grants: {} }),
          ConditionExpression: "attribute_not_exists(projectId)",
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  /** Put-if-absent; true when this call wrote it. Entries are deterministic, so a repeat is a no-op. */
  private async putEntry(entry: LedgerEntry): Promise<boolean> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.ledger,
          Item: marshall(entry, opts),
          ConditionExpression: "attribute_not_exists(entryId)",
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  private async readEntry(projectId: string, id: string): Promise<LedgerEntry | undefined> {
    const entry = await readItem(this.db, this.tables.ledger, { projectId, entryId: id });
    return entry as LedgerEntry | undefined;
  }

  private async readBalance(projectId: string): Promise<BalanceItem | undefined> {
    return (await readItem(this.db, this.tables.credits, { projectId })) as BalanceItem | undefined;
  }
}

const ENTRY_ID = /^\d{15}#[A-Za-z0-9_-]{1,100}#[01]$/;

/** Time-ordered and deterministic: a hold's `hold` entry (0) is followed by its resolution (1). */
function entryId(at: number, ref: string, part: "origin" | "resolution"): string {
  return `${String(at).padStart(15, "0")}#${ref}#${part === "origin" ? 0 : 1}`;
}

function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, "base64url").toString("utf8");
  if (!ENTRY_ID.test(id)) throw errors.invalidField("cursor", "is not a cursor from a previous page");
  return id;
}

function holdEntry(projectId: string, holdId: string, marker: HoldMarker): LedgerEntry {
  return {
    projectId,
    entryId: entryId(marker.t, holdId, "origin"),
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
    entryId: entryId(marker.t, holdId, "resolution"),
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
