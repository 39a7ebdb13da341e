/**
 * The part of JSON Schema (2020-12) that docs/events.md uses, enough to validate an event against its
 * documented schema: `type` (one or a list), `const`, `enum`, `pattern`, `minimum`, `maximum`,
 * `properties`, `required`, `additionalProperties: false` and `items`. Any other keyword is refused, so
 * a schema cannot say more than this checks.
 */
export interface JsonSchema {
  $schema?: string;
  title?: string;
  description?: string;
  type?: string | string[];
  const?: unknown;
  enum?: unknown[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean;
  items?: JsonSchema;
}

const KEYWORDS = new Set([
  "$schema",
  "title",
  "description",
  "type",
  "const",
  "enum",
  "pattern",
  "minimum",
  "maximum",
  "properties",
  "required",
  "additionalProperties",
  "items",
]);

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

/** The ways `value` breaks `schema`, each with its path; empty when it validates. */
export function validate(schema: JsonSchema, value: unknown, path = "$"): string[] {
  const unknown = Object.keys(schema).filter((keyword) => !KEYWORDS.has(keyword));
  if (unknown.length > 0)
    return [`${path}: the schema uses ${unknown.join(", ")}, which this validator does not check`];
  const errors: string[] = [];
  const actual = typeOf(value);
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const fits = types.some((type) => type === actual || (type === "number" && actual === "integer"));
    if (!fits) return [`${path}: ${actual}, not ${types.join(" or ")}`];
  }
  if ("const" in schema && JSON.stringify(value) !== JSON.stringify(schema.const)) {
    errors.push(`${path}: not ${JSON.stringify(schema.const)}`);
  }
  if (schema.enum && !schema.enum.some((option) => JSON.stringify(option) === JSON.stringify(value))) {
    errors.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  }
  if (
    typeof value === "string" &&
    schema.pattern !== undefined &&
    !new RegExp(schema.pattern, "u").test(value)
  ) {
    errors.push(`${path}: ${JSON.stringify(value)} does not match ${schema.pattern}`);
  }
  if (typeof value === "number") {
    if (schema.minimum !== undefined && value < schema.minimum)
      errors.push(`${path}: below ${schema.minimum}`);
    if (schema.maximum !== undefined && value > schema.maximum)
      errors.push(`${path}: above ${schema.maximum}`);
  }
  if (actual === "object") {
    const object = value as Record<string, unknown>;
    for (const name of schema.required ?? []) {
      if (!(name in object)) errors.push(`${path}.${name}: missing`);
    }
    for (const [name, member] of Object.entries(object)) {
      const property = schema.properties?.[name];
      if (property) errors.push(...validate(property, member, `${path}.${name}`));
      else if (schema.additionalProperties === false) errors.push(`${path}.${name}: not in the schema`);
    }
  }
  if (Array.isArray(value) && schema.items) {
    value.forEach((item, i) => {
      errors.push(...validate(schema.items as JsonSchema, item, `${path}[${i}]`));
    });
  }
  return errors;
}
