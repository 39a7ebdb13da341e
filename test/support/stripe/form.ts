/**
 * Stripe's API takes `application/x-www-form-urlencoded` bodies with bracketed keys
 * (`metadata[project]=p`, `line_items[0][price_data][unit_amount]=500`), as the official SDK encodes
 * them. This reads one into nested objects; an object whose keys are all indices becomes an array.
 */
export type FormValue = string | FormObject | FormValue[];
export interface FormObject {
  [key: string]: FormValue;
}

export function parseStripeForm(body: string): FormObject {
  const root: FormObject = {};
  for (const [rawKey, value] of new URLSearchParams(body)) {
    const path = rawKey.split("[").map((part, i) => (i === 0 ? part : part.replace(/\]$/, "")));
    let node: FormObject = root;
    path.forEach((part, i) => {
      const key = part === "" ? String(Object.keys(node).length) : part;
      if (i === path.length - 1) {
        node[key] = value;
        return;
      }
      const next = node[key];
      if (typeof next !== "object" || Array.isArray(next)) node[key] = {};
      node = node[key] as FormObject;
    });
  }
  return arraysOf(root) as FormObject;
}

function arraysOf(value: FormValue): FormValue {
  if (typeof value === "string" || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  const entries = keys.map((k) => [k, arraysOf(value[k] as FormValue)] as const);
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) return entries.map(([, v]) => v);
  return Object.fromEntries(entries);
}

/** A field read as text, or undefined. */
export function text(form: FormObject, key: string): string | undefined {
  const value = form[key];
  return typeof value === "string" ? value : undefined;
}

/** A field read as a nested object (`metadata[...]`), or an empty one. */
export function object(form: FormObject, key: string): FormObject {
  const value = form[key];
  return typeof value === "object" && !Array.isArray(value) ? value : {};
}
