import * as z from "zod";
import { VENDOR_NAMES, type VendorName } from "../vendor-names";
import { decimalText, parseNanos } from "./decimal";

/** The shape of `prices/catalogue.json` and of a deployment's override file (see prices/README.md). */

/** The vendors a price names: those dmt proxies. */
export const VENDORS = VENDOR_NAMES;
export type Vendor = VendorName;

export const KINDS = ["chat", "embedding", "image", "transcription", "speech", "moderation"] as const;
export type ModelKind = (typeof KINDS)[number];

/** No published price comes near this; a bigger figure is a typo (a per-token price, a missing dot). */
const MAX_USD = 10_000n * 1_000_000_000n;

/** A USD amount as decimal text or a JSON number, held as integer nano-USD. */
const usd = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const text = decimalText(value);
  if (text === undefined) {
    ctx.addIssue({
      code: "custom",
      message: "must be a non-negative USD amount with at most 9 decimals, e.g. 2.50",
    });
    return z.NEVER;
  }
  const nanos = parseNanos(text);
  if (nanos > MAX_USD) {
    ctx.addIssue({ code: "custom", message: "is over 10000 USD, which no vendor charges per unit" });
    return z.NEVER;
  }
  return nanos;
});

const modelId = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$/, "must be a model id (no spaces)");
const versionTag = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, "must be a short tag like 2026-11-22");

const tokenRates = {
  input: usd.optional(),
  output: usd.optional(),
  cached_input: usd.optional(),
  cache_write: usd.optional(),
  /** Cache writes with a 1-hour TTL (Anthropic); `cache_write` prices the 5-minute ones. */
  cache_write_1h: usd.optional(),
  reasoning: usd.optional(),
  /** Input and output tokens of audio or images, where a model bills them apart from text. */
  audio_input: usd.optional(),
  image_input: usd.optional(),
  audio_output: usd.optional(),
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
  above_input_tokens: z.int().min(1),
  ...tokenRates,
  input: usd,
  output: usd,
});

const priceRow = z.strictObject({
  /** UTC date from which this row applies, until the next row's date. */
  effective_from: z.iso.date(),
  ...tokenRates,
  long_context: longContext.optional(),
  /** Whole-call rates when the vendor answers from another service tier (the long-context tier aside). */
  service_tiers: z.partialRecord(z.enum(SERVICE_TIERS), tierRates).optional(),
  /** USD per 1,000 calls of a server-side tool (each search a model runs). */
  tool_calls: toolFees.optional(),
  /** USD per 1,000 requests that used a server-side tool at all, however often (Gemini 2.x grounding). */
  tool_requests: toolFees.optional(),
  /** USD per image: one price, or one per "<quality>/<size>" variant. */
  per_image: z.union([usd, z.record(z.string().regex(/^[a-z0-9/_-]{1,40}$/), usd)]).optional(),
  /** Audio billed by duration, rounded up to whole seconds, with an optional per-request minimum. */
  audio: z
    .strictObject({
      per: z.enum(["second", "minute", "hour"]),
      usd,
      minimum_seconds: z.int().min(0).max(3600).optional(),
    })
    .optional(),
  /** Speech billed by input characters, USD per million characters. */
  per_million_characters: usd.optional(),
  note: z.string().optional(),
});

export type RawPriceRow = z.infer<typeof priceRow>;

const entryFields = {
  vendor: z.enum(VENDORS),
  model: modelId,
  kind: z.enum(KINDS),
  aliases: z.array(modelId).optional(),
  /** The model's output cap: sizes the credit hold when a request sets no max tokens. */
  max_output_tokens: z.int().min(1).max(10_000_000).optional(),
  note: z.string().optional(),
  prices: z.array(priceRow).min(1),
};

/** Which prices each kind must carry, so a model is never metered at zero by omission. */
function checkEntry(entry: z.infer<z.ZodObject<typeof entryFields>>, ctx: z.RefinementCtx): void {
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

const entry = z.strictObject(entryFields).superRefine(checkEntry);
export type RawEntry = z.infer<typeof entry>;

const source = z.strictObject({
  vendor: z.enum(VENDORS),
  url: z.url(),
  read_on: z.iso.date(),
  page_date: z.iso.date().optional(),
  note: z.string().optional(),
});

export const catalogueSchema = z
  .strictObject({
    version: versionTag,
    currency: z.literal("USD"),
    notes: z.array(z.string()).optional(),
    sources: z.array(source).min(1),
    models: z.array(entry),
  })
  .superRefine((catalogue, ctx) => {
    // Every id and alias names one model per vendor, or lookups would be ambiguous.
    const owner = new Map<string, string>();
    catalogue.models.forEach((model, i) => {
      for (const id of [model.model, ...(model.aliases ?? [])]) {
        const key = `${model.vendor}/${id}`;
        const taken = owner.get(key);
        if (taken !== undefined) {
          ctx.addIssue({ code: "custom", path: ["models", i, "model"], message: `'${id}' is also ${taken}` });
        }
        owner.set(key, `${model.vendor}/${model.model}`);
      }
    });
  });
export type RawCatalogue = z.infer<typeof catalogueSchema>;

/** An override entry: a new model (then complete) or changes to a catalogued one. */
export const overrideSchema = z.strictObject({
  version: versionTag.optional(),
  markup: z.number().optional(),
  notes: z.array(z.string()).optional(),
  models: z
    .array(
      z.looseObject({
        vendor: z.enum(VENDORS),
        model: modelId,
        prices: z.array(z.looseObject({ effective_from: z.iso.date() })).optional(),
      }),
    )
    .optional(),
});
