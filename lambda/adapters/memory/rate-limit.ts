import type { RateLimit } from "../../core/model";
import {
  allowedDecision,
  bucketRule,
  deniedDecision,
  type RateLimitDecision,
  type RateLimiter,
} from "../../core/rate-limit";
import { MemoryTable } from "./table";

/**
 * GCRA buckets (core/rate-limit.ts) in memory: one `tat` per bucket, taken one token at a time by one
 * atomic update, at the injected clock. It leases nothing ahead of demand (the DynamoDB adapter does,
 * to spare round trips): every process sharing this object shares every token, so it is the exact
 * bucket the DynamoDB adapter approximates within its stated bounds.
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new MemoryTable<number>();

  constructor(private readonly clock: () => number = Date.now) {}

  async check(bucketId: string, limit: RateLimit): Promise<RateLimitDecision> {
    const nowUs = Math.round(this.clock() * 1000);
    const { intervalUs, toleranceUs } = bucketRule(limit);
    let seen = nowUs;
    const taken = await this.buckets.update(bucketId, (tat) => {
      seen = tat ?? nowUs;
      return seen <= nowUs + toleranceUs ? Math.max(seen, nowUs) + intervalUs : undefined;
    });
    return taken === undefined ? deniedDecision(limit, seen, nowUs) : allowedDecision(limit, taken, nowUs);
  }
}
