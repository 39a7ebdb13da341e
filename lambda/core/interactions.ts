/**
 * The recent-interactions index: what the dashboard lists and opens without touching the warehouse.
 * The warehouse consumer writes one entry per interaction record (and its daily rollup, see
 * interactions-usage.ts); deletion purges both. Listing reads one project's newest entries through a
 * key that matches its most selective filter, so a page costs a few small reads however many
 * interactions the project has.
 *
 * Interactions keep the record schema's field names (core/record.ts), as exports do.
 */
import { createHash } from "node:crypto";
import { BILLING_MODES, type BillingMode } from "./billing-mode";
import { errors } from "./errors";
import {
  INDEX_RETENTION_DAYS,
  LIST_FILTERS,
  REFUSAL_KIND_NAMES,
  REFUSAL_KINDS,
  type RefusalKind,
  STATUS_CLASSES,
  type StatusClass,
} from "./interaction-filters";
import type { InteractionRecord } from "./record";
import { VENDOR_NAMES, type VendorName } from "./vendor-names";

export { INDEX_RETENTION_DAYS, type RefusalKind, type StatusClass };
export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 100;

/** The fields of an interaction a list row shows: the record without bodies and sizes. */
export const SUMMARY_FIELDS = [
  "transaction_id",
  "started_at",
  "vendor",
  "endpoint",
  "model",
  "billing_mode",
  "status_code",
  "error_type",
  "error_code",
  "user_id",
  "key_id",
  "streamed",
  "latency_ms",
  "ttft_ms",
  "input_tokens",
  "output_tokens",
  "cached_input_tokens",
  "reasoning_tokens",
  "cost_micros",
  "usage_estimated",
  "usage_complete",
] as const satisfies readonly (keyof InteractionRecord)[];

export type InteractionSummary = Pick<InteractionRecord, (typeof SUMMARY_FIELDS)[number]>;

/** A call failed if the client got an error status, or its stream broke after a success status. */
export function statusClass(record: Pick<InteractionRecord, "status_code" | "error_type">): StatusClass {
  return record.status_code >= 400 || record.error_type !== null ? "error" : "success";
}

/** Whether dmt refused the call itself, before any vendor (credits, budget, rate limit, policy). */
export function isRefusal(record: Pick<InteractionRecord, "status_code" | "error_code">): boolean {
  return REFUSAL_KIND_NAMES.some((kind) => {
    const refusal = REFUSAL_KINDS[kind];
    return record.status_code === refusal.status && refusal.codes.includes(record.error_code ?? "");
  });
}

/** Whether a call passes the status filter: its class, its kind of refusal, or its exact status. */
export function matchesStatus(
  record: Pick<InteractionRecord, "status_code" | "error_type" | "error_code">,
  status: NonNullable<InteractionFilters["status"]>,
): boolean {
  if (typeof status === "number") return record.status_code === status;
  if (status === "success" || status === "error") return statusClass(record) === status;
  const refusal = REFUSAL_KINDS[status];
  return record.status_code === refusal.status && refusal.codes.includes(record.error_code ?? "");
}

/** Whether the status filter selects failed calls only (the index lists those apart). */
export function selectsFailures(status: InteractionFilters["status"]): boolean {
  if (status === undefined || status === "success") return false;
  return typeof status === "number" ? status >= 400 : true;
}

export interface InteractionFilters {
  vendor?: VendorName;
  /** Part of the model's name, in any case: `mini` finds `gpt-4o-mini`. */
  model?: string;
  keyId?: string;
  userId?: string;
  /** A class of outcome, a kind of refusal dmt made, or one exact status code. */
  status?: StatusClass | RefusalKind | number;
  billingMode?: BillingMode;
}

/** One page request, after validation. Times are epoch ms; `until` is exclusive. */
export interface InteractionListQuery {
  projectId: string;
  since: number;
  until: number;
  filters: InteractionFilters;
  limit: number;
  /** Where the previous page stopped (an index position, see `entryPosition`). */
  after?: string;
}

export interface InteractionPage {
  interactions: InteractionSummary[];
  /** Present when more entries may follow: pass it back as `cursor`. */
  cursor?: string;
}

/** The index port. DynamoDB implements it (adapters/dynamodb/interactions.ts). */
export interface InteractionIndex {
  /**
   * Adds records to the index and their figures to the rollups, exactly once per transaction however
   * often the same record is written (the consumer re-sends redelivered records).
   */
  write(records: readonly InteractionRecord[]): Promise<void>;
  /** Newest first; never returns another project's entries. */
  list(query: InteractionListQuery): Promise<{ interactions: InteractionSummary[]; next?: string }>;
  /** The whole record of one interaction of the project, bodies included. */
  get(projectId: string, transactionId: string): Promise<InteractionRecord | undefined>;
}

/** Our transaction ids, as the record schema admits them. */
export const TRANSACTION_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * An entry's place in the project's order: start time (zero-padded epoch ms, so strings sort as
 * numbers), then transaction id for a total order among calls of the same millisecond.
 */
export function entryPosition(startedAt: number, transactionId: string): string {
  return `${String(startedAt).padStart(15, "0")}#${transactionId}`;
}
const POSITION = /^\d{15}#[A-Za-z0-9_.:-]{1,128}$/;

/** The position range of [since, until): every entry position of that time span sorts inside it. */
export function positionRange(since: number, until: number): { low: string; high: string } {
  return { low: `${String(since).padStart(15, "0")}#`, high: `${String(until - 1).padStart(15, "0")}#~` };
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
export const DAY_MS = 86_400_000;

/** Epoch ms of the start of a real calendar day (UTC), or a 400 naming the parameter. */
export function parseDay(value: string, field: string): number {
  const match = DATE.exec(value);
  if (!match) throw errors.invalidField(field, "must be a date YYYY-MM-DD.");
  const ms = Date.UTC(Number(match[1]), Number(match[2]) - 1, Number(match[3]));
  // Date.UTC rolls 2026-02-30 over to March 2; a real day round-trips unchanged.
  if (new Date(ms).toISOString().slice(0, 10) !== value) {
    throw errors.invalidField(field, `${value} is not a calendar date.`);
  }
  return ms;
}

export const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);
export const startOfDay = (ms: number) => ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);

const LIST_PARAMETERS = [...LIST_FILTERS, "limit", "cursor"] as const;
/** Anything a client can type: no control characters, bounded. Values are never parsed as markup or SQL. */
const FREE_TEXT = /^[^\p{Cc}]{1,256}$/u;
const STATUS_CODE = /^[1-5]\d\d$/;
const LIMIT = /^\d{1,3}$/;
/** A key's public id (core/keys.ts). */
const KEY_ID = /^[a-z0-9]{16}$/;

function oneOf<T extends string>(value: string, field: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw errors.invalidField(field, `must be one of ${allowed.join(", ")}.`);
  }
  return value as T;
}

/**
 * The model filter as the index compares it: trimmed and lower-cased, since it matches part of the
 * name in any case (the index keeps a lower-cased copy of each model, `modelSearchOf`).
 */
function modelSearch(value: string): string {
  const search = value.trim().toLowerCase();
  if (search === "") throw errors.invalidField("model", "must name part of a model, not only spaces.");
  return search;
}

export const modelSearchOf = (model: string) => model.toLowerCase();

function freeText(value: string, field: string): string {
  if (!FREE_TEXT.test(value)) {
    throw errors.invalidField(field, "must be 1 to 256 characters without control characters.");
  }
  return value;
}

/**
 * The list query of `GET .../interactions`, from its URL parameters: `from`/`to` (UTC days, both
 * included), `vendor`, `model` (part of the name, any case), `key_id`, `user_id`, `status` (`success`,
 * `error` or a status code),
 * `billing_mode`, `limit`, `cursor`. Unknown parameters, repeated ones and values of the wrong type are
 * a 400 naming the parameter. The range is cut to the index's retention.
 */
export function parseListQuery(
  projectId: string,
  params: Record<string, string[]>,
  now: number,
): InteractionListQuery {
  const single: Record<string, string> = {};
  for (const [name, values] of Object.entries(params)) {
    if (!(LIST_PARAMETERS as readonly string[]).includes(name)) {
      throw errors.invalidField(name, `is not a filter; use ${LIST_PARAMETERS.join(", ")}.`);
    }
    if (values.length !== 1) throw errors.invalidField(name, "must be given once.");
    single[name] = values[0] ?? "";
  }
  const filters: InteractionFilters = {};
  if (single.vendor !== undefined) filters.vendor = oneOf(single.vendor, "vendor", VENDOR_NAMES);
  if (single.model !== undefined) filters.model = modelSearch(freeText(single.model, "model"));
  if (single.key_id !== undefined) {
    if (!KEY_ID.test(single.key_id)) {
      throw errors.invalidField("key_id", "must be a key id: 16 lowercase letters and digits.");
    }
    filters.keyId = single.key_id;
  }
  if (single.user_id !== undefined) filters.userId = freeText(single.user_id, "user_id");
  if (single.billing_mode !== undefined) {
    filters.billingMode = oneOf(single.billing_mode, "billing_mode", BILLING_MODES);
  }
  if (single.status !== undefined) {
    const status = single.status;
    const outcome = STATUS_CLASSES.find((name) => name === status);
    const refusal = REFUSAL_KIND_NAMES.find((name) => name === status);
    if (outcome !== undefined) filters.status = outcome;
    else if (refusal !== undefined) filters.status = refusal;
    else if (STATUS_CODE.test(status)) filters.status = Number(status);
    else {
      throw errors.invalidField(
        "status",
        `must be success, error or a status code from 100 to 599, or a refusal: ${REFUSAL_KIND_NAMES.join(", ")}.`,
      );
    }
  }

  let limit = DEFAULT_PAGE_SIZE;
  if (single.limit !== undefined) {
    limit = LIMIT.test(single.limit) ? Number(single.limit) : 0;
    if (limit < 1 || limit > MAX_PAGE_SIZE) {
      throw errors.invalidField("limit", `must be an integer from 1 to ${MAX_PAGE_SIZE}.`);
    }
  }

  const today = startOfDay(now);
  const earliest = today - (INDEX_RETENTION_DAYS - 1) * DAY_MS;
  const from = single.from === undefined ? earliest : parseDay(single.from, "from");
  const to = single.to === undefined ? today : parseDay(single.to, "to");
  if (from > to) throw errors.invalidField("from", `${dayOf(from)} is after to ${dayOf(to)}.`);
  // Entries started up to the end of `to`; `until` exclusive. An empty span stays empty.
  const since = Math.max(from, earliest);
  const until = Math.max(to + DAY_MS, since);

  const query: InteractionListQuery = { projectId, since, until, filters, limit };
  if (single.cursor !== undefined) query.after = readCursor(single.cursor, query);
  return query;
}

/**
 * What a cursor is bound to: the project and the query (range and filters), hashed. A cursor of
 * another project or another query fails this check with a 400; it could not reach another project's
 * entries anyway, since every read is keyed by the caller's project.
 */
function queryBinding(query: Omit<InteractionListQuery, "after" | "limit">): string {
  const f = query.filters;
  const canonical = JSON.stringify([
    query.projectId,
    query.since,
    query.until,
    f.vendor ?? null,
    f.model ?? null,
    f.keyId ?? null,
    f.userId ?? null,
    f.status ?? null,
    f.billingMode ?? null,
  ]);
  return createHash("sha256").update(canonical, "utf8").digest("base64url").slice(0, 22);
}

/** The cursor a page hands out: the position it stopped at, bound to its query. */
export function writeCursor(position: string, query: InteractionListQuery): string {
  return Buffer.from(JSON.stringify({ p: position, q: queryBinding(query) }), "utf8").toString("base64url");
}

const CURSOR_TEXT = /^[A-Za-z0-9_-]{1,1024}$/;

function badCursor(): never {
  throw errors.invalidField(
    "cursor",
    "is not a cursor of this listing; start again from the first page (filters and dates must stay the same).",
  );
}

function readCursor(cursor: string, query: InteractionListQuery): string {
  if (!CURSOR_TEXT.test(cursor)) badCursor();
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    badCursor();
  }
  const { p, q } = (typeof parsed === "object" && parsed !== null ? parsed : {}) as Record<string, unknown>;
  if (typeof p !== "string" || !POSITION.test(p) || q !== queryBinding(query)) badCursor();
  // A position outside the range could only come from a forged cursor; the store would refuse it.
  const { low, high } = positionRange(query.since, query.until);
  if (p < low || p > high) badCursor();
  return p;
}

/** The summary of a record: what the index keeps for its list rows. */
export function summaryOf(record: InteractionRecord): InteractionSummary {
  const summary = {} as Record<string, unknown>;
  for (const field of SUMMARY_FIELDS) summary[field] = record[field];
  return summary as InteractionSummary;
}

/** The transaction id of `GET .../interactions/:id`, or a 404 (an id that cannot exist is not found). */
export function parseTransactionId(value: string): string {
  if (!TRANSACTION_ID.test(value))
    throw errors.notFound(`Interaction '${value.slice(0, 128)}' was not found.`);
  return value;
}
