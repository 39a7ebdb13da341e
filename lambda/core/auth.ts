import type { PresentedCredentials } from "./credentials";
import { endpointAllowed } from "./endpoints";
import { errors } from "./errors";
import { parseKey, secretMatches } from "./keys";
import { effectiveRateLimit, type RateLimit, type Tier } from "./model";
import type { KeyLookup } from "./ports";
import { keyStoreLevel, type StoreLevel } from "./privacy";

/** Who is calling, once authenticated. The same shape travels as the Lambda authorizer's context. */
export interface AuthContext {
  projectId: string;
  keyId: string;
  /**
   * The key's name, for messages that name the key beside its id; the Lambda authorizer's context
   * carries it percent-encoded (handlers/runtime/authorizer-context.ts).
   */
  keyName?: string;
  tier: Tier;
  rateLimit: RateLimit;
  /** What the key's calls may store: the project's level, lowered by the key's. */
  store: StoreLevel;
  /** The key's model allowlist (globs) and tokens-per-minute limit, when it has them. */
  models?: string[];
  tpm?: number;
  /** The vendor half of a dual key: used for this request only, never stored or logged. */
  vendorKey?: string;
}

const INVALID = "Invalid API key provided.";

/**
 * Verifies presented credentials for an endpoint. Unknown, malformed and wrong-secret keys all get the
 * same message; revoked and expired keys say so only once the caller has proven it holds the secret.
 */
export async function authenticate(
  credentials: PresentedCredentials,
  endpoint: string,
  keys: KeyLookup,
  now: number,
): Promise<AuthContext> {
  const parsed = parseKey(credentials.serviceKey);
  if (!parsed) throw errors.invalidApiKey(INVALID);
  const found = await keys.lookup(parsed.keyId);
  if (!found || !secretMatches(parsed.secret, found.key.secretHash)) throw errors.invalidApiKey(INVALID);
  const { key, project } = found;
  if (key.revoked) throw errors.invalidApiKey("This API key has been revoked.");
  if (key.expiresAt !== undefined && key.expiresAt <= now)
    throw errors.invalidApiKey("This API key has expired.");
  if (!endpointAllowed(key.allow, endpoint)) throw errors.insufficientPermissions(endpoint);
  const context: AuthContext = {
    projectId: project.projectId,
    keyId: key.keyId,
    keyName: key.name,
    tier: project.tier,
    rateLimit: effectiveRateLimit(project, key),
    store: keyStoreLevel(project, key),
  };
  if (key.models) context.models = key.models;
  if (key.tpm !== undefined) context.tpm = key.tpm;
  if (credentials.vendorKey !== undefined) context.vendorKey = credentials.vendorKey;
  return context;
}
