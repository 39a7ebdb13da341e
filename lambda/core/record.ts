/**
 * The interaction record: one per proxied call, the row the warehouse stores. This file is the one
 * declaration of its schema; the Parquet writer, the Glue table columns and the query layer all derive
 * from `RECORD_COLUMNS`. Changing a column means a new `RECORD_SCHEMA_VERSION` (add nullable columns only,
 * so older files stay readable side by side: readers merge files by column name).
 *
 * The record builder takes no key material: service keys, vendor keys and the `api_key`/`key` query
 * parameters cannot reach a record because nothing that carries them is an input.
 */
import { BILLING_MODES, type BillingMode } from "./billing-mode";
import type { CapturedBody } from "./capture";
import { PROJECT_ID_PATTERN } from "./model";
import { STORE_LEVELS, type StoreLevel } from "./privacy";
import type { Usage } from "./usage";
import { VENDOR_NAMES, type VendorName } from "./vendor-names";

export const RECORD_SCHEMA_VERSION = 2;
/** Versions a reader still accepts: 1 lacks the columns 2 added, which read as null. */
const READABLE_SCHEMA_VERSIONS: ReadonlySet<unknown> = new Set([1, 2]);

/** Each captured body is cut to this many UTF-8 bytes, so a record always fits one SQS message (1 MiB). */
export const RECORD_BODY_LIMIT_BYTES = 64 * 1024;

export type ColumnKind = "string" | "int32" | "int64" | "double" | "boolean" | "timestamp";

export interface ColumnDefinition {
  name: string;
  kind: ColumnKind;
  nullable: boolean;
  doc: string;
}

const column = <const N extends string, const K extends ColumnKind, const Null extends boolean>(
  name: N,
  kind: K,
  nullable: Null,
  doc: string,
) => ({ name, kind, nullable, doc });

/** The columns of schema version 2 (1 plus service_tier, usage_details, cost_breakdown, store_level), in file and export order. Timestamps are UTC, millisecond precision. */
export const RECORD_COLUMNS = [
  column("schema_version", "int32", false, "version of this schema the record was written with"),
  column("transaction_id", "string", false, "our id of the call, returned to the client in a header"),
  column("request_id", "string", true, "the client's X-Request-ID"),
  column("project_id", "string", false, "project of the calling key"),
  column("key_id", "string", false, "public id of the calling key (never the secret)"),
  column(
    "user_id",
    "string",
    true,
    "X-User-ID, else the body's user (OpenAI) or metadata.user_id (Anthropic)",
  ),
  column("vendor", "string", false, "groq, openai, anthropic or gemini"),
  column("endpoint", "string", false, "request path under the vendor prefix, without query string"),
  column("model", "string", true, "model named by the request"),
  column("billing_mode", "string", false, "managed (prepaid credits), byok or dual"),
  column("status_code", "int32", false, "HTTP status sent to the client"),
  column("error_type", "string", true, "error type when the call failed (ours, or vendor_error)"),
  column("error_code", "string", true, "error code when the call failed (ours, or the vendor's status)"),
  column("vendor_request_id", "string", true, "the vendor's request id, when it sent one"),
  column("streamed", "boolean", false, "the response was streamed"),
  column("started_at", "timestamp", false, "when the request arrived (UTC, ms)"),
  column("latency_ms", "int32", false, "from arrival to the last byte sent"),
  column("ttft_ms", "int32", true, "from arrival to the first byte of the response"),
  column("input_tokens", "int32", false, "all input tokens, cached included"),
  column("output_tokens", "int32", false, "all output tokens, reasoning included"),
  column("cached_input_tokens", "int32", false, "input tokens read from a prompt cache"),
  column("cache_write_tokens", "int32", false, "input tokens written to a prompt cache"),
  column("reasoning_tokens", "int32", false, "output tokens spent on reasoning"),
  column("images", "int32", true, "images generated, for endpoints billed per image"),
  column("audio_seconds", "double", true, "audio seconds, for endpoints billed per second"),
  column("speech_characters", "int32", true, "characters spoken, for text to speech"),
  column(
    "service_tier",
    "string",
    true,
    "the vendor's service tier that served the call (flex, priority...)",
  ),
  column(
    "usage_details",
    "string",
    true,
    "JSON: usage beyond the token columns (1-hour cache writes, audio/image tokens, tool calls) and `unpriced`, vendor fields nothing prices",
  ),
  column("usage_estimated", "boolean", false, "some usage figure was estimated, not reported by the vendor"),
  column("usage_complete", "boolean", false, "false when the response ended early"),
  column(
    "cost_micros",
    "int64",
    true,
    "micro-USD: charged (managed) or list price (byok, dual); null: unpriced",
  ),
  column("price_version", "string", true, "version of the price list that priced the call"),
  column(
    "cost_breakdown",
    "string",
    true,
    "JSON: the line items (dimension, quantity, unit, rate_usd per `per` units, amount_micros, list_micros, billed_micros), list_micros, markup, the price plan (id, version, percent; docs/plans.md), tier and price_version that give cost_micros",
  ),
  column("request_body", "string", true, "request body as text, at most 64 KiB (null for binary bodies)"),
  column("response_body", "string", true, "response body as text; a stream's assembled final message"),
  column("truncated", "boolean", false, "a stored body is cut short (binary bodies are not stored at all)"),
  column("request_bytes", "int64", false, "size of the whole request body"),
  column("response_bytes", "int64", false, "size of the whole response body"),
  column("user_agent", "string", true, "the client's User-Agent"),
  column(
    "store_level",
    "string",
    true,
    "what the record keeps: full, metadata (no bodies) or none (no bodies, user id as a keyed hash)",
  ),
] as const satisfies readonly ColumnDefinition[];

type Column = (typeof RECORD_COLUMNS)[number];
type KindValue = {
  string: string;
  int32: number;
  int64: number;
  double: number;
  boolean: boolean;
  /** Epoch milliseconds. */
  timestamp: number;
};

/** One record as it travels through the queue (JSON) and lands in Parquet. */
export type InteractionRecord = {
  [C in Column as C["name"]]: C["nullable"] extends true ? KindValue[C["kind"]] | null : KindValue[C["kind"]];
};
export type RecordColumnName = Column["name"];

/** Partition columns: folders in the object store, partition keys in Glue. */
export const PARTITION_KEYS = [
  { name: "project", doc: "project_id of the rows" },
  { name: "dt", doc: "UTC day of started_at, YYYY-MM-DD" },
] as const;

/** The Parquet objects of the warehouse: `interactions/project=<id>/dt=YYYY-MM-DD/<file>.parquet`. */
export const INTERACTIONS_PREFIX = "interactions/";

export function partitionPrefix(projectId: string, day: string): string {
  return `${INTERACTIONS_PREFIX}project=${projectId}/dt=${day}/`;
}

const DAY_MS = 86_400_000;
/** The day last formatted: records come in batches that mostly share a day, and formatting costs. */
let lastDay = { index: Number.NaN, text: "" };

/** The UTC day (YYYY-MM-DD) a record belongs to. */
export function recordDay(record: Pick<InteractionRecord, "started_at">): string {
  const index = Math.floor(record.started_at / DAY_MS);
  if (index !== lastDay.index) {
    lastDay = { index, text: new Date(index * DAY_MS).toISOString().slice(0, 10) };
  }
  return lastDay.text;
}

const GLUE_TYPES: Record<ColumnKind, string> = {
  string: "string",
  int32: "int",
  int64: "bigint",
  double: "double",
  boolean: "boolean",
  timestamp: "timestamp",
};

/** The Glue table's data columns, in Parquet order (the partition keys come from `gluePartitionKeys`). */
export function glueColumns(): { name: string; type: string; comment: string }[] {
  return RECORD_COLUMNS.map((c) => ({ name: c.name, type: GLUE_TYPES[c.kind], comment: c.doc }));
}

export function gluePartitionKeys(): { name: string; type: string; comment: string }[] {
  return PARTITION_KEYS.map((p) => ({ name: p.name, type: "string", comment: p.doc }));
}

/**
 * Table parameters for Athena partition projection: no crawler and no partition registration. `project`
 * is injected, so every query must say `project = ?`, which the query layer always does.
 */
export function glueProjectionParameters(location: string): Record<string, string> {
  const base = location.endsWith("/") ? location : `${location}/`;
  return {
    "projection.enabled": "true",
    "projection.project.type": "injected",
    "projection.dt.type": "date",
    "projection.dt.format": "yyyy-MM-dd",
    "projection.dt.range": "2024-01-01,NOW",
    "projection.dt.interval": "1",
    "projection.dt.interval.unit": "DAYS",
    "storage.location.template": `${base}project=\${project}/dt=\${dt}/`,
    "parquet.compression": "SNAPPY",
    "dmt.schema_version": String(RECORD_SCHEMA_VERSION),
  };
}

/** What the proxy knows about a finished call. Nothing here can carry a key. */
export interface InteractionInput {
  transactionId: string;
  requestId?: string;
  projectId: string;
  keyId: string;
  vendor: VendorName;
  /**
   * The path under the vendor prefix (`/v1/chat/completions`); the proxy's endpoint form
   * (`openai:/v1/chat/completions`) is accepted too. A query string, if any, is dropped.
   */
  endpoint: string;
  model?: string;
  billingMode: BillingMode;
  statusCode: number;
  error?: { type: string; code: string };
  vendorRequestId?: string;
  streamed: boolean;
  startedAt: number;
  latencyMs: number;
  ttftMs?: number;
  usage: Usage;
  /** Absent when nothing priced the call (a model without a price). */
  costMicros?: number;
  priceVersion?: string;
  /** How `costMicros` was reached; stored as JSON with the price version. */
  costBreakdown?: object;
  /** The X-User-ID header, when sent. */
  userIdHeader?: string;
  /** The parsed JSON request body, when the proxy has it (saves parsing the text again). */
  requestJson?: unknown;
  userAgent?: string;
  request: CapturedBody;
  response: CapturedBody;
  /** What the record may keep (core/privacy.ts); below `full` no body text is even looked at. */
  store: StoreLevel;
}

const NO_BODY = { text: null, truncated: false };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The stored text of a body: at most RECORD_BODY_LIMIT_BYTES of UTF-8, never splitting a character. */
function storedText(body: CapturedBody): { text: string | null; truncated: boolean } {
  if (body.text === undefined) return { text: null, truncated: body.truncated };
  // Fewer UTF-16 units than the limit/3 cannot exceed the limit in UTF-8 bytes: skip the encoding.
  if (body.text.length <= RECORD_BODY_LIMIT_BYTES / 3) return { text: body.text, truncated: body.truncated };
  const bytes = encoder.encode(body.text);
  if (bytes.byteLength <= RECORD_BODY_LIMIT_BYTES) return { text: body.text, truncated: body.truncated };
  let cut = RECORD_BODY_LIMIT_BYTES;
  // Back off to the start of a UTF-8 sequence so no character is split.
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut--;
  return { text: decoder.decode(bytes.subarray(0, cut)), truncated: true };
}

function parseObject(text: string | null): unknown {
  if (text?.charCodeAt(0) !== 0x7b /* { */) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Who the call was for: `X-User-ID`, else the JSON body's `user` (OpenAI) or `metadata.user_id`
 * (Anthropic). Empty values count as absent.
 */
export function resolveUserId(header: string | undefined, body: unknown): string | null {
  if (header) return header;
  if (typeof body !== "object" || body === null) return null;
  const fields = body as { user?: unknown; metadata?: { user_id?: unknown } };
  if (typeof fields.user === "string" && fields.user) return fields.user;
  const fromMetadata = fields.metadata?.user_id;
  return typeof fromMetadata === "string" && fromMetadata ? fromMetadata : null;
}

function endpointPath(endpoint: string, vendor: string): string {
  const queryAt = endpoint.indexOf("?");
  const path = queryAt === -1 ? endpoint : endpoint.slice(0, queryAt);
  return path.startsWith(`${vendor}:`) ? path.slice(vendor.length + 1) : path;
}

/** The usage the token columns do not hold, as JSON; null when there is none. */
function usageDetails(usage: Usage): string | null {
  const details: Record<string, unknown> = {};
  const counts = {
    cache_write_1h_tokens: usage.cacheWrite1hTokens,
    audio_input_tokens: usage.audioInputTokens,
    image_input_tokens: usage.imageInputTokens,
    audio_output_tokens: usage.audioOutputTokens,
  };
  for (const [name, value] of Object.entries(counts)) if (value) details[name] = value;
  if (usage.toolCalls && Object.keys(usage.toolCalls).length > 0) details.tool_calls = usage.toolCalls;
  if (usage.unpriced) details.unpriced = usage.unpriced;
  return Object.keys(details).length > 0 ? JSON.stringify(details) : null;
}

/** Builds the record of one call. */
export function buildRecord(input: InteractionInput): InteractionRecord {
  const keepBodies = input.store === "full";
  const request = keepBodies ? storedText(input.request) : NO_BODY;
  const response = keepBodies ? storedText(input.response) : NO_BODY;
  const { usage } = input;
  return {
    schema_version: RECORD_SCHEMA_VERSION,
    transaction_id: input.transactionId,
    request_id: input.requestId ?? null,
    project_id: input.projectId,
    key_id: input.keyId,
    user_id: resolveUserId(input.userIdHeader, input.requestJson ?? parseObject(input.request.text ?? null)),
    vendor: input.vendor,
    endpoint: endpointPath(input.endpoint, input.vendor),
    model: input.model ?? null,
    billing_mode: input.billingMode,
    status_code: input.statusCode,
    error_type: input.error?.type ?? null,
    error_code: input.error?.code ?? null,
    vendor_request_id: input.vendorRequestId ?? null,
    streamed: input.streamed,
    started_at: input.startedAt,
    latency_ms: Math.round(input.latencyMs),
    ttft_ms: input.ttftMs === undefined ? null : Math.round(input.ttftMs),
    input_tokens: usage.inputTokens,
    output_tokens: usage.outputTokens,
    cached_input_tokens: usage.cachedInputTokens,
    cache_write_tokens: usage.cacheWriteTokens,
    reasoning_tokens: usage.reasoningTokens,
    images: usage.images ?? null,
    audio_seconds: usage.audioSeconds ?? null,
    speech_characters: usage.speechCharacters ?? null,
    service_tier: usage.serviceTier ?? null,
    usage_details: usageDetails(usage),
    usage_estimated: usage.estimated,
    usage_complete: usage.complete,
    cost_micros: input.costMicros ?? null,
    price_version: input.priceVersion ?? null,
    cost_breakdown:
      input.costBreakdown === undefined
        ? null
        : JSON.stringify({ price_version: input.priceVersion ?? null, ...input.costBreakdown }),
    request_body: request.text,
    response_body: response.text,
    truncated: request.truncated || response.truncated,
    request_bytes: input.request.bytes,
    response_bytes: input.response.bytes,
    user_agent: input.userAgent ?? null,
    store_level: input.store,
  };
}

/** A record that cannot be stored: a poison message, dead-lettered with this message. */
export class RecordError extends Error {
  override name = "RecordError";
}

/**
 * The test of a present (neither undefined nor null) value of each kind, as JavaScript over `v`, and
 * what the value must be when the test fails.
 */
const VALUE_CHECKS: Record<ColumnKind, { test: string; expected: string }> = {
  string: { test: 'typeof v === "string"', expected: "a string" },
  boolean: { test: 'typeof v === "boolean"', expected: "a boolean" },
  double: { test: 'typeof v === "number" && Number.isFinite(v) && v >= 0', expected: "a number >= 0" },
  int32: {
    test: "Number.isInteger(v) && v >= 0 && v <= 2147483647",
    expected: "an integer from 0 to 2^31-1",
  },
  int64: { test: "Number.isSafeInteger(v) && v >= 0", expected: "a non-negative safe integer" },
  timestamp: { test: "Number.isSafeInteger(v) && v >= 0", expected: "a non-negative safe integer" },
};

const ENUMS: Partial<Record<RecordColumnName, readonly string[]>> = {
  vendor: VENDOR_NAMES,
  billing_mode: BILLING_MODES,
  store_level: STORE_LEVELS,
};

/** The JavaScript that checks one column's value `v = fields[name]`, returning what is wrong. */
function columnCheck(column: (typeof RECORD_COLUMNS)[number], index: number): string {
  const key = JSON.stringify(column.name);
  const { test, expected } = VALUE_CHECKS[column.kind];
  const wrong = (what: string) => `return ${JSON.stringify(`'${column.name}' ${what}`)};`;
  const allowed = ENUMS[column.name];
  return `v = fields[${key}];
    if (v === undefined || v === null) {
      ${column.nullable ? `if (v === undefined) fields[${key}] = null;` : wrong("is required")}
    } else if (!(${test})) {
      ${wrong(`must be ${expected}`)}
    }${allowed ? ` else if (!enums[${index}].has(v)) {\n      ${wrong(`must be one of ${allowed.join(", ")}`)}\n    }` : ""}
    if (v !== undefined) known++;`;
}

/**
 * Checks every column of a parsed object in place and returns what is wrong, or undefined. Generated
 * from `RECORD_COLUMNS` at load, so each field is read with a constant key (which V8 reads straight
 * off the object) and tested for its own kind only: six times faster than a loop over the columns.
 * Absent nullable fields become null. It counts the fields it knows, so an unknown one is noticed
 * without looking each key up.
 */
const checkColumns = new Function(
  "fields",
  "enums",
  "unknownField",
  `let v;
  let known = 0;
  ${RECORD_COLUMNS.map(columnCheck).join("\n  ")}
  let keys = 0;
  for (const key in fields) keys++;
  return keys === known ? undefined : unknownField(fields);`,
) as (
  fields: Record<string, unknown>,
  enums: readonly (ReadonlySet<string> | undefined)[],
  unknownField: (fields: Record<string, unknown>) => string | undefined,
) => string | undefined;

const COLUMN_ENUMS = RECORD_COLUMNS.map((c) => {
  const allowed = ENUMS[c.name];
  return allowed && new Set(allowed);
});
const COLUMN_NAMES: ReadonlySet<string> = new Set(RECORD_COLUMNS.map((c) => c.name));

/** The slow path of the count: a key that is no column (a column set to undefined counts as absent). */
function unknownField(fields: Record<string, unknown>): string | undefined {
  for (const key of Object.keys(fields)) {
    if (!COLUMN_NAMES.has(key)) return `unknown field '${key.slice(0, 64)}'`;
  }
  return undefined;
}

/** Our transaction ids; also one line each in the delivery ledger, so no whitespace. */
const TRANSACTION_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

/**
 * Checks a record received from the queue against the schema. Anything wrong is a RecordError: the
 * message cannot become a row however often it is retried.
 */
export function parseRecord(value: unknown): InteractionRecord {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new RecordError("the record is not a JSON object");
  }
  const fields = value as Record<string, unknown>;
  if (!READABLE_SCHEMA_VERSIONS.has(fields.schema_version)) {
    throw new RecordError(`unsupported schema_version ${JSON.stringify(fields.schema_version)}`);
  }
  // Checked in place: the parsed object becomes the record.
  const wrong = checkColumns(fields, COLUMN_ENUMS, unknownField);
  if (wrong) throw new RecordError(wrong);
  if (!TRANSACTION_ID.test(fields.transaction_id as string)) {
    throw new RecordError("'transaction_id' must be 1 to 128 letters, digits, '_', '.', ':' or '-'");
  }
  // The project id names a folder: anything but a valid id could escape the partition layout.
  if (!PROJECT_ID_PATTERN.test(fields.project_id as string)) {
    throw new RecordError("'project_id' is not a project id");
  }
  return fields as InteractionRecord;
}
