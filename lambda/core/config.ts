// zod/mini, not zod: the full build adds ~450 KB to every bundle, the mini one ~20 KB.
import * as z from "zod/mini";

/**
 * The one configuration mechanism of every host and function: an environment checked against a schema
 * once, at start (a Lambda cold start, the local server's launch). A bad or missing value fails naming
 * its variable and what it must be (the helpers below carry the words: zod/mini has none of its own).
 * The schemas live beside their hosts: `handlers/runtime/config.ts` (one per Lambda function),
 * `local/config.ts` (the embedded host).
 */
export function parseEnv<T extends z.ZodMiniType>(
  schema: T,
  env: Record<string, string | undefined>,
): z.infer<T> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`Invalid configuration: ${issue?.path.join(".")}: ${issue?.message}`);
  }
  return parsed.data;
}

/** A non-empty string. */
export const text = z.string({ error: "must be set" }).check(z.minLength(1, { error: "must not be empty" }));

/** An http or https URL (an endpoint or an upstream). */
export const httpUrl = z.url({ protocol: /^https?$/, error: "must be an http or https URL" });

/** One of a few words, saying which when it is not. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, { error: `must be one of ${values.join(", ")}` });
}

/** A number from an environment string, within bounds, with its default when unset. */
export function numberIn(min: number, max: number, fallback: number) {
  const error = `must be a number from ${min} to ${max}`;
  return z._default(
    z.coerce.number({ error }).check(z.minimum(min, { error }), z.maximum(max, { error })),
    fallback,
  );
}

/** The same, whole numbers only. */
export function wholeNumberIn(min: number, max: number, fallback: number) {
  const error = `must be a whole number from ${min} to ${max}`;
  return z._default(
    z.coerce.number({ error }).check(z.int({ error }), z.minimum(min, { error }), z.maximum(max, { error })),
    fallback,
  );
}
