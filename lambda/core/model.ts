/** The domain records the store keeps. Times are epoch milliseconds. */
import type { KeyStoreLevel, PrivacySettings } from "./privacy";

export const TIERS = ["free", "pro", "enterprise"] as const;
export type Tier = (typeof TIERS)[number];

export interface RateLimit {
  /** Requests per minute: the refill rate of the token bucket. */
  rpm: number;
  /** Bucket capacity: how many requests may arrive at once. */
  burst: number;
}

/** Spec limits per tier. Enterprise is custom: set on the project or key, with this as the default. */
export const TIER_LIMITS: Record<Tier, RateLimit> = {
  free: { rpm: 60, burst: 100 },
  pro: { rpm: 600, burst: 1000 },
  enterprise: { rpm: 6000, burst: 10000 },
};

/** A project, with what its records keep and for how long (core/privacy.ts). */
export interface Project extends PrivacySettings {
  projectId: string;
  tier: Tier;
  createdAt: number;
  /** A custom limit for every key of the project (enterprise). */
  rateLimit?: RateLimit;
}

export interface ApiKeyRecord {
  keyId: string;
  projectId: string;
  name: string;
  /** SHA-256 (hex) of the secret; the secret itself is never stored. */
  secretHash: string;
  createdAt: number;
  lastUsedAt?: number;
  expiresAt?: number;
  revoked: boolean;
  revokedAt?: number;
  /** Endpoint patterns this key may call (see endpoints.ts); absent = every endpoint. */
  allow?: string[];
  /** Per-key override of the project's rate limit. */
  rateLimit?: RateLimit;
  /** Keeps less than the project's level for this key's calls (core/privacy.ts). */
  store?: KeyStoreLevel;
  /** Model names or `*` globs this key may call (core/budgets.ts); absent = every model. */
  models?: string[];
  /** Tokens per minute this key may use; absent = no limit. */
  tpm?: number;
}

export function isTier(value: unknown): value is Tier {
  return typeof value === "string" && (TIERS as readonly string[]).includes(value);
}

export function effectiveRateLimit(project: Project, key: ApiKeyRecord): RateLimit {
  return key.rateLimit ?? project.rateLimit ?? TIER_LIMITS[project.tier];
}

export const PROJECT_ID_PATTERN = /^[a-z0-9][a-z0-9-]{1,62}$/;
