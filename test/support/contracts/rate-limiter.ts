import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RateLimit } from "../../../lambda/core/model";
import { bucketRule, type RateLimiter } from "../../../lambda/core/rate-limit";

export interface RateLimiterUnderTest {
  /** The limiter of one process. */
  limiter: RateLimiter;
  /** The limiter of another process sharing the same buckets. */
  another(): RateLimiter;
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;
const FREE: RateLimit = { rpm: 60, burst: 100 };

/**
 * The cases every adapter of the rate-limit port (`core/rate-limit.ts`) must pass: a GCRA token bucket
 * per bucket id, shared by every process, at the clock given to `make`.
 */
export function rateLimiterContract(
  name: string,
  make: (clock: () => number) => Promise<RateLimiterUnderTest>,
): void {
  describe(`rate limiter contract: ${name}`, () => {
    let now = T0;
    const clock = () => now;
    let subject: RateLimiterUnderTest;
    beforeAll(async () => {
      subject = await make(clock);
    });
    afterAll(() => subject.close());

    let buckets = 0;
    const newBucket = () => `contract-key-${++buckets}`;

    it("allows the burst, refuses the next, then refills at rpm/60 per second", async () => {
      const limiter = subject.limiter;
      const bucket = newBucket();
      now = T0;
      for (let i = 1; i <= 100; i++) {
        const decision = await limiter.check(bucket, FREE);
        expect(decision).toMatchObject({ allowed: true, limit: 60, remaining: 100 - i });
      }
      expect(await limiter.check(bucket, FREE)).toEqual({
        allowed: false,
        limit: 60,
        remaining: 0,
        reset: T0 / 1000 + 100,
        retryAfterSeconds: 1,
      });

      now = T0 + 999;
      expect((await limiter.check(bucket, FREE)).allowed).toBe(false);
      now = T0 + 1000;
      expect(await limiter.check(bucket, FREE)).toMatchObject({ allowed: true, remaining: 0 });
      expect(await limiter.check(bucket, FREE)).toMatchObject({ allowed: false, retryAfterSeconds: 1 });

      // 30.5 s later the bucket holds 29.5 tokens: this request takes one, 28 whole ones remain.
      now = T0 + 30_500;
      expect(await limiter.check(bucket, FREE)).toMatchObject({ allowed: true, remaining: 28 });

      // Long idle: full again, whatever happened before.
      now = T0 + 3_600_000;
      expect(await limiter.check(bucket, FREE)).toEqual({
        allowed: true,
        limit: 60,
        remaining: 99,
        reset: (T0 + 3_601_000) / 1000,
        retryAfterSeconds: 0,
      });
    });

    it("keeps one bucket per key", async () => {
      const limiter = subject.limiter;
      const tiny = { rpm: 1, burst: 1 };
      const a = newBucket();
      expect((await limiter.check(a, tiny)).allowed).toBe(true);
      expect((await limiter.check(a, tiny)).allowed).toBe(false);
      expect((await limiter.check(newBucket(), tiny)).allowed).toBe(true);
    });

    it("two limiters on two clients share one bucket, in turn and at once", async () => {
      now = T0;
      const first = subject.another();
      const second = subject.another();
      const bucket = newBucket();
      const takeAll = async (limiter: RateLimiter) => {
        let allowed = 0;
        while (allowed <= 100 && (await limiter.check(bucket, FREE)).allowed) allowed++;
        return allowed;
      };
      for (let i = 0; i < 60; i++) expect((await first.check(bucket, FREE)).allowed).toBe(true);
      // The first may hold a few tokens it took ahead of demand (batches are 1/16 of what is left): the
      // second gets the rest, the first its own, and together exactly the burst.
      const second40 = await takeAll(second);
      expect(second40).toBeGreaterThanOrEqual(40 - 100 / 16);
      expect(60 + second40 + (await takeAll(first))).toBe(100);
      expect((await second.check(bucket, FREE)).allowed).toBe(false);

      const together = newBucket();
      const decisions = await Promise.all(
        // 60 per client: within each client's 64 sockets, so no request waits for a connection.
        Array.from({ length: 120 }, (_, i) => (i % 2 ? first : second).check(together, FREE)),
      );
      // Never more than the burst. Tokens one process took ahead of demand and did not use before the
      // burst ended are lost to the other: at most one batch each (1/16 of what was left).
      const allowed = decisions.filter((d) => d.allowed).length;
      expect(allowed).toBeLessThanOrEqual(100);
      expect(allowed).toBeGreaterThanOrEqual(100 - 2 * Math.floor(100 / 16));
    });

    it("matches an exact token bucket for any arrivals spread over two processes", async () => {
      const limiters = [subject.another(), subject.another()];
      await fc.assert(
        fc.asyncProperty(
          fc.record({ rpm: fc.integer({ min: 1, max: 1200 }), burst: fc.integer({ min: 1, max: 8 }) }),
          fc.array(fc.tuple(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 0, max: 1 })), {
            minLength: 1,
            maxLength: 30,
          }),
          async (limit, arrivals) => {
            const bucket = newBucket();
            // The reference: credit in microseconds of refill, capped at burst intervals.
            const { intervalUs } = bucketRule(limit);
            const capacity = limit.burst * intervalUs;
            let credit = capacity;
            let lastUs = T0 * 1000;
            now = T0;
            for (const [delayMs, process] of arrivals) {
              now += delayMs;
              const nowUs = now * 1000;
              credit = Math.min(capacity, credit + (nowUs - lastUs));
              lastUs = nowUs;
              const decision = await (limiters[process] as RateLimiter).check(bucket, limit);
              if (credit >= intervalUs) {
                credit -= intervalUs;
                expect(decision).toEqual({
                  allowed: true,
                  limit: limit.rpm,
                  remaining: Math.floor(credit / intervalUs),
                  reset: Math.ceil((nowUs + capacity - credit) / 1_000_000),
                  retryAfterSeconds: 0,
                });
              } else {
                expect(decision.allowed).toBe(false);
                expect(decision.retryAfterSeconds).toBeGreaterThanOrEqual(1);
              }
            }
          },
        ),
        { numRuns: 40 },
      );
    });
  });
}
