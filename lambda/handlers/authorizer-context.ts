import type { MiddlewareHandler } from "hono";
import * as z from "zod/mini";
import type { AppEnv } from "../app/env";
import type { AuthContext } from "../core/auth";
import { ApiError, type ErrorType } from "../core/errors";
import { TIERS } from "../core/model";

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
    tier: auth.tier,
    rpm: auth.rateLimit.rpm,
    burst: auth.rateLimit.burst,
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

const refusal = z.object({
  errorStatus: z.coerce.number().check(z.minimum(400), z.maximum(499)),
  errorType: text,
  errorCode: text,
  errorMessage: z.string(),
});

const granted = z.object({
  projectId: text,
  keyId: text,
  tier: z.enum(TIERS),
  rpm: z.coerce.number().check(z.positive()),
  burst: z.coerce.number().check(z.positive()),
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
  const { projectId, keyId, tier, rpm, burst } = parsed.data;
  return { projectId, keyId, tier, rateLimit: { rpm, burst } };
}

interface LambdaBindings {
  event?: { requestContext?: { authorizer?: unknown } };
}

/** The data API's auth in AWS: the authorizer already verified the key; read what it decided. */
export const authorizerAuth: MiddlewareHandler<AppEnv> = async (c, next) => {
  const env = c.env as LambdaBindings | undefined;
  c.set("auth", authFromContext(env?.event?.requestContext?.authorizer));
  await next();
};
