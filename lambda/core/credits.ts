import { randomBytes } from "node:crypto";
import { type ApiError, errors } from "./errors";
import { formatUsd } from "./money";

export { decimalUsd, formatUsd } from "./money";

/**
 * Prepaid credits: a balance per project, holds taken before a call and settled after it, and a
 * ledger of every movement. Money is integer micro-USD (1 USD = 1,000,000 micros) everywhere.
 *
 * The contract the adapter keeps (protocol in adapters/dynamodb/credits.ts):
 * - a hold debits the available balance atomically and only if it covers the amount: never negative;
 * - a hold resolves exactly once, as `settled` (charged the actual cost, at most the held amount) or
 *   `released` (charged nothing); repeating a settle returns the first resolution;
 * - the ledger's `deltaMicros` sum to the change of the available balance once no step is pending;
 * - holds a crash left open are released by `releaseExpired` once expired (never by DynamoDB TTL).
 */

export const MICROS_PER_USD = 1_000_000;
/** One grant: at most $1,000,000. */
export const MAX_GRANT_MICROS = 1_000_000 * MICROS_PER_USD;
/** A balance stays far below 2^53 micros, so every figure is an exact JavaScript integer. */
export const MAX_BALANCE_MICROS = 1_000_000_000 * MICROS_PER_USD;
/** A hold or a settlement: at most $100,000, a bound no single call reaches. */
export const MAX_CALL_MICROS = 100_000 * MICROS_PER_USD;

export interface Hold {
  projectId: string;
  holdId: string;
  micros: number;
  createdAt: number;
  expiresAt: number;
}

/** A hold taken, with the available balance it left; or refused, with the balance that fell short. */
export type HoldResult =
  | { ok: true; hold: Hold; availableMicros: number }
  | { ok: false; availableMicros: number };

/**
 * What the calls under one hold cost so far: a hold may pay for several calls (a process's credit lease,
 * metering/credit-leases.ts). Totals only grow.
 */
export interface HoldCharges {
  /** Charged, at most the held amount. */
  chargedMicros: number;
  /** Cost beyond what each call held, not charged. */
  uncollectedMicros: number;
  /** Calls finished under the hold. */
  calls: number;
}

export interface Settlement {
  projectId: string;
  holdId: string;
  outcome: "settled" | "released";
  heldMicros: number;
  /** What the project paid: the actual cost, capped at the held amount. */
  chargedMicros: number;
  /** Actual cost above the hold, not charged (the hold bounds the spend); 0 when the estimate held. */
  uncollectedMicros: number;
  /** Calls the hold paid for. */
  calls: number;
  at: number;
}

/** `debit`: money taken back by an adjustment (a refunded or disputed payment), never by a call. */
export type LedgerEntryType = "grant" | "hold" | "settle" | "release" | "debit";

export interface LedgerEntry {
  projectId: string;
  /** Orders the ledger: the grant's or hold's time, then its id; a hold's resolution follows it. */
  entryId: string;
  type: LedgerEntryType;
  /** Effect on the available balance: + for grants and refunds, - for holds. */
  deltaMicros: number;
  at: number;
  /** The grant id or hold id. */
  ref: string;
  source?: string;
  note?: string;
  heldMicros?: number;
  chargedMicros?: number;
  uncollectedMicros?: number;
  /** On a resolution: how many calls the hold paid for. */
  calls?: number;
}

export interface CreditBalance {
  projectId: string;
  availableMicros: number;
  /** What open holds still reserve. */
  heldMicros: number;
  /** What open holds (credit leases) have charged so far: spent, not yet settled in the ledger. */
  chargedInFlightMicros: number;
  openHolds: number;
}

export interface LedgerPage {
  /** Newest first. */
  entries: LedgerEntry[];
  /** Pass back to get the next (older) page; absent on the last page. */
  cursor?: string;
}

export interface SweepReport {
  /** Expired holds with no settlement: settled at the charges noted on them, else released in full. */
  holdsReleased: number;
  /** Settlements written but not applied to the balance before a crash: applied now. */
  settlementsCompleted: number;
  /** Grants applied to the balance whose ledger entry a crash left unwritten: completed now. */
  grantsCompleted: number;
}

/**
 * Money moved by an outside payment (core/payments.ts): + a purchase or recharge, - what a refund or a
 * lost dispute takes back. `ref` and `at` come from the payment, so every repeat names the same ledger
 * entry; repeats apply once. A debit takes at most the available balance (what was spent stays spent):
 * its entry's `uncollectedMicros` is what could not be taken back.
 */
export interface Adjustment {
  /** The payment's id (a Checkout session, a PaymentIntent, a refund's key): 1-100 of A-Z a-z 0-9 _ -. */
  ref: string;
  /** When the payment happened, from the payment itself (never the time of a retry). */
  at: number;
  /** + to add, - to take back. */
  micros: number;
  source: string;
  note?: string;
}

export interface AdjustmentResult {
  entry: LedgerEntry;
  /** False when an earlier call applied it (a repeat): nothing moved now. */
  applied: boolean;
}

/** The credits port. Invalid arguments throw ApiError 400. */
export interface CreditStore {
  grant(projectId: string, micros: number, source: string, note?: string): Promise<LedgerEntry>;
  /**
   * Applies an outside payment's adjustment once per (`ref`, `at`) when repeats come one after another;
   * repeats at the same moment are the caller's to keep apart (core/payments.ts claims the payment).
   */
  adjust(projectId: string, adjustment: Adjustment): Promise<AdjustmentResult>;
  /** One store round trip on success: this is on the request's critical path. */
  hold(projectId: string, holdId: string, micros: number, expiresAt: number): Promise<HoldResult>;
  /** Resolves a hold that paid for one call: charged its actual cost, at most the held amount. */
  settle(hold: Hold, actualMicros: number): Promise<Settlement>;
  /** Resolves a hold without charge: the call failed or never reached the vendor. */
  release(hold: Hold): Promise<Settlement>;
  /** Resolves a hold that paid for any number of calls at their total (released when it is 0). */
  settleCharges(hold: Hold, charges: HoldCharges): Promise<Settlement>;
  /**
   * Notes an open hold's charges so far, so a process that dies before resolving it loses none of
   * them: the sweeper settles an expired hold at what was noted. Idempotent; a total with fewer calls
   * than one already noted is ignored. False when the hold is resolved already.
   */
  recordCharges(hold: Hold, charges: HoldCharges): Promise<boolean>;
  /** The sweeper: resolves expired holds and completes grants a crash interrupted. */
  releaseExpired(now: number): Promise<SweepReport>;
  balance(projectId: string): Promise<CreditBalance>;
  ledger(projectId: string, options?: { limit?: number; cursor?: string }): Promise<LedgerPage>;
}

const USD_PATTERN = /^(\d+)(?:\.(\d{1,6}))?$/;

/** Parses a dollar amount typed by a person (`25`, `12.50`, `0.000001`) into micros, exactly. */
export function parseUsd(text: string, field = "usd"): number {
  const match = USD_PATTERN.exec(text);
  if (!match?.[1]) {
    throw errors.invalidField(
      field,
      text.startsWith("-")
        ? "must be a positive amount"
        : "must be an amount in US dollars with at most 6 decimals, like 25 or 12.50",
    );
  }
  const whole = Number(match[1]);
  const micros = whole * MICROS_PER_USD + Number((match[2] ?? "").padEnd(6, "0"));
  // Huge inputs lose precision or become Infinity here, but still compare as too large.
  if (micros > MAX_GRANT_MICROS) {
    throw errors.invalidField(field, `must be at most ${formatUsd(MAX_GRANT_MICROS)}`);
  }
  if (micros === 0) throw errors.invalidField(field, "must be more than $0");
  return micros;
}

export function validateMicros(field: string, value: number, max: number, min = 1): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw errors.invalidField(field, `must be a whole number of micro-USD from ${min} to ${max}`);
  }
}

const SOURCE_PATTERN = /^[a-z][a-z0-9_-]{0,31}$/;
const MAX_NOTE = 500;

export function validateCharges(hold: Hold, charges: HoldCharges): void {
  validateMicros("chargedMicros", charges.chargedMicros, hold.micros, 0);
  validateMicros("uncollectedMicros", charges.uncollectedMicros, MAX_BALANCE_MICROS, 0);
  validateMicros("calls", charges.calls, Number.MAX_SAFE_INTEGER, 0);
}

export function validateGrant(micros: number, source: string, note: string | undefined): void {
  validateMicros("amount", micros, MAX_GRANT_MICROS);
  if (!SOURCE_PATTERN.test(source)) {
    throw errors.invalidField(
      "source",
      "use 1-32 characters of a-z, 0-9, '_' and '-', starting with a letter",
    );
  }
  if (note !== undefined) {
    if (note.length > MAX_NOTE) throw errors.invalidField("note", `must be at most ${MAX_NOTE} characters`);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
    if (/[\u0000-\u001f\u007f]/.test(note)) {
      throw errors.invalidField("note", "must not contain control characters");
    }
  }
}

const ADJUSTMENT_REF = /^[A-Za-z0-9_-]{1,100}$/;

export function validateAdjustment(adjustment: Adjustment): void {
  if (!ADJUSTMENT_REF.test(adjustment.ref)) {
    throw errors.invalidField("ref", "use 1-100 characters of A-Z, a-z, 0-9, '_' and '-'");
  }
  if (!Number.isSafeInteger(adjustment.at) || adjustment.at < 0) {
    throw errors.invalidField("at", "must be a time in milliseconds");
  }
  if (adjustment.micros === 0) throw errors.invalidField("amount", "must not be 0");
  validateGrant(Math.abs(adjustment.micros), adjustment.source, adjustment.note);
}

const HOLD_ID_PATTERN = /^[A-Za-z0-9_-]{8,64}$/;

export function validateHold(holdId: string, micros: number, expiresAt: number, now: number): void {
  if (!HOLD_ID_PATTERN.test(holdId)) {
    throw errors.invalidField("holdId", "use 8-64 characters of A-Z, a-z, 0-9, '_' and '-'");
  }
  validateMicros("micros", micros, MAX_CALL_MICROS);
  if (!Number.isSafeInteger(expiresAt) || expiresAt <= now) {
    throw errors.invalidField("expiresAt", "must be a time in the future");
  }
}

/** A fresh hold id: 128 random bits. Hold ids must never repeat within a project. */
export function newHoldId(): string {
  return randomBytes(16).toString("base64url");
}

/** The 402 for a refused hold, naming both amounts so the caller sees what is missing. */
export function insufficientCreditsError(neededMicros: number, availableMicros: number): ApiError {
  return errors.insufficientCredits(
    `Insufficient credits: this request may cost up to ${formatUsd(neededMicros)} ` +
      `and the project's available balance is ${formatUsd(availableMicros)}.`,
  );
}
