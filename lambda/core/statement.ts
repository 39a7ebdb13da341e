/**
 * The credit ledger read as a statement: grants are credits, what calls cost is debits, and a running
 * balance goes from the period's opening to its closing. Money is integer micro-USD throughout.
 *
 * The ledger (adapters/dynamodb/credits.ts) records a hold (-held) and its resolution (+refund) for
 * every credit lease, so a lease that paid for 30 calls reads as two large movements that the reader
 * must subtract. Here the pair becomes one debit of what was charged (-charged), at the resolution's
 * time; a release (nothing charged) moves nothing and is left out. Leases still open are not in the
 * ledger yet: their reservation and the charges noted on them so far are shown apart, "in flight".
 */
import type { CreditBalance, CreditStore, LedgerEntry } from "./credits";
import { errors } from "./errors";
import { DAY_MS, dayOf, parseDay, startOfDay } from "./interactions";

export type StatementGrouping = "day" | "lease";

export interface StatementLine {
  /** `debit`: credits taken back by a refund or a lost dispute (core/payments.ts). */
  kind: "grant" | "charges" | "debit";
  /** UTC day of the line. */
  day: string;
  /** The grant's time; for charges, the latest resolution in the line. */
  at: number;
  /** + for a grant, - for charges. */
  amountMicros: number;
  /** The balance after this line. */
  balanceMicros: number;
  /** Charges: how many calls and leases the line sums. */
  calls?: number;
  leases?: number;
  /** Charges: cost above what the calls held, never charged. A debit: what it could not take back. */
  uncollectedMicros?: number;
  /** A grant's id, or the lease's hold id when grouped by lease. */
  ref?: string;
  source?: string;
  note?: string;
}

export interface Statement {
  from: string;
  to: string;
  grouping: StatementGrouping;
  openingMicros: number;
  /** Oldest first. */
  lines: StatementLine[];
  closingMicros: number;
  /** Open leases: still reserved, and already charged but not settled (in neither the lines nor the closing). */
  inFlight: { heldMicros: number; chargedMicros: number; openLeases: number };
  /** What calls can spend now: the balance less what is in flight. */
  availableMicros: number;
}

/** Longest period a statement covers, both ends included. */
export const STATEMENT_MAX_DAYS = 366;
export const STATEMENT_DEFAULT_DAYS = 30;
/**
 * The ledger is ordered by the time a hold was taken, and a lease resolves at most its open time plus
 * the hold TTL later (an hour by default): reading this much before a period finds every resolution in it.
 */
export const RESOLUTION_LAG_MS = 7 * DAY_MS;

/** A movement of the statement before grouping. */
interface Movement {
  kind: StatementLine["kind"];
  at: number;
  amountMicros: number;
  calls: number;
  uncollectedMicros: number;
  ref: string;
  source?: string;
  note?: string;
}

function movementOf(entry: LedgerEntry): Movement | undefined {
  switch (entry.type) {
    case "grant":
      return {
        kind: "grant",
        at: entry.at,
        amountMicros: entry.deltaMicros,
        calls: 0,
        uncollectedMicros: 0,
        ref: entry.ref,
        ...(entry.source !== undefined ? { source: entry.source } : {}),
        ...(entry.note !== undefined ? { note: entry.note } : {}),
      };
    case "debit":
      return {
        kind: "debit",
        at: entry.at,
        amountMicros: entry.deltaMicros,
        calls: 0,
        uncollectedMicros: entry.uncollectedMicros ?? 0,
        ref: entry.ref,
        ...(entry.source !== undefined ? { source: entry.source } : {}),
        ...(entry.note !== undefined ? { note: entry.note } : {}),
      };
    case "settle":
      return {
        kind: "charges",
        at: entry.at,
        amountMicros: -(entry.chargedMicros ?? 0),
        calls: entry.calls ?? 0,
        uncollectedMicros: entry.uncollectedMicros ?? 0,
        ref: entry.ref,
      };
    default:
      // A hold is paired with its resolution (the settle says what it charged); a release charged nothing.
      return undefined;
  }
}

export interface StatementPeriod {
  from: string;
  to: string;
  grouping: StatementGrouping;
}

/**
 * The statement of `period` from the ledger entries since (at least) `ledgerSince(period)` and the
 * balance now. Entries may come in any order; entries outside the period only move the closing back
 * to the period's end.
 */
export function buildStatement(
  entries: readonly LedgerEntry[],
  balance: Pick<CreditBalance, "availableMicros" | "heldMicros" | "chargedInFlightMicros" | "openHolds">,
  period: StatementPeriod,
): Statement {
  const start = parseDay(period.from, "from");
  const end = parseDay(period.to, "to") + DAY_MS;
  // Grants less settled charges: what the balance is once every open lease settles at what it charged.
  const bookNow = balance.availableMicros + balance.heldMicros + balance.chargedInFlightMicros;
  const movements = entries.flatMap((e) => movementOf(e) ?? []).sort((a, b) => a.at - b.at);
  let closing = bookNow;
  for (const m of movements) if (m.at >= end) closing -= m.amountMicros;
  const within = movements.filter((m) => m.at >= start && m.at < end);
  const opening = closing - within.reduce((sum, m) => sum + m.amountMicros, 0);

  const lines: StatementLine[] = [];
  let running = opening;
  const groups = new Map<string, StatementLine>();
  for (const m of within) {
    running += m.amountMicros;
    const day = dayOf(startOfDay(m.at));
    if (m.kind !== "charges" || period.grouping === "lease") {
      lines.push(lineOf(m, day, running));
      continue;
    }
    // Charges of one day become one line, placed where the day's last charge falls.
    const group = groups.get(day);
    if (group) {
      lines.splice(lines.indexOf(group), 1);
      group.at = m.at;
      group.amountMicros += m.amountMicros;
      group.calls = (group.calls ?? 0) + m.calls;
      group.leases = (group.leases ?? 0) + 1;
      group.uncollectedMicros = (group.uncollectedMicros ?? 0) + m.uncollectedMicros;
      group.balanceMicros = running;
      lines.push(group);
    } else {
      const line = lineOf(m, day, running);
      delete line.ref;
      groups.set(day, line);
      lines.push(line);
    }
  }
  return {
    from: period.from,
    to: period.to,
    grouping: period.grouping,
    openingMicros: opening,
    lines,
    closingMicros: closing,
    inFlight: {
      heldMicros: balance.heldMicros,
      chargedMicros: balance.chargedInFlightMicros,
      openLeases: balance.openHolds,
    },
    availableMicros: balance.availableMicros,
  };
}

function lineOf(m: Movement, day: string, balanceMicros: number): StatementLine {
  const line: StatementLine = { kind: m.kind, day, at: m.at, amountMicros: m.amountMicros, balanceMicros };
  if (m.kind === "charges") {
    line.calls = m.calls;
    line.leases = 1;
    line.uncollectedMicros = m.uncollectedMicros;
  }
  if (m.kind === "debit") line.uncollectedMicros = m.uncollectedMicros;
  line.ref = m.ref;
  if (m.source !== undefined) line.source = m.source;
  if (m.note !== undefined) line.note = m.note;
  return line;
}

/** The earliest ledger time a statement of `from` must read. */
export function ledgerSince(from: string): number {
  return parseDay(from, "from") - RESOLUTION_LAG_MS;
}

/** `from`, `to` (UTC days) and `group` of a statement request; by default the last 30 days by day. */
export function parseStatementQuery(
  params: Record<string, string | undefined>,
  now: number,
): StatementPeriod {
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    if (!["from", "to", "group"].includes(name))
      throw errors.invalidField(name, "is not a parameter; use from, to, group.");
  }
  const group = params.group ?? "day";
  if (group !== "day" && group !== "lease") throw errors.invalidField("group", "must be day or lease.");
  const to = params.to === undefined ? startOfDay(now) : parseDay(params.to, "to");
  const from =
    params.from === undefined ? to - (STATEMENT_DEFAULT_DAYS - 1) * DAY_MS : parseDay(params.from, "from");
  if (from > to) throw errors.invalidField("from", `${dayOf(from)} is after to ${dayOf(to)}.`);
  const days = (to - from) / DAY_MS + 1;
  if (days > STATEMENT_MAX_DAYS) {
    throw errors.invalidField("from", `the period covers ${days} days; at most ${STATEMENT_MAX_DAYS}.`);
  }
  return { from: dayOf(from), to: dayOf(to), grouping: group };
}

/** Ledger pages read at once for a statement (the store's largest page). */
const STATEMENT_PAGE = 1000;

/** Reads the ledger back to what `period` needs, with the balance, and builds its statement. */
export async function readStatement(
  credits: Pick<CreditStore, "balance" | "ledger">,
  projectId: string,
  period: StatementPeriod,
): Promise<Statement> {
  // Two reads, not one snapshot: a lease that settles between them shifts the opening and closing
  // by its charge in this answer only.
  const balance = await credits.balance(projectId);
  const since = ledgerSince(period.from);
  const entries: LedgerEntry[] = [];
  let cursor: string | undefined;
  do {
    const page = await credits.ledger(projectId, {
      limit: STATEMENT_PAGE,
      ...(cursor !== undefined ? { cursor } : {}),
    });
    entries.push(...page.entries);
    const oldest = page.entries.at(-1);
    cursor = oldest !== undefined && oldest.at >= since ? page.cursor : undefined;
  } while (cursor !== undefined);
  return buildStatement(entries, balance, period);
}

/** The statement of one calendar month (`YYYY-MM`, UTC), by day. */
export function monthPeriod(month: string): StatementPeriod {
  const match = /^(\d{4})-(\d{2})$/.exec(month);
  const year = Number(match?.[1]);
  const index = Number(match?.[2]) - 1;
  if (!match || index < 0 || index > 11) throw errors.invalidField("month", "must be a month like 2026-11");
  const last = new Date(Date.UTC(year, index + 1, 0)).getUTCDate();
  return { from: `${month}-01`, to: `${month}-${String(last).padStart(2, "0")}`, grouping: "day" };
}

/** What a line is, in words a customer reads. */
export function describeLine(line: StatementLine, grouping: StatementGrouping = "day"): string {
  if (line.kind === "grant") {
    const what =
      line.source === "stripe_checkout"
        ? "credits bought (Stripe Checkout)"
        : line.source === "stripe_recharge"
          ? "auto-recharge (Stripe)"
          : "credits granted";
    return [what, line.source?.startsWith("stripe_") ? line.ref : line.source, line.note]
      .filter(Boolean)
      .join(" · ");
  }
  if (line.kind === "debit") {
    const what = line.source === "stripe_dispute" ? "lost dispute" : "refund";
    const spent = line.uncollectedMicros
      ? ` (${formatCentsPlain(line.uncollectedMicros)} was spent already)`
      : "";
    return `${what}: credits taken back${spent}`;
  }
  return `${line.calls} call${line.calls === 1 ? "" : "s"} on ${line.leases} lease${line.leases === 1 ? "" : "s"}${grouping === "lease" ? ` (${line.ref})` : ""}`;
}

function formatCentsPlain(micros: number): string {
  return `$${(micros / 1_000_000).toFixed(2)}`;
}

/**
 * The statement as CSV (RFC 4180), one row per line between the opening and closing balance; amounts
 * in dollars with 6 decimals, exactly (micro-USD), so the rows sum to the closing balance.
 */
export function statementCsv(statement: Statement): string {
  const usd = (micros: number) => {
    const sign = micros < 0 ? "-" : "";
    const abs = Math.abs(micros);
    return `${sign}${Math.floor(abs / 1_000_000)}.${String(abs % 1_000_000).padStart(6, "0")}`;
  };
  const cell = (value: string) => (/[",\r\n]/.test(value) ? `"${value.replaceAll('"', '""')}"` : value);
  const rows = [
    ["date", "kind", "description", "reference", "amount_usd", "balance_usd"],
    [statement.from, "opening", "opening balance", "", "", usd(statement.openingMicros)],
    ...statement.lines.map((line) => [
      line.day,
      line.kind,
      describeLine(line, statement.grouping),
      line.ref ?? "",
      usd(line.amountMicros),
      usd(line.balanceMicros),
    ]),
    [statement.to, "closing", "closing balance", "", "", usd(statement.closingMicros)],
  ];
  return `${rows.map((row) => row.map(cell).join(",")).join("\r\n")}\r\n`;
}
