import { readFileSync } from "node:fs";

/**
 * FOCUS 1.2's column definitions, as `test/fixtures/focus-1.2-columns.json` holds them (read from the
 * spec's `specification/columns/*.md` at its tag v1.2: feature level, nullability, data type, allowed
 * values), and a checker of export rows against them and the cross-column rules that apply to usage
 * rows. Returns every problem found, so a failing test names them all.
 */
interface ColumnSpec {
  featureLevel: string;
  allowsNulls: boolean;
  dataType: string;
  allowedValues?: (string | [string, string])[];
}

export const FOCUS_SPEC = JSON.parse(
  readFileSync(new URL("../fixtures/focus-1.2-columns.json", import.meta.url), "utf8"),
) as { version: string; columns: Record<string, ColumnSpec> };

type Cell = string | number | boolean | null;
export type FocusRow = Record<string, Cell>;

/** NumericFormat: an integer, a decimal, or E notation with only a negative exponent signed. */
const NUMERIC = /^-?\d+(\.\d+)?(E-?\d+)?$/;
/** DateTimeFormat: extended ISO 8601 in UTC, seconds, `Z`. */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const CURRENCY = /^[A-Z]{3}$/;
const DAY_MS = 86_400_000;

export function focusProblems(columns: readonly string[], rows: readonly FocusRow[]): string[] {
  const problems: string[] = [];
  const spec = FOCUS_SPEC.columns;
  for (const [id, column] of Object.entries(spec)) {
    if (column.featureLevel === "Mandatory" && !columns.includes(id))
      problems.push(`mandatory ${id} missing`);
  }
  let customSeen = false;
  for (const name of columns) {
    if (name.startsWith("x_")) customSeen = true;
    else if (!spec[name]) problems.push(`${name} is neither a FOCUS column nor x_-prefixed`);
    else if (customSeen) problems.push(`FOCUS column ${name} after custom columns`);
  }
  rows.forEach((row, i) => {
    const at = (what: string) => problems.push(`row ${i}: ${what}`);
    for (const name of columns) {
      const value = row[name] ?? null;
      if (value === "") at(`${name} is an empty string (FOCUS uses null)`);
      const column = spec[name];
      if (!column) continue;
      if (value === null) {
        if (!column.allowsNulls) at(`${name} is null`);
        continue;
      }
      const text = String(value);
      if (column.dataType === "Decimal" && !NUMERIC.test(text)) at(`${name} '${text}' is not NumericFormat`);
      if (column.dataType === "Date/Time" && !DATE_TIME.test(text))
        at(`${name} '${text}' is not DateTimeFormat`);
      if (column.dataType === "String" && typeof value !== "string") at(`${name} is not a string`);
      const allowed = column.allowedValues?.map((v) => (Array.isArray(v) ? v[1] : v));
      if (allowed && !allowed.includes(text)) at(`${name} '${text}' is not an allowed value`);
    }
    // Cross-column rules of the definitions, as they apply to Usage rows that correct nothing.
    const usage = row.ChargeCategory === "Usage" && row.ChargeClass === null;
    if (usage) {
      for (const name of ["SkuId", "SkuPriceId", "PricingQuantity", "PricingCategory", "ConsumedQuantity"]) {
        if (columns.includes(name) && (row[name] ?? null) === null) at(`${name} is null on a usage row`);
      }
    }
    if (columns.includes("ConsumedUnit") && (row.ConsumedUnit === null) !== (row.ConsumedQuantity === null)) {
      at("ConsumedUnit and ConsumedQuantity must be null together");
    }
    if ((row.PricingUnit === null) !== (row.PricingQuantity === null)) {
      at("PricingUnit and PricingQuantity must be null together");
    }
    if (row.SkuMeter !== undefined && row.SkuId === null && row.SkuMeter !== null)
      at("SkuMeter without SkuId");
    const subcategory = spec.ServiceSubcategory?.allowedValues?.find(
      (v) => Array.isArray(v) && v[1] === row.ServiceSubcategory,
    );
    if (row.ServiceSubcategory !== undefined && subcategory?.[0] !== row.ServiceCategory) {
      at(`ServiceSubcategory '${row.ServiceSubcategory}' is not under '${row.ServiceCategory}'`);
    }
    if (!CURRENCY.test(String(row.BillingCurrency))) at("BillingCurrency is not ISO 4217");
    // Periods: inclusive start, exclusive end; a daily charge period is one whole UTC day inside its billing period.
    const chargeStart = Date.parse(String(row.ChargePeriodStart));
    const chargeEnd = Date.parse(String(row.ChargePeriodEnd));
    if (chargeStart % DAY_MS !== 0 || chargeEnd - chargeStart !== DAY_MS) {
      at(`charge period ${row.ChargePeriodStart} to ${row.ChargePeriodEnd} is not one UTC day`);
    }
    const billingStart = Date.parse(String(row.BillingPeriodStart));
    const billingEnd = Date.parse(String(row.BillingPeriodEnd));
    if (!(billingStart <= chargeStart && chargeEnd <= billingEnd))
      at("charge period outside the billing period");
    if (row.ChargeCategory === "Purchase" && row.ChargeFrequency === "Usage-Based") {
      at("a purchase is not Usage-Based");
    }
  });
  return problems;
}

/** A strict RFC 4180 reader: the header and the rows, the empty cell read as null. */
export function parseFocusCsv(text: string): { columns: string[]; rows: FocusRow[] } {
  const lines: string[][] = [];
  let line: string[] = [];
  let cell = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        cell += '"';
        i++;
      } else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      line.push(cell);
      cell = "";
    } else if (c === "\r" && text[i + 1] === "\n") {
      line.push(cell);
      lines.push(line);
      line = [];
      cell = "";
      i++;
    } else cell += c;
  }
  const [columns = [], ...data] = lines;
  const rows = data.map((cells) =>
    Object.fromEntries(columns.map((name, i) => [name, cells[i] === "" ? null : (cells[i] ?? null)])),
  );
  return { columns, rows };
}
