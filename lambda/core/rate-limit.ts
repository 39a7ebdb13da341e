import { ApiError, errors } from "./errors";
import type { RateLimit } from "./model";

/**
 * Per-key rate limits: a token bucket of capacity `burst` refilled at `rpm / 60` tokens a second,
 * kept as GCRA (the generic cell rate algorithm), which is the same bucket stored as one number:
 * the theoretical arrival time `tat`, the moment the bucket will be full again. With interval
 * T = 60 s / rpm, the bucket holds `burst - (tat - now) / T` tokens (all of them when tat <= now);
 * a request is allowed when at least one token is left, i.e. `tat <= now + (burst - 1) T`, and takes it
 * by setting `tat = max(tat, now) + T`. `tat` only ever grows, which makes a stale copy of it a safe
 * lower bound. Times are integer microseconds.
 */

export interface RateLimitDecision {
  allowed: boolean;
  /** Requests per minute, for `X-RateLimit-Limit`. */
  limit: number;
  /** Whole requests available now (after this one), for `X-RateLimit-Remaining`. */
  remaining: number;
  /** Unix seconds when the bucket is full again, for `X-RateLimit-Reset`. */
  reset: number;
  /** 0 when allowed; else whole seconds until one request is available, for `Retry-After`. */
  retryAfterSeconds: number;
}

/** The rate-limit port: state shared by every process (DynamoDB), never a per-process counter alone. */
export interface RateLimiter {
  check(bucketId: string, limit: RateLimit): Promise<RateLimitDecision>;
}

export interface BucketRule {
  /** T: microseconds between two requests at the sustained rate. */
  intervalUs: number;
  /** (burst - 1) T: how far `tat` may run ahead of now for a request to pass. */
  toleranceUs: number;
}

export function bucketRule(limit: RateLimit): BucketRule {
  const intervalUs = Math.round(60_000_000 / limit.rpm);
  return { intervalUs, toleranceUs: (limit.burst - 1) * intervalUs };
}

/** A key's bucket is split in one shard per this many requests a minute of its limit (up to the host's most). */
export const RPM_PER_SHARD = 3_000;

/**
 * How many items a key's bucket is split over when the host allows `maxShards`: one per RPM_PER_SHARD
 * of the limit (a shard then takes at most 50 requests a second, one or two writes each), never more
 * than the burst, so a tier's small bucket stays one item and exact. Thousands of Lambda containers each
 * take a token per call: on one item a key at 1,000 calls a second is DynamoDB's 1,000 writes a second.
 */
export function rateShardCount(limit: RateLimit, maxShards: number): number {
  return Math.max(
    1,
    Math.min(Math.floor(maxShards), Math.floor(limit.rpm / RPM_PER_SHARD), Math.floor(limit.burst)),
  );
}

/** Shard k's part of the limit: the parts' rpm and burst sum to the key's exactly. */
export function rateShardLimit(limit: RateLimit, shards: number, k: number): RateLimit {
  const part = (total: number) => Math.floor(total / shards) + (k < total % shards ? 1 : 0);
  return { rpm: part(limit.rpm), burst: part(limit.burst) };
}

/** Shard k's bucket id (the key's own id when the bucket is one item). */
export function rateShardId(bucketId: string, k: number): string {
  return `${bucketId}#s${k}`;
}

/**
 * The decision for an allowed request, given `tat` after it took its token, and the tokens this process
 * took ahead of demand and has not used yet (they are still the key's to spend: see the DynamoDB adapter).
 */
export function allowedDecision(
  limit: RateLimit,
  tatUs: number,
  nowUs: number,
  unusedTokens = 0,
): RateLimitDecision {
  const { intervalUs } = bucketRule(limit);
  return {
    allowed: true,
    limit: limit.rpm,
    remaining:
      Math.max(0, Math.floor((nowUs + limit.burst * intervalUs - tatUs) / intervalUs)) + unusedTokens,
    reset: Math.ceil((tatUs - unusedTokens * intervalUs) / 1_000_000),
    retryAfterSeconds: 0,
  };
}

/** The decision for a refused request, given the bucket's `tat`. */
export function deniedDecision(limit: RateLimit, tatUs: number, nowUs: number): RateLimitDecision {
  const { toleranceUs } = bucketRule(limit);
  return {
    allowed: false,
    limit: limit.rpm,
    remaining: 0,
    reset: Math.ceil(tatUs / 1_000_000),
    retryAfterSeconds: Math.max(1, Math.ceil((tatUs - toleranceUs - nowUs) / 1_000_000)),
  };
}

/**
 * The headers every response carries, success or error; `Retry-After` when refused. `Limit` is the
 * requests per minute; `Remaining` what may be sent now, at most that: the bucket may hold more (its
 * burst), but a remaining count above the limit reads as a contradiction.
 */
export function rateLimitHeaders(decision: RateLimitDecision): Record<string, string> {
  return {
    "X-RateLimit-Limit": String(decision.limit),
    "X-RateLimit-Remaining": String(Math.min(decision.remaining, decision.limit)),
    "X-RateLimit-Reset": String(decision.reset),
    ...(decision.allowed ? {} : { "Retry-After": String(decision.retryAfterSeconds) }),
  };
}

/** The 429 for a refused request, with the rate-limit headers. */
export function rateLimitError(decision: RateLimitDecision): ApiError {
  const base = errors.rateLimited(decision.retryAfterSeconds);
  return new ApiError(base.status, base.type, base.code, base.message, rateLimitHeaders(decision));
}
