import { gunzipSync, gzipSync } from "node:zlib";
import {
  DAY_MS,
  entryPosition,
  INDEX_RETENTION_DAYS,
  type InteractionFilters,
  type InteractionSummary,
  selectsFailures,
  statusClass,
  summaryOf,
} from "../../../core/interactions";
import { boundedKeyPart } from "../../../core/interactions-usage";
import type { InteractionRecord } from "../../../core/record";

/**
 * The index's items as ../interactions.ts describes them: their sort keys, the lists a call is in,
 * and a pack's two items. What writes, reads and purges share.
 */

export const ENTRIES = "p#";
export const RECORDS = "q#";
export const POINTER = "t#";
const USER = "u#";
const ERRORS = "x#";
const BILLING = "b#";
/** A pack's time span: small enough that a page reads few packs, large enough that packs fill. */
const BUCKET_MS = 10_000;
export const PACK_RECORDS = 100;
/**
 * Records taken through w2 to w5 together. Markers stay on a rollup item from w3 to w5, and every
 * update rewrites the whole item: with a batch's records all in flight at once, one project's item
 * grew to a marker per record of the batch (~40 bytes each; 1,000 records, 40 KB), each update cost
 * write units by that size, and a batch of ~10,000 would pass DynamoDB's 400 KB item limit.
 */
export const ROUND_RECORDS = PACK_RECORDS;
/** A pack's records as JSON, before gzip: a DynamoDB item holds 400 KB. */
export const PACK_BYTES = 300_000;
/** Entries outlive the listing window by a week, then DynamoDB may collect them (in AWS). */
export const GC_AFTER_MS = (INDEX_RETENTION_DAYS + 7) * DAY_MS;
/** Packs per Query round of a listing (DynamoDB stops a round at 1 MB). */
export const PACK_ROUND = 100;
/** The last millisecond a bucket's 15 digits can name. */
export const LAST_MS = 999_999_999_999_999;
export const bucketOf = (startedAt: number) =>
  startedAt - (((startedAt % BUCKET_MS) + BUCKET_MS) % BUCKET_MS);
export const digits = (ms: number) => String(ms).padStart(15, "0");
export type PackKind = typeof ENTRIES | typeof RECORDS;
/** A pack's key without its kind: `<bucket>#<newest>#<id>`. Its bucket part is the first 16 characters. */
export const BUCKET_PART = 16;
/** Every pack of a kind and bucket has this sort key prefix. */
export const bucketPrefix = (kind: PackKind, bucket: number) => `${kind}${digits(bucket)}#`;
/** When a pack's newest call started: the part of its sort key after the bucket. */
export const newestOfPack = (sk: string) => Number(sk.slice(2 + BUCKET_PART, 2 + BUCKET_PART + 15));

export const positionOf = (entry: Pick<InteractionSummary, "started_at" | "transaction_id">) =>
  entryPosition(entry.started_at, entry.transaction_id);
export const newestFirst = (a: InteractionSummary, b: InteractionSummary) => {
  const [pa, pb] = [positionOf(a), positionOf(b)];
  return pa < pb ? 1 : pa > pb ? -1 : 0;
};

export const pointerKey = (projectId: string, transactionId: string) => ({
  projectId,
  sk: POINTER + transactionId,
});
/** Where a user's calls are listed: `u#<user>#` (the user id, hashed when long). */
export const userPrefix = (userId: string) => `${USER}${boundedKeyPart(userId)}#`;
/** Where a billing mode's calls are listed: BYOK and dual only (managed calls are most calls). */
const billingPrefix = (mode: string | undefined) =>
  mode === undefined || mode === "managed" ? undefined : `${BILLING}${mode}#`;
/**
 * The lists a call is in besides its pack, by their key prefix: its user's, the failed calls' (a
 * status filter's, for the error class or an error code) and its billing mode's when not managed.
 * Each is of calls few enough that reading a pack's every call would be slow to find them.
 */
export function listsOf(entry: InteractionSummary): string[] {
  const lists: string[] = [];
  if (entry.user_id !== null) lists.push(userPrefix(entry.user_id));
  if (statusClass(entry) === "error") lists.push(ERRORS);
  const billing = billingPrefix(entry.billing_mode);
  if (billing) lists.push(billing);
  return lists;
}

/** The list that a page's filters read, most selective first, if any: else the packs. */
export function listFor(filters: InteractionFilters): string | undefined {
  if (filters.userId !== undefined) return userPrefix(filters.userId);
  // A stream that broke after its 200 is in the error class: only an error code is surely a failure.
  if (selectsFailures(filters.status)) return ERRORS;
  return billingPrefix(filters.billingMode);
}

export const listEntryKeys = (projectId: string, entry: InteractionSummary) =>
  listsOf(entry).map((prefix) => ({ projectId, sk: prefix + positionOf(entry) }));
/**
 * A pack's two items: its summaries (what a listing reads) and its records (what the detail view and
 * purges read), apart so that a page reads none of the bodies.
 */
export function packItems(
  projectId: string,
  key: string,
  records: readonly InteractionRecord[],
  json?: string[],
) {
  const gcAt = Math.floor((Number(key.slice(0, 15)) + BUCKET_MS + GC_AFTER_MS) / 1000);
  return {
    entries: (v: number) => ({
      projectId,
      sk: ENTRIES + key,
      entriesGz: gzipSync(JSON.stringify(records.map(summaryOf))),
      v,
      gcAt,
    }),
    records: (v: number) => ({
      projectId,
      sk: RECORDS + key,
      recordsGz: gzipSync(`[${(json ?? records.map((r) => JSON.stringify(r))).join(",")}]`),
      v,
      gcAt,
    }),
  };
}

/** A call in each of its lists: the summary a row shows, as JSON. */
export function listEntryItems(record: InteractionRecord): Record<string, unknown>[] {
  const entry = summaryOf(record);
  const json = JSON.stringify(entry);
  const gcAt = Math.floor((record.started_at + GC_AFTER_MS) / 1000);
  return listEntryKeys(record.project_id, entry).map((key) => ({ ...key, entry: json, gcAt }));
}

/** The JSON array a pack attribute holds; an unreadable one names the item, never its content. */
export function unpack<T>(item: Record<string, unknown>, attribute: "entriesGz" | "recordsGz"): T[] {
  try {
    return JSON.parse(gunzipSync(item[attribute] as Uint8Array).toString("utf8")) as T[];
  } catch (err) {
    throw new Error(`The stored pack ${String(item.sk)} of project ${String(item.projectId)} is unreadable`, {
      cause: err,
    });
  }
}
