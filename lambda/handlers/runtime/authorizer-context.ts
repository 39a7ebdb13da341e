import type { Context, MiddlewareHandler } from "hono";
import * as z from "zod/mini";
import type { AppEnv } from "../../app/env";
import type { AuthContext } from "../../core/auth";
import { presentedCredentials } from "../../core/credentials";
import { endpointOf } from "../../core/endpoints";
import { ApiError, type ErrorType } from "../../core/errors";
import { PROJECT_ID_PATTERN, TIERS } from "../../core/model";
import { STORE_LEVELS } from "../../core/privacy";

/**
 * The contract between the Lambda authorizer and the functions behind API Gateway. The authorizer's
 * `context` may hold only strings, numbers and booleans, and API Gateway hands numbers on as strings.
 *
 * A granted request carries the caller's identity. A refused one carries the error: a 401 is rendered
 * by the ACCESS_DENIED gateway response from these fields; any other refusal (a valid key restricted to
 * other endpoints: 403) is rendered by the function, because a gateway response has a fixed status.
 */
export type AuthorizerContext = Record<string, string | number>;

export function grantedContext(auth: AuthContext): AuthorizerContext {
  return {
    projectId: auth.projectId,
    keyId: auth.keyId,
    // User text in a header (HTTP_PROXY): percent-encoded, so any name travels as plain ASCII.
    keyName: encodeURIComponent(auth.keyName ?? ""),
    tier: auth.tier,
    rpm: auth.rateLimit.rpm,
    burst: auth.rateLimit.burst,
    store: auth.store,
    // Always present, so that a caller cannot add its own: `*` is every model, 0 no TPM limit.
    models: auth.models?.join(",") ?? "*",
    tpm: auth.tpm ?? 0,
  };
}

/** `errorMessage` is JSON-string-escaped: the gateway substitutes it verbatim into a JSON body. */
export function refusalContext(err: ApiError): AuthorizerContext {
  return {
    errorStatus: err.status,
    errorType: err.type,
    errorCode: err.code,
    errorMessage: JSON.stringify(err.message).slice(1, -1),
  };
}

const text = z.string().check(z.minLength(1));

/** A key's name as `grantedContext` encodes it; a raw `,` (a joined header) or bad escape fails. */
const encodedName = z.string().check(
  z.regex(/^(?:[A-Za-z0-9._~!*'()-]|%[0-9A-F]{2})*$/),
  z.refine((value) => decodedName(value) !== null),
);

function decodedName(value: string): string | null {
  try {
    return decodeURIComponent(value);
  } catch {
    return null;
  }
}

const refusal = z.object({
  errorStatus: z.coerce.number().check(z.minimum(400), z.maximum(499)),
  errorType: text,
  errorCode: text,
  errorMessage: z.string(),
});

// Strict shapes: a value joined from a forwarded header and one the caller sent ("a,b") cannot pass.
const granted = z.object({
  projectId: z.string().check(z.regex(PROJECT_ID_PATTERN)),
  keyId: z.string().check(z.regex(/^[a-z0-9]+$/)),
  keyName: z.optional(encodedName),
  tier: z.enum(TIERS),
  rpm: z.coerce.number().check(z.positive()),
  burst: z.coerce.number().check(z.positive()),
  store: z.enum(STORE_LEVELS),
  models: z.optional(z.string().check(z.regex(/^[A-Za-z0-9._:/@*,-]+$/))),
  tpm: z.optional(z.coerce.number().check(z.nonnegative())),
});

/** The caller, from the authorizer's context; throws the refusal the authorizer decided on. */
export function authFromContext(context: unknown): AuthContext {
  const refused = refusal.safeParse(context);
  if (refused.success) {
    const { errorStatus, errorType, errorCode, errorMessage } = refused.data;
    throw new ApiError(errorStatus, errorType as ErrorType, errorCode, JSON.parse(`"${errorMessage}"`));
  }
  const parsed = granted.safeParse(context);
  // Only a route without the authorizer gets here: fail closed, as a 500 that gets logged.
  if (!parsed.success) throw new Error("The request carries no valid authorizer context.");
  const { projectId, keyId, keyName, tier, rpm, burst, store, models, tpm } = parsed.data;
  return {
    projectId,
    keyId,
    ...(keyName ? { keyName: decodeURIComponent(keyName) } : {}),
    tier,
    rateLimit: { rpm, burst },
    store,
    ...(models === undefined || models === "*" ? {} : { models: models.split(",") }),
    ...(tpm ? { tpm } : {}),
  };
}

interface LambdaBindings {
  event?: { requestContext?: { authorizer?: unknown } };
}

/** The authorizer's context as a Lambda proxy integration hands it over, in the event. */
function eventContext(c: Context<AppEnv>): unknown {
  const env = c.env as LambdaBindings | undefined;
  return env?.event?.requestContext?.authorizer;
}

/** The data API's auth in AWS: the authorizer already verified the key; read what it decided. */
export const authorizerAuth: MiddlewareHandler<AppEnv> = async (c, next) => {
  c.set("auth", authFromContext(eventContext(c)));
  await next();
};

/**
 * Behind an HTTP_PROXY integration (the proxy functions' URLs) the event carries no authorizer
 * context: API Gateway maps each context field into a request header (lib/api.ts), and the function
 * trusts those headers only on requests that carry the origin secret. A mapped header replaces one the
 * caller sent under the same name. A field the context lacks can still be sent by the caller, which
 * cannot hurt anyone else: a granted context has every identity field, and a refusal wins over identity.
 */
export const CONTEXT_FIELDS: readonly string[] = [
  ...Object.keys(granted.shape),
  ...Object.keys(refusal.shape),
];

/** `projectId` -> `x-dmt-auth-project-id`. */
export function contextHeader(field: string): string {
  return `x-dmt-auth-${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

/**
 * The proxy functions' auth in AWS: the authorizer's decision from the event when API Gateway invoked
 * the function (`dmt:proxyIntegration=lambda-stream`), else from the forwarded context headers (a
 * function URL's events never carry an authorizer context).
 */
export const forwardedAuth: MiddlewareHandler<AppEnv> = async (c, next) => {
  const context: AuthorizerContext = {};
  for (const field of CONTEXT_FIELDS) {
    const value = c.req.header(contextHeader(field));
    if (value) context[field] = value;
  }
  const auth = authFromContext(eventContext(c) ?? context);
  // The vendor half of a dual key never enters the authorizer's context (contexts can end up in
  // execution logs): it is read from the request the authorizer saw, forwarded as is.
  const { vendorKey } = presentedCredentials({
    header: (name) => c.req.header(name),
    query: (name) => c.req.query(name),
    geminiFamily: endpointOf(c.req.path)?.startsWith("gemini:") ?? false,
  });
  c.set("auth", vendorKey === undefined ? auth : { ...auth, vendorKey });
  await next();
};
