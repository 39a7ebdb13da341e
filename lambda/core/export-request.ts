/**
 * The body of `POST /api/v1/exports`, validated. Every problem is a 400 naming the field; nothing here
 * ever reaches SQL as text (the query layer binds values as parameters), the checks just turn bad input
 * into a clear answer instead of an empty export.
 */

import * as z from "zod/mini";
import { BILLING_MODES, type BillingMode } from "./billing-mode";
import { errors } from "./errors";
import { decide } from "./request-schema";
import { VENDOR_NAMES, type VendorName } from "./vendor-names";

export const EXPORT_FORMATS = ["json", "csv"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** Longest range one export may cover, both ends included (a leap year). */
export const EXPORT_MAX_SPAN_DAYS = 366;

export interface ExportFilters {
  model?: string;
  user_id?: string;
  vendor?: VendorName;
  status_code?: number;
  billing_mode?: BillingMode;
}

/** `interactions`: one row per call (the default); `focus`: FOCUS 1.2 cost rows (core/focus.ts). */
export const EXPORT_SCHEMAS = ["interactions", "focus"] as const;
export type ExportSchema = (typeof EXPORT_SCHEMAS)[number];

export interface ExportRequest {
  format: ExportFormat;
  schema: ExportSchema;
  /** UTC days, YYYY-MM-DD, both included. */
  range: { start: string; end: string };
  filters: ExportFilters;
}

const TOP_LEVEL = ["format", "schema", "range", "filters"];
const RANGE_KEYS = ["start", "end"];
const FILTER_KEYS = ["model", "user_id", "vendor", "status_code", "billing_mode"] as const;

/** Model names as vendors spell them: `gpt-4o-mini`, `models/gemini-2.0-flash`, `ft:gpt-4o:org::id`. */
const MODEL = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$/;
/** User ids: opaque ids, emails, UUIDs; no quotes, spaces or control characters. */
const USER_ID = /^[A-Za-z0-9._:@+=/|-]{1,256}$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DAY_MS = 86_400_000;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

function unknownKeys(value: Record<string, unknown>, allowed: readonly string[], where: string): void {
  const unknown = Object.keys(value).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) {
    const names = unknown.map((k) => `'${k}'`).join(", ");
    throw errors.invalidField(
      where,
      `unknown ${unknown.length === 1 ? "key" : "keys"} ${names}; allowed: ${allowed.join(", ")}.`,
    );
  }
}

/** The epoch ms of a real calendar day, or a 400. */
function parseDay(value: unknown, field: string): number {
  if (value === undefined) throw errors.missingField(field);
  if (typeof value !== "string" || !DATE.test(value)) {
    throw errors.invalidField(field, "must be a date string YYYY-MM-DD.");
  }
  const [, y, m, d] = DATE.exec(value) as unknown as [string, string, string, string];
  const ms = Date.UTC(Number(y), Number(m) - 1, Number(d));
  // Date.UTC rolls 2026-02-30 over to March 2; a real day round-trips unchanged.
  if (new Date(ms).toISOString().slice(0, 10) !== value) {
    throw errors.invalidField(field, `${value} is not a calendar date.`);
  }
  return ms;
}

function stringFilter(value: unknown, field: string, pattern: RegExp, shape: string): string {
  if (typeof value !== "string") throw errors.invalidField(field, "must be a string.");
  if (!pattern.test(value)) throw errors.invalidField(field, `must be ${shape}.`);
  return value;
}

function enumFilter<T extends string>(value: unknown, field: string, allowed: readonly T[]): T {
  if (typeof value !== "string") throw errors.invalidField(field, "must be a string.");
  if (!(allowed as readonly string[]).includes(value)) {
    throw errors.invalidField(field, `must be one of ${allowed.join(", ")}.`);
  }
  return value as T;
}

function parseFilters(value: unknown): ExportFilters {
  if (value === undefined) return {};
  if (!isObject(value)) throw errors.invalidField("filters", "must be an object.");
  unknownKeys(value, FILTER_KEYS, "filters");
  const filters: ExportFilters = {};
  if (value.model !== undefined) {
    filters.model = stringFilter(
      value.model,
      "filters.model",
      MODEL,
      "a model name (letters, digits and . _ : / @ + -, at most 200 characters)",
    );
  }
  if (value.user_id !== undefined) {
    filters.user_id = stringFilter(
      value.user_id,
      "filters.user_id",
      USER_ID,
      "a user id (letters, digits and . _ : @ + = / | -, at most 256 characters)",
    );
  }
  if (value.vendor !== undefined) filters.vendor = enumFilter(value.vendor, "filters.vendor", VENDOR_NAMES);
  if (value.billing_mode !== undefined) {
    filters.billing_mode = enumFilter(value.billing_mode, "filters.billing_mode", BILLING_MODES);
  }
  if (value.status_code !== undefined) {
    const code = value.status_code;
    if (typeof code !== "number" || !Number.isInteger(code) || code < 100 || code > 599) {
      throw errors.invalidField("filters.status_code", "must be an integer from 100 to 599.");
    }
    filters.status_code = code;
  }
  return filters;
}

/** A real calendar day, YYYY-MM-DD (2026-02-30 is not), as `parseDay` decides it. */
const isCalendarDay = (value: string) => {
  if (!DATE.test(value)) return false;
  const [y, m, d] = value.split("-").map(Number) as [number, number, number];
  return new Date(Date.UTC(y, m - 1, d)).toISOString().slice(0, 10) === value;
};
const day = z.string().check(z.regex(DATE), z.refine(isCalendarDay, "is not a calendar date."));

/** The body of `POST /api/v1/exports`: what it accepts, and what the API description shows. */
export const exportRequestSchema = z.strictObject({
  format: z.enum(EXPORT_FORMATS),
  schema: z.optional(z.enum(EXPORT_SCHEMAS)),
  range: z
    .strictObject({ start: day, end: day })
    .check(
      z.refine(
        (r) =>
          typeof r.start === "string" &&
          typeof r.end === "string" &&
          r.start <= r.end &&
          (Date.parse(r.end) - Date.parse(r.start)) / DAY_MS + 1 <= EXPORT_MAX_SPAN_DAYS,
        `must run forwards and cover at most ${EXPORT_MAX_SPAN_DAYS} days.`,
      ),
    ),
  filters: z.optional(
    z.strictObject({
      model: z.optional(z.string().check(z.regex(MODEL))),
      user_id: z.optional(z.string().check(z.regex(USER_ID))),
      vendor: z.optional(z.enum(VENDOR_NAMES)),
      status_code: z.optional(z.int().check(z.minimum(100), z.maximum(599))),
      billing_mode: z.optional(z.enum(BILLING_MODES)),
    }),
  ),
});

export function parseExportRequest(body: Record<string, unknown>): ExportRequest {
  return decide(exportRequestSchema, body, () => explainExportRequest(body));
}

/** The hand-written checks that word a refusal (exported for the test that holds them to the schema). */
export function explainExportRequest(body: Record<string, unknown>): ExportRequest {
  unknownKeys(body, TOP_LEVEL, "body");
  if (body.format === undefined) throw errors.missingField("format");
  const format = enumFilter(body.format, "format", EXPORT_FORMATS);
  const schema =
    body.schema === undefined ? "interactions" : enumFilter(body.schema, "schema", EXPORT_SCHEMAS);

  if (body.range === undefined) throw errors.missingField("range");
  if (!isObject(body.range)) throw errors.invalidField("range", "must be an object {start, end}.");
  unknownKeys(body.range, RANGE_KEYS, "range");
  const startMs = parseDay(body.range.start, "range.start");
  const endMs = parseDay(body.range.end, "range.end");
  const start = body.range.start as string;
  const end = body.range.end as string;
  if (startMs > endMs) throw errors.invalidField("range", `start ${start} is after end ${end}.`);
  const days = (endMs - startMs) / DAY_MS + 1;
  if (days > EXPORT_MAX_SPAN_DAYS) {
    throw errors.invalidField(
      "range",
      `covers ${days} days; an export covers at most ${EXPORT_MAX_SPAN_DAYS} days.`,
    );
  }
  return { format, schema, range: { start, end }, filters: parseFilters(body.filters) };
}
