import type { MiddlewareHandler } from "hono";
import { type JWTPayload, type JWTVerifyGetKey, errors as jose, jwtVerify } from "jose";
import { ApiError } from "../../core/errors";
import { KEY_PREFIX } from "../../core/keys";
import type { Membership } from "../../core/members";

/** A signed-in dashboard user, from a verified access token. */
export interface DashboardUser {
  /** The token's `sub`: the identity provider's stable user id. */
  userId: string;
  /** In the operators group (Cognito's `cognito:groups` claim; the local provider sets it too). */
  operator: boolean;
}

declare module "hono" {
  interface ContextVariableMap {
    dashboardUser: DashboardUser;
    membership: Membership;
  }
}

export interface TokenVerifierConfig {
  issuer: string;
  /** Required `aud` (RFC 9068 access tokens, as the local provider issues). Cognito's have no `aud`. */
  audience?: string;
  /** Required `client_id` claim (Cognito access tokens and RFC 9068 ones carry it). */
  clientId?: string;
  /** The provider's public keys: `createRemoteJWKSet(jwks_uri)` in AWS, the local key set locally. */
  keys: JWTVerifyGetKey;
  clock?: () => number;
}

export type TokenVerifier = (token: string) => Promise<DashboardUser>;

const REALM = 'Bearer realm="dmt-dashboard"';

function invalidToken(message: string): ApiError {
  return new ApiError(401, "authentication_error", "invalid_token", message, {
    "WWW-Authenticate": `${REALM}, error="invalid_token"`,
  });
}

function missingToken(): ApiError {
  return new ApiError(
    401,
    "authentication_error",
    "missing_token",
    "Sign in to the dashboard: send 'Authorization: Bearer <access token>'.",
    { "WWW-Authenticate": REALM },
  );
}

// Failures of the provider's key endpoint are ours to fix, not the caller's: they stay 5xx.
const OUR_FAILURES = new Set(["ERR_JWKS_TIMEOUT", "ERR_JWKS_INVALID"]);
const ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"];

/**
 * Verifies an access token: signature against the provider's keys (asymmetric algorithms only),
 * issuer, audience and/or client, and expiry. ID tokens fail the audience/client check.
 */
export function tokenVerifier(config: TokenVerifierConfig): TokenVerifier {
  if (config.audience === undefined && config.clientId === undefined) {
    throw new Error("a token verifier needs an audience or a client id to check");
  }
  const clock = config.clock ?? Date.now;
  return async (token) => {
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, config.keys, {
        issuer: config.issuer,
        ...(config.audience !== undefined ? { audience: config.audience } : {}),
        algorithms: ALGORITHMS,
        currentDate: new Date(clock()),
        requiredClaims: ["exp", "sub"],
      }));
    } catch (err) {
      if (!(err instanceof jose.JOSEError) || OUR_FAILURES.has(err.code)) throw err;
      if (err instanceof jose.JWTExpired) throw invalidToken("The session has expired; sign in again.");
      throw invalidToken("The access token is invalid; sign in again.");
    }
    if (config.clientId !== undefined && payload.client_id !== config.clientId) {
      throw invalidToken("The access token was issued to another client; sign in again.");
    }
    const sub = payload.sub;
    if (typeof sub !== "string" || sub.length === 0 || sub.length > 255) {
      throw invalidToken("The access token has no valid subject.");
    }
    const groups = payload["cognito:groups"];
    return { userId: sub, operator: Array.isArray(groups) && groups.includes("operators") };
  };
}

/**
 * Authenticates the dashboard user from `Authorization: Bearer <access token>`. Service keys are
 * refused: the dashboard API is for people signed in through the identity provider, never for `dmt_`
 * keys (and the data API, in turn, only takes `dmt_` keys).
 */
export function requireUser(verify: TokenVerifier): MiddlewareHandler {
  return async (c, next) => {
    const authorization = c.req.header("authorization");
    if (authorization === undefined || authorization === "") throw missingToken();
    if (authorization.includes(",")) throw invalidToken("Send exactly one Authorization header.");
    if (authorization.slice(0, 7).toLowerCase() !== "bearer ") {
      throw invalidToken("The Authorization header must be 'Bearer <access token>'.");
    }
    const token = authorization.slice(7);
    if (token.startsWith(KEY_PREFIX)) {
      throw invalidToken(
        "API keys are not accepted by the dashboard API; sign in to the dashboard. Use API keys with the proxy and /api/v1.",
      );
    }
    c.set("dashboardUser", await verify(token));
    await next();
  };
}
