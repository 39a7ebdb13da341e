/**
 * FOCUS exports (FinOps Open Cost and Usage Specification 1.2, `specification/columns/*.md` at the
 * spec's tag v1.2): one row per project, UTC day, vendor, model, key, billing mode and price version,
 * the columns FOCUS makes mandatory (and the conditional ones that apply to metered API calls) first,
 * ours after them with the `x_` prefix the spec reserves for custom columns. docs/warehouse.md has the
 * mapping table. Money is integer micro-USD until it is written, as a decimal string: no float drift.
 */
import { csvCell, type ExportValue } from "./export-format";
import type { UsageGroup } from "./export-query";
import type { ExportFormat } from "./export-request";
import { decimalUsd } from "./money";

export const FOCUS_VERSION = "1.2";

/** Who makes each vendor's models available, and the service they are sold as. */
const VENDORS: Record<string, { provider: string; service: string }> = {
  openai: { provider: "OpenAI", service: "OpenAI API" },
  anthropic: { provider: "Anthropic", service: "Claude API" },
  gemini: { provider: "Google", service: "Gemini API" },
  groq: { provider: "Groq", service: "GroqCloud" },
};

/** The deployment that resold a managed call: the invoice issuer of credits-paid usage. */
export const FOCUS_ISSUER = "dmt";

/** FOCUS columns, in the order written; then ours. Decimal columns are written as decimal text. */
export const FOCUS_COLUMNS = [
  "BilledCost",
  "BillingAccountId",
  "BillingAccountName",
  "BillingCurrency",
  "BillingPeriodEnd",
  "BillingPeriodStart",
  "ChargeCategory",
  "ChargeClass",
  "ChargeDescription",
  "ChargeFrequency",
  "ChargePeriodEnd",
  "ChargePeriodStart",
  "ConsumedQuantity",
  "ConsumedUnit",
  "ContractedCost",
  "EffectiveCost",
  "InvoiceIssuerName",
  "ListCost",
  "PricingCategory",
  "PricingQuantity",
  "PricingUnit",
  "ProviderName",
  "PublisherName",
  "ServiceCategory",
  "ServiceName",
  "ServiceSubcategory",
  "SkuId",
  "SkuMeter",
  "SkuPriceId",
] as const;

export const FOCUS_CUSTOM_COLUMNS = [
  "x_ProjectId",
  "x_KeyId",
  "x_KeyName",
  "x_Vendor",
  "x_Model",
  "x_BillingMode",
  "x_PriceVersion",
  "x_Calls",
  "x_FailedCalls",
  "x_UnpricedCalls",
  "x_InputTokens",
  "x_OutputTokens",
  "x_CachedInputTokens",
  "x_CacheWriteTokens",
  "x_ReasoningTokens",
  "x_CostMicros",
  "x_ListMicros",
  "x_ErasedCalls",
] as const;

export const FOCUS_EXPORT_COLUMNS: readonly string[] = [...FOCUS_COLUMNS, ...FOCUS_CUSTOM_COLUMNS];

/** Columns whose text comes from callers or vendors: neutralised in CSV as interaction exports are. */
const CALLER_TEXT = new Set(["ChargeDescription", "SkuId", "SkuPriceId", "x_KeyName", "x_Model"]);

export interface FocusContext {
  projectId: string;
  /** Key ids to names; a key deleted since has none. */
  keyNames: ReadonlyMap<string, string>;
}

const DAY_MS = 86_400_000;
const stamp = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`;

/** The charge period of a UTC day: its midnight, inclusive, to the next, exclusive. */
export function chargePeriod(day: string): { start: string; end: string } {
  const start = Date.parse(`${day}T00:00:00Z`);
  return { start: stamp(start), end: stamp(start + DAY_MS) };
}

/** The billing period holding a day: its calendar month (credits are bought, not invoiced, so the month is the convention). */
export function billingPeriod(day: string): { start: string; end: string } {
  const [year, month] = day.split("-").map(Number) as [number, number];
  return { start: stamp(Date.UTC(year, month - 1, 1)), end: stamp(Date.UTC(year, month, 1)) };
}

/** One FOCUS row, by column name. */
export function focusRow(group: UsageGroup, context: FocusContext): Record<string, ExportValue> {
  const vendor = VENDORS[group.vendor] ?? { provider: group.vendor, service: group.vendor };
  const model = group.model ?? "unnamed";
  const sku = `${group.vendor}/${model}`;
  const cost = decimalUsd(group.costMicros);
  const tokens = group.inputTokens + group.outputTokens;
  const charge = chargePeriod(group.day);
  const billing = billingPeriod(group.day);
  const managed = group.billingMode === "managed";
  return {
    // Managed calls are paid from credits this deployment sold; byok and dual calls are invoiced by the
    // vendor on the project's own account, at the list price the record priced them at.
    BilledCost: cost,
    BillingAccountId: context.projectId,
    BillingAccountName: context.projectId,
    BillingCurrency: "USD",
    BillingPeriodEnd: billing.end,
    BillingPeriodStart: billing.start,
    ChargeCategory: "Usage",
    ChargeClass: null,
    ChargeDescription: `${model} calls through ${vendor.service} (${group.billingMode})`,
    ChargeFrequency: "Usage-Based",
    ChargePeriodEnd: charge.end,
    ChargePeriodStart: charge.start,
    ConsumedQuantity: tokens,
    ConsumedUnit: "Tokens",
    // The price plan is the contract; no commitments to amortise (docs/warehouse.md).
    ContractedCost: cost,
    EffectiveCost: cost,
    InvoiceIssuerName: managed ? FOCUS_ISSUER : vendor.provider,
    ListCost: decimalUsd(group.listMicros),
    PricingCategory: "Standard",
    PricingQuantity: tokens,
    PricingUnit: "Tokens",
    ProviderName: vendor.provider,
    PublisherName: vendor.provider,
    ServiceCategory: "AI and Machine Learning",
    ServiceName: vendor.service,
    ServiceSubcategory: "Generative AI",
    SkuId: sku,
    SkuMeter: "Tokens",
    SkuPriceId: group.priceVersion === null ? sku : `${sku}@${group.priceVersion}`,
    x_ProjectId: context.projectId,
    x_KeyId: group.keyId,
    x_KeyName: context.keyNames.get(group.keyId) ?? null,
    x_Vendor: group.vendor,
    x_Model: group.model,
    x_BillingMode: group.billingMode,
    x_PriceVersion: group.priceVersion,
    x_Calls: group.calls,
    x_FailedCalls: group.failedCalls,
    x_UnpricedCalls: group.calls - group.pricedCalls,
    x_InputTokens: group.inputTokens,
    x_OutputTokens: group.outputTokens,
    x_CachedInputTokens: group.cachedInputTokens,
    x_CacheWriteTokens: group.cacheWriteTokens,
    x_ReasoningTokens: group.reasoningTokens,
    x_CostMicros: group.costMicros,
    x_ListMicros: group.listMicros,
    x_ErasedCalls: group.erasedCalls,
  };
}

const FOCUS_CSV_HEADER = `${FOCUS_EXPORT_COLUMNS.join(",")}\r\n`;

/** A FOCUS export body: a JSON array of objects (columns in order), or CSV with its header. */
export function* focusExport(
  format: ExportFormat,
  groups: readonly UsageGroup[],
  context: FocusContext,
): Generator<string> {
  const rows = groups.map((g) => focusRow(g, context));
  if (format === "json") {
    yield rows.length === 0 ? "[]\n" : `[\n${rows.map((r) => JSON.stringify(r)).join(",\n")}\n]\n`;
    return;
  }
  yield FOCUS_CSV_HEADER;
  for (const row of rows) {
    yield `${FOCUS_EXPORT_COLUMNS.map((name) => csvCell(row[name] ?? null, CALLER_TEXT.has(name))).join(",")}\r\n`;
  }
}

/** A group from the aggregate's text cells (adapters/sql/export-query.ts, `usageGroupSql`). */
export function usageGroupFromCells(cells: readonly (string | null | undefined)[]): UsageGroup {
  const text = (i: number) => cells[i] ?? "";
  const count = (i: number) => {
    const value = Number(text(i));
    if (!Number.isSafeInteger(value)) throw new Error(`usage aggregate: '${text(i)}' is not a safe integer`);
    return value;
  };
  return {
    day: text(0),
    vendor: text(1),
    model: text(2) === "" ? null : text(2),
    keyId: text(3),
    billingMode: text(4),
    priceVersion: text(5) === "" ? null : text(5),
    calls: count(6),
    pricedCalls: count(7),
    failedCalls: count(8),
    inputTokens: count(9),
    outputTokens: count(10),
    cachedInputTokens: count(11),
    cacheWriteTokens: count(12),
    reasoningTokens: count(13),
    costMicros: count(14),
    listMicros: count(15),
    erasedCalls: 0,
  };
}

/** A group of erased usage from `erasedUsageGroupSql`'s cells (the same order): all its calls erased. */
export function erasedGroupFromCells(cells: readonly (string | null | undefined)[]): UsageGroup {
  const group = usageGroupFromCells(cells);
  return { ...group, erasedCalls: group.calls };
}
