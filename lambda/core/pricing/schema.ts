import { en } from "zod/locales";
import * as z from "zod/mini";
import { VENDOR_NAMES } from "../vendor-names";
import { decimalText, parseNanos } from "./decimal";

/** The shape of `prices/catalogue.json` and of a deployment's override file (see prices/README.md). */

// zod/mini keeps the bundles small (docs/aws.md, "Bundle") but has no messages of its own: a bad price
// file is explained in English, as full zod does.
z.config(en());

export const KINDS = ["chat", "embedding", "image", "transcription", "speech", "moderation"] as const;
export type ModelKind = (typeof KINDS)[number];

/** No published price comes near this; a bigger figure is a typo (a per-token price, a missing dot). */
const MAX_USD = 10_000n * 1_000_000_000n;

/** A USD amount as decimal text or a JSON number, held as integer nano-USD. */
const usd = z.pipe(
  z.union([z.string(), z.number()]),
  z.transform((value: string | number, ctx) => {
    const text = decimalText(value);
    if (text === undefined) {
      ctx.issues.push({
        code: "custom",
        input: value,
        message: "must be a non-negative USD amount with at most 9 decimals, e.g. 2.50",
      });
      return z.NEVER;
    }
    const nanos = parseNanos(text);
    if (nanos > MAX_USD) {
      ctx.issues.push({
        code: "custom",
        input: value,
        message: "is over 10000 USD, which no vendor charges per unit",
      });
      return z.NEVER;
    }
    return nanos;
  }),
);

const modelId = z
  .string()
  .check(z.regex(/^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$/, "must be a model id (no spaces)"));
const versionTag = z
  .string()
  .check(z.regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "must be a short tag like 2026-11-22"));

const tokenRates = {
  input: z.optional(usd),
  output: z.optional(usd),
  cached_input: z.optional(usd),
  cache_write: z.optional(usd),
  /** Cache writes with a 1-hour TTL (Anthropic); `cache_write` prices the 5-minute ones. */
  cache_write_1h: z.optional(usd),
  reasoning: z.optional(usd),
  /** Input and output tokens of audio or images, where a model bills them apart from text. */
  audio_input: z.optional(usd),
  image_input: z.optional(usd),
  audio_output: z.optional(usd),
};

/** Server-side tools the vendors bill per use (see prices/README.md for what each counts). */
export const TOOLS = ["web_search", "web_search_preview", "web_fetch", "google_search"] as const;
export type Tool = (typeof TOOLS)[number];

/** Service tiers priced apart from the standard rates; a response's `service_tier` picks one. */
export const SERVICE_TIERS = ["flex", "priority"] as const;
export type ServiceTier = (typeof SERVICE_TIERS)[number];

/** USD per 1,000 uses, by tool. */
const toolFees = z.partialRecord(z.enum(TOOLS), usd);

const tierRates = z.strictObject({ ...tokenRates, input: usd, output: usd });

const longContext = z.strictObject({
  /** The whole request moves to these rates when its input (cached and cache writes included) exceeds this. */
  above_input_tokens: z.int().check(z.gte(1)),
  ...tokenRates,
  input: usd,
  output: usd,
});

const priceRow = z.strictObject({
  /** UTC date from which this row applies, until the next row's date. */
  effective_from: z.iso.date(),
  ...tokenRates,
  long_context: z.optional(longContext),
  /** Whole-call rates when the vendor answers from another service tier (the long-context tier aside). */
  service_tiers: z.optional(z.partialRecord(z.enum(SERVICE_TIERS), tierRates)),
  /** USD per 1,000 calls of a server-side tool (each search a model runs). */
  tool_calls: z.optional(toolFees),
  /** USD per 1,000 requests that used a server-side tool at all, however often (Gemini 2.x grounding). */
  tool_requests: z.optional(toolFees),
  /** USD per image: one price, or one per "<quality>/<size>" variant. */
  per_image: z.optional(z.union([usd, z.record(z.string().check(z.regex(/^[a-z0-9/_-]{1,40}$/)), usd)])),
  /** Audio billed by duration, rounded up to whole seconds, with an optional per-request minimum. */
  audio: z.optional(
    z.strictObject({
      per: z.enum(["second", "minute", "hour"]),
      usd,
      minimum_seconds: z.optional(z.int().check(z.gte(0), z.lte(3600))),
    }),
  ),
  /** Speech billed by input characters, USD per million characters. */
  per_million_characters: z.optional(usd),
  note: z.optional(z.string()),
});

export type RawPriceRow = z.infer<typeof priceRow>;

const entryFields = {
  vendor: z.enum(VENDOR_NAMES),
  model: modelId,
  kind: z.enum(KINDS),
  aliases: z.optional(z.array(modelId)),
  /** The model's output cap: sizes the credit hold when a request sets no max tokens. */
  max_output_tokens: z.optional(z.int().check(z.gte(1), z.lte(10_000_000))),
  note: z.optional(z.string()),
  prices: z.array(priceRow).check(z.minLength(1)),
};

/** Which prices each kind must carry, so a model is never metered at zero by omission. */
function checkEntry(entry: z.infer<z.ZodMiniObject<typeof entryFields>>, ctx: z.core.$RefinementCtx): void {
  const issue = (path: (string | number)[], message: string) =>
    ctx.addIssue({ code: "custom", path, message });
  if (entry.kind === "chat" && entry.max_output_tokens === undefined) {
    issue(["max_output_tokens"], "required for a chat model");
  }
  entry.prices.forEach((row, i) => {
    const previous = entry.prices[i - 1];
    if (previous && row.effective_from <= previous.effective_from) {
      issue(["prices", i, "effective_from"], "must be later than the row before it");
    }
    const tokens = row.input !== undefined && row.output !== undefined;
    const missing = (field: string, why: string) => issue(["prices", i, field], `required ${why}`);
    switch (entry.kind) {
      case "chat":
        if (row.input === undefined) missing("input", "for a chat model");
        if (row.output === undefined) missing("output", "for a chat model");
        break;
      case "embedding":
        if (row.input === undefined) missing("input", "for an embedding model");
        break;
      case "image":
        if (row.per_image === undefined && !tokens) missing("per_image", "(or input and output)");
        break;
      case "transcription":
        if (row.audio === undefined && !tokens) missing("audio", "(or input and output)");
        break;
      case "speech":
        if (row.per_million_characters === undefined && !tokens) {
          missing("per_million_characters", "(or input and output)");
        }
        break;
      case "moderation":
        break;
    }
  });
}

const entry = z.strictObject(entryFields).check(z.superRefine(checkEntry));
export type RawEntry = z.infer<typeof entry>;

const source = z.strictObject({
  vendor: z.enum(VENDOR_NAMES),
  url: z.url(),
  read_on: z.iso.date(),
  page_date: z.optional(z.iso.date()),
  note: z.optional(z.string()),
});

export const catalogueSchema = z
  .strictObject({
    version: versionTag,
    currency: z.literal("USD"),
    notes: z.optional(z.array(z.string())),
    sources: z.array(source).check(z.minLength(1)),
    models: z.array(entry),
  })
  .check(
    z.superRefine((catalogue, ctx) => {
      // Every id and alias names one model per vendor, or lookups would be ambiguous.
      const owner = new Map<string, string>();
      catalogue.models.forEach((model, i) => {
        for (const id of [model.model, ...(model.aliases ?? [])]) {
          const key = `${model.vendor}/${id}`;
          const taken = owner.get(key);
          if (taken !== undefined) {
            ctx.addIssue({
              code: "custom",
              path: ["models", i, "model"],
              message: `'${id}' is also ${taken}`,
            });
          }
          owner.set(key, `${model.vendor}/${model.model}`);
        }
      });
    }),
  );
export type RawCatalogue = z.infer<typeof catalogueSchema>;

/** An override entry: a new model (then complete) or changes to a catalogued one. */
export const overrideSchema = z.strictObject({
  version: z.optional(versionTag),
  markup: z.optional(z.number()),
  notes: z.optional(z.array(z.string())),
  models: z.optional(
    z.array(
      z.looseObject({
        vendor: z.enum(VENDOR_NAMES),
        model: modelId,
        prices: z.optional(z.array(z.looseObject({ effective_from: z.iso.date() }))),
      }),
    ),
  ),
});
