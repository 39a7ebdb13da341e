/** Reading vendor JSON without trusting its shape: a missing or odd field reads as absent. */
export type JsonObject = Record<string, unknown>;

export function asObject(value: unknown): JsonObject | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as JsonObject)
    : undefined;
}

export function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

/** A token count: a finite non-negative number, else 0. */
export function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : 0;
}

export function asString(value: unknown): string | undefined {
  return typeof value === "string" ? value : undefined;
}

/** JSON.parse that answers undefined for text that is not JSON. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Sets a field only when the value is present, so assembled messages carry no `undefined` noise. */
export function setIfDefined(target: JsonObject, key: string, value: unknown): void {
  if (value !== undefined && value !== null) target[key] = value;
}
