import { describe, expect, it } from "vitest";
import {
  allowedDecision,
  bucketRule,
  deniedDecision,
  rateLimitError,
  rateLimitHeaders,
  rateShardCount,
  rateShardId,
  rateShardLimit,
} from "../../../lambda/core/rate-limit";

const FREE = { rpm: 60, burst: 100 };
const NOW_US = 1_700_000_000_000_000;

describe("bucketRule", () => {
  it("refills one request every 60/rpm seconds and lets tat run burst-1 intervals ahead", () => {
    expect(bucketRule(FREE)).toEqual({ intervalUs: 1_000_000, toleranceUs: 99_000_000 });
    expect(bucketRule({ rpm: 600, burst: 1000 })).toEqual({ intervalUs: 100_000, toleranceUs: 99_900_000 });
    expect(bucketRule({ rpm: 7, burst: 1 })).toEqual({ intervalUs: 8_571_429, toleranceUs: 0 });
  });
});

describe("decisions", () => {
  it("a fresh bucket's first request leaves burst-1 and is full again one interval later", () => {
    expect(allowedDecision(FREE, NOW_US + 1_000_000, NOW_US)).toEqual({
      allowed: true,
      limit: 60,
      remaining: 99,
      reset: 1_700_000_001,
      retryAfterSeconds: 0,
    });
  });

  it("the last token leaves 0 remaining", () => {
    expect(allowedDecision(FREE, NOW_US + 100_000_000, NOW_US).remaining).toBe(0);
  });

  it("an exhausted bucket says when one request is available and when it is full", () => {
    expect(deniedDecision(FREE, NOW_US + 100_000_000, NOW_US)).toEqual({
      allowed: false,
      limit: 60,
      remaining: 0,
      reset: 1_700_000_100,
      retryAfterSeconds: 1,
    });
    // Half an interval later the wait rounds up to whole seconds, and is never 0.
    expect(deniedDecision(FREE, NOW_US + 100_000_000, NOW_US + 500_000).retryAfterSeconds).toBe(1);
    expect(deniedDecision({ rpm: 6, burst: 1 }, NOW_US + 10_000_000, NOW_US).retryAfterSeconds).toBe(10);
  });
});

describe("headers and error", () => {
  it("every response carries the three headers; a refusal adds Retry-After", () => {
    const allowed = allowedDecision(FREE, NOW_US + 1_000_000, NOW_US);
    // 99 tokens are left in the bucket of 100, but never more remain than the limit says.
    expect(allowed.remaining).toBe(99);
    expect(rateLimitHeaders(allowed)).toEqual({
      "X-RateLimit-Limit": "60",
      "X-RateLimit-Remaining": "60",
      "X-RateLimit-Reset": "1700000001",
    });
    const denied = deniedDecision(FREE, NOW_US + 105_000_000, NOW_US);
    expect(rateLimitHeaders(denied)).toEqual({
      "X-RateLimit-Limit": "60",
      "X-RateLimit-Remaining": "0",
      "X-RateLimit-Reset": "1700000105",
      "Retry-After": "6",
    });
  });

  it("remaining counts down from the limit once the bucket holds less than it", () => {
    const limit = { rpm: 60, burst: 100 };
    const low = allowedDecision(limit, NOW_US + 60_000_000, NOW_US); // 60 s of tokens used: 40 left
    expect(low.remaining).toBeLessThan(60);
    expect(rateLimitHeaders(low)["X-RateLimit-Remaining"]).toBe(String(low.remaining));
  });

  it("the 429 is the spec's error with the headers", () => {
    const err = rateLimitError(deniedDecision(FREE, NOW_US + 105_000_000, NOW_US));
    expect(err.status).toBe(429);
    expect(err.toBody().error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
    expect(err.headers).toMatchObject({ "Retry-After": "6", "X-RateLimit-Remaining": "0" });
  });
});

describe("rate-limit shards", () => {
  it("keeps the tiers' buckets one item and splits a large limit one shard per 3,000 rpm, up to the host's most", () => {
    expect(rateShardCount(FREE, 16)).toBe(1);
    expect(rateShardCount({ rpm: 600, burst: 1000 }, 16)).toBe(1);
    expect(rateShardCount({ rpm: 6000, burst: 10000 }, 16)).toBe(2);
    expect(rateShardCount({ rpm: 120_000, burst: 10_000 }, 16)).toBe(16);
    expect(rateShardCount({ rpm: 120_000, burst: 10_000 }, 1)).toBe(1);
    // Never more shards than the burst: each shard keeps at least one request.
    expect(rateShardCount({ rpm: 120_000, burst: 5 }, 16)).toBe(5);
  });

  it("splits the rpm and the burst so the shards sum to the key's exactly", () => {
    for (const limit of [
      { rpm: 120_000, burst: 10_000 },
      { rpm: 60_001, burst: 9_999 },
      { rpm: 6000, burst: 10000 },
    ]) {
      const count = rateShardCount(limit, 16);
      const parts = Array.from({ length: count }, (_, k) => rateShardLimit(limit, count, k));
      expect(parts.reduce((sum, p) => sum + p.rpm, 0)).toBe(limit.rpm);
      expect(parts.reduce((sum, p) => sum + p.burst, 0)).toBe(limit.burst);
      for (const p of parts) expect(p.burst).toBeGreaterThanOrEqual(1);
    }
  });

  it("names each shard after the key's bucket", () => {
    expect(rateShardId("key:abc", 3)).toBe("key:abc#s3");
  });
});
