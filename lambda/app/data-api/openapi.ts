/**
 * `GET /api/v1/openapi.json`: the data API described in OpenAPI 3.1, generated at start from zod
 * schemas with `z.toJSONSchema`: the request bodies' schemas are the ones that decide what the routes
 * accept (core/export-request.ts, core/deletion.ts), and the answers' schemas type what the handlers
 * return (`satisfies`), so neither side can drift without the compiler or the tests noticing
 * (test/integration/openapi.test.ts checks every route's real answers against this description).
 * Served without a key: it describes the API, and holds nothing of any project.
 */
import * as z from "zod/mini";
import { BUDGET_SCOPES, BUDGET_WINDOWS } from "../../core/budgets";
import { DELETION_STATUSES, deletionRequestSchema } from "../../core/deletion";
import { EXPORT_COLUMNS } from "../../core/export-format";
import { exportRequestSchema } from "../../core/export-request";
import { FOCUS_EXPORT_COLUMNS, FOCUS_VERSION } from "../../core/focus";
import { type ColumnKind, RECORD_COLUMNS } from "../../core/record";

const text = z.string();
const nullableText = z.nullable(z.string());
const count = z.int().check(z.minimum(0));

export const errorSchema = z.strictObject({
  error: z.strictObject({ message: text, type: text, code: text }),
});

export const statusSchema = z.strictObject({ status: z.literal("ok"), project: text });

const KIND: Record<ColumnKind, z.ZodMiniType> = {
  string: text,
  int32: z.int(),
  int64: z.int(),
  double: z.number(),
  boolean: z.boolean(),
  timestamp: z.iso.datetime(),
};

/** One interaction row of a JSON export: the record's columns, and `cost_usd` as decimal text. */
const interactionRowSchema = z.strictObject(
  Object.fromEntries(
    EXPORT_COLUMNS.map((name) => {
      if (name === "cost_usd") return [name, nullableText];
      const column = RECORD_COLUMNS.find((c) => c.name === name);
      const kind = KIND[column?.kind ?? "string"];
      return [name, column?.nullable ? z.nullable(kind) : kind];
    }),
  ),
);

/** Decimal FOCUS columns: exact decimal text. */
const FOCUS_DECIMAL_TEXT = new Set(["BilledCost", "ListCost", "ContractedCost", "EffectiveCost"]);
const FOCUS_NULLABLE = new Set(["ChargeClass", "x_KeyName", "x_Model", "x_PriceVersion"]);
const FOCUS_COUNTS = new Set(["ConsumedQuantity", "PricingQuantity"]);

/** One FOCUS row of a JSON export (core/focus.ts). */
const focusRowSchema = z.strictObject(
  Object.fromEntries(
    FOCUS_EXPORT_COLUMNS.map((name) => {
      const value = FOCUS_DECIMAL_TEXT.has(name)
        ? z.string().check(z.regex(/^-?\d+\.\d+$/))
        : FOCUS_COUNTS.has(name) || (name.startsWith("x_") && /Calls|Tokens|Micros/.test(name))
          ? count
          : text;
      return [name, FOCUS_NULLABLE.has(name) ? z.nullable(value) : value];
    }),
  ),
);

export const bucketExportSchema = z.strictObject({
  export_url: text,
  download_url: text,
  expires_at: nullableText,
});

export const deletionQueuedSchema = z.strictObject({
  status: z.literal("ok"),
  message: text,
  request_id: text,
});

export const deletionViewSchema = z.strictObject({
  request_id: text,
  status: z.enum(DELETION_STATUSES),
  reason: text,
  user_id_hash: nullableText,
  transaction_ids: count,
  counts: z.strictObject({
    rows_deleted: count,
    files_rewritten: count,
    files_deleted: count,
    copies_purged: count,
  }),
  created_at: nullableText,
  started_at: nullableText,
  finished_at: nullableText,
  error: nullableText,
});

const optionalCount = z.nullable(count);
export const transactionSchema = z.strictObject({
  transaction_id: text,
  status: z.enum(["success", "error"]),
  status_code: z.int(),
  error: z.nullable(z.strictObject({ type: nullableText, code: nullableText })),
  vendor: text,
  endpoint: text,
  model: nullableText,
  key_id: text,
  streamed: z.boolean(),
  started_at: text,
  latency_ms: z.int(),
  billing_mode: text,
  cost_usd: nullableText,
  price_version: nullableText,
  usage: z.strictObject({
    input_tokens: count,
    cached_input_tokens: count,
    cache_write_tokens: count,
    output_tokens: count,
    reasoning_tokens: count,
    images: optionalCount,
    audio_seconds: z.nullable(z.number()),
    speech_characters: optionalCount,
    estimated: z.boolean(),
    complete: z.boolean(),
  }),
});

export const budgetListSchema = z.strictObject({
  object: z.literal("list"),
  data: z.array(
    z.strictObject({
      id: text,
      project: text,
      scope: z.enum(BUDGET_SCOPES),
      key: z.optional(text),
      key_name: z.optional(text),
      user: z.optional(text),
      window: z.enum(BUDGET_WINDOWS),
      limit_usd: text,
      soft: z.boolean(),
      include_byok: z.boolean(),
      window_id: text,
      spent_usd: z.optional(text),
      held_usd: z.optional(text),
      resets_at: z.optional(text),
    }),
  ),
});

/** What `POST /stripe/webhook` answers Stripe (billing/payments.ts, `WebhookOutcome`). */
export const stripeWebhookAnswerSchema = z.union([
  z.strictObject({
    received: z.literal(true),
    outcome: z.enum(["granted", "duplicate"]),
    project: text,
    grant: text,
  }),
  z.strictObject({
    received: z.literal(true),
    outcome: z.literal("reversed"),
    project: text,
    taken_usd: text,
    not_taken_usd: text,
  }),
  z.strictObject({ received: z.literal(true), outcome: z.literal("ignored"), reason: text }),
]);

type JsonObject = Record<string, unknown>;

/** A zod schema as an OpenAPI 3.1 schema object (JSON Schema 2020-12, without `$schema`). */
function schema(zod: z.ZodMiniType): JsonObject {
  const { $schema: _, ...rest } = z.toJSONSchema(zod, { target: "draft-2020-12", io: "input" }) as JsonObject;
  return rest;
}

const json = (zod: z.ZodMiniType, description: string) => ({
  description,
  content: { "application/json": { schema: schema(zod) } },
});
const ERROR = { $ref: "#/components/responses/Error" };
const errorsOf = (...statuses: number[]) => Object.fromEntries(statuses.map((s) => [String(s), ERROR]));
/** What any keyed route may answer besides its own: no or a bad key, a key not allowed here, the rate limit. */
const KEYED = errorsOf(401, 403, 405, 429, 500);

/** The description, built once. */
export function dataApiDescription(): JsonObject {
  return {
    openapi: "3.1.0",
    info: {
      title: "dmt data API",
      version: "1",
      description:
        "Exports, deletion requests, budgets and call summaries of the project of the calling key. Every route under `/api/v1/` but this description takes a dmt service key: `Authorization: Bearer <key>` or `X-API-Key`.",
    },
    servers: [{ url: "/" }],
    security: [{ bearer: [] }, { apiKey: [] }],
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "A dmt service key." },
        apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
      },
      responses: {
        Error: json(errorSchema, "An error, in the service's error shape."),
      },
    },
    paths: {
      "/stripe/webhook": {
        post: {
          operationId: "stripeWebhook",
          summary: "Stripe's events (payments for credits); for Stripe, not for clients",
          description:
            "No key: the `Stripe-Signature` header, checked against the raw body, is the credential. 404 when the deployment has no Stripe settings; 409 while another delivery of the same payment is applied (Stripe retries).",
          security: [],
          parameters: [
            { name: "Stripe-Signature", in: "header", required: true, schema: { type: "string" } },
          ],
          requestBody: { required: true, content: { "application/json": { schema: { type: "object" } } } },
          responses: {
            "200": json(stripeWebhookAnswerSchema, "Acted on, or ignored."),
            ...errorsOf(400, 404, 405, 409, 413, 500),
          },
        },
      },
      "/api/v1/openapi.json": {
        get: {
          operationId: "getDescription",
          summary: "This description",
          security: [],
          responses: {
            "200": {
              description: "OpenAPI 3.1",
              content: { "application/json": { schema: { type: "object" } } },
            },
            ...errorsOf(405),
          },
        },
      },
      "/api/v1/status": {
        get: {
          operationId: "getStatus",
          summary: "The API is up, and whose key this is",
          responses: { "200": json(statusSchema, "Up."), ...KEYED },
        },
      },
      "/api/v1/exports": {
        post: {
          operationId: "createExport",
          summary: "Export the project's interaction rows, or FOCUS cost rows",
          description: `\`schema\` \`interactions\` (the default): one row per call. \`focus\`: FOCUS ${FOCUS_VERSION} cost rows, one per day, model and key (header \`X-Focus-Version\`). Streamed as JSON or CSV; for a project with a bucket destination, written there and answered with its URLs. In AWS, an export of more rows than the stream sends in its 15 minutes (the project's calls in the range) is refused up front: 400 \`export_too_large\`.`,
          requestBody: {
            required: true,
            content: { "application/json": { schema: schema(exportRequestSchema) } },
          },
          responses: {
            "200": {
              description: "The rows, or where they were written.",
              content: {
                "application/json": {
                  schema: {
                    anyOf: [
                      { type: "array", items: schema(interactionRowSchema) },
                      { type: "array", items: schema(focusRowSchema) },
                      schema(bucketExportSchema),
                    ],
                  },
                },
                "text/csv": { schema: { type: "string" } },
              },
            },
            ...errorsOf(400, 413, 415),
            ...KEYED,
          },
        },
      },
      "/api/v1/data": {
        post: {
          operationId: "requestDeletion",
          summary: "Delete a user's or some calls' records",
          requestBody: {
            required: true,
            content: { "application/json": { schema: schema(deletionRequestSchema) } },
          },
          responses: { "202": json(deletionQueuedSchema, "Queued."), ...errorsOf(400, 413, 415), ...KEYED },
        },
      },
      "/api/v1/data/{request_id}": {
        get: {
          operationId: "getDeletion",
          summary: "A deletion request's state and counts",
          parameters: [{ name: "request_id", in: "path", required: true, schema: { type: "string" } }],
          responses: { "200": json(deletionViewSchema, "The request."), ...errorsOf(404), ...KEYED },
        },
      },
      "/api/v1/transactions/{transaction_id}": {
        get: {
          operationId: "getTransaction",
          summary: "One call's summary (never its bodies)",
          parameters: [{ name: "transaction_id", in: "path", required: true, schema: { type: "string" } }],
          responses: { "200": json(transactionSchema, "The call."), ...errorsOf(404), ...KEYED },
        },
      },
      "/api/v1/budgets": {
        get: {
          operationId: "listBudgets",
          summary: "The budgets that apply to the calling key, with their current spend",
          parameters: [
            {
              name: "user",
              in: "query",
              required: false,
              schema: { type: "string", minLength: 1, maxLength: 256 },
            },
          ],
          responses: { "200": json(budgetListSchema, "The budgets."), ...errorsOf(400), ...KEYED },
        },
      },
    },
  };
}
