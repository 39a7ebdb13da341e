import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { RateLimit } from "../../core/model";
import {
  allowedDecision,
  type BucketRule,
  bucketRule,
  deniedDecision,
  type RateLimitDecision,
  type RateLimiter,
  rateShardCount,
  rateShardId,
  rateShardLimit,
} from "../../core/rate-limit";
import { readItem } from "./paging";
import type { TableNames } from "./tables";

/**
 * GCRA buckets (core/rate-limit.ts) in DynamoDB, item `{ bucketId, tat, gcAt }`. Tokens are taken with
 * one conditional UpdateItem, computed in the store from the stored `tat`, `n` at a time:
 *   idle  (tat <= now, or no item):  SET tat = :now + n T           IF attribute_not_exists(tat) OR tat <= :now
 *   busy  (now < tat):               SET tat = tat + n T            IF tat > :now AND tat <= :now + (burst - n) T
 * Both are atomic and need no read first. Which one to try comes from the last `tat` this process saw.
 * As `tat` only grows, a failed condition says which case holds: a failed idle update means another
 * request made the bucket busy, so the busy update follows at once; a failed busy update means fewer
 * than n tokens are left, and one read gets `tat` to take what is left or to refuse with its numbers.
 * A `tat` seen beyond now + tol refuses without any round trip (the true one is at least as late).
 * `gcAt` lets DynamoDB TTL delete a bucket an hour after it is full again, when it says no more than a
 * missing item.
 *
 * Leases. A process that sees demand takes several tokens at once and spends them in memory, taking
 * the next batch in the background before they run out, so a warm request does not wait for the store.
 * Every token still comes from the shared bucket, so no number of processes can take more than it
 * holds. What leasing changes, within bounds:
 * - a batch is at most 1/16 of the tokens left (so buckets under 32 tokens never lease, and near the
 *   limit batches shrink to one token) and at most what the process uses in half a lease's lifetime;
 * - unused tokens expire a lease's lifetime (1 s, less for buckets that refill 100 % of their burst in
 *   under 100 s) after their batch: they are lost (other processes may be refused meanwhile), and
 *   tokens spent up to that late let through at most the tokens that one or two lifetimes refill
 *   beyond an exact bucket (2 % of the burst at most);
 * - `X-RateLimit-Remaining` counts the process's unused tokens as the key's: exact with one process.
 *
 * Shards. In standard Lambda a container serves one call at a time, so it sees no demand to lease for
 * and takes one token per call: at 1,000 calls a second of one key, 1,000 writes a second on one item,
 * DynamoDB's limit. Hosts of many processes (runtime/aws.ts) split a key's bucket over up to `shards`
 * items (core/rate-limit.ts `rateShardCount`: one per 3,000 rpm of the limit), each with its share of
 * the rpm and the burst, the shares summing to the key's exactly, so the key never gets more than its
 * bucket. A process takes from its own shard (random) first and from the others in turn only when its
 * own is short: a request is refused only when every shard is, as far as this process knows (a shard
 * whose last seen `tat` is past its tolerance refuses with no round trip). `X-RateLimit-Remaining` is the
 * sum over the shards of what this process last saw of each (a shard it never saw counted full): exact
 * with one process, as above. Every host of one table must use the same `shards` (the bucket's items
 * follow from it); one, the default, keeps the single item `bucketId`.
 */

const MAX_UPDATES = 3;
const MAX_BUCKETS = 10_000;
const GC_AFTER_FULL_SECONDS = 3600;
/** A batch is at most this fraction of the tokens left, and this many tokens. */
const LEASE_SHARE = 16;
const MAX_BATCH = 1000;
const MAX_LEASE_US = 1_000_000;

/** What this process knows of a bucket, and the tokens it holds. */
interface BucketState {
  /** The latest `tat` seen: a lower bound of the stored one. */
  tat: number | undefined;
  /** Tokens taken and not used yet; they expire at `expiresUs`. */
  tokens: number;
  expiresUs: number;
  /** When the last batch was taken, its size, and the tokens used since. */
  takenUs: number;
  batch: number;
  used: number;
  /** A batch being taken, and the requests waiting for it. */
  taking: Promise<boolean> | undefined;
  waiting: number;
}

export interface RateShardOptions {
  /** The most items a key's bucket is split over (1, the default: one item). */
  shards?: number;
  /** This process's own shard (random unless set). */
  shard?: number;
}

export class DynamoRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, BucketState>();
  private readonly maxShards: number;
  private readonly ownShard: number;

  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "rateLimits">,
    private readonly clock: () => number = Date.now,
    options: RateShardOptions = {},
  ) {
    this.maxShards = Math.max(1, Math.floor(options.shards ?? 1));
    this.ownShard = options.shard ?? Math.floor(Math.random() * this.maxShards);
  }

  async check(bucketId: string, limit: RateLimit): Promise<RateLimitDecision> {
    const nowUs = Math.round(this.clock() * 1000);
    const count = rateShardCount(limit, this.maxShards);
    if (count === 1) return this.checkBucket(bucketId, limit, nowUs);
    let refused: RateLimitDecision | undefined;
    for (let step = 0; step < count; step++) {
      const k = (this.ownShard + step) % count;
      const decision = await this.checkBucket(
        rateShardId(bucketId, k),
        rateShardLimit(limit, count, k),
        nowUs,
      );
      if (decision.allowed) return this.keyDecision(bucketId, limit, count, nowUs, decision);
      refused = refused && refused.retryAfterSeconds <= decision.retryAfterSeconds ? refused : decision;
    }
    // Every shard short: the key's limit, the soonest a shard has a token, when all are full again.
    return {
      ...(refused as RateLimitDecision),
      limit: limit.rpm,
      reset: this.keyDecision(bucketId, limit, count, nowUs, refused as RateLimitDecision).reset,
    };
  }

  /** The key's headers from its shards: what this process last saw of each, a shard never seen full. */
  private keyDecision(
    bucketId: string,
    limit: RateLimit,
    count: number,
    nowUs: number,
    decision: RateLimitDecision,
  ): RateLimitDecision {
    let remaining = 0;
    let reset = Math.ceil(nowUs / 1_000_000);
    for (let k = 0; k < count; k++) {
      const shardLimit = rateShardLimit(limit, count, k);
      const state = this.buckets.get(rateShardId(bucketId, k));
      if (state?.tat === undefined) {
        remaining += shardLimit.burst;
        continue;
      }
      const unused = nowUs < state.expiresUs ? state.tokens : 0;
      const seen = allowedDecision(shardLimit, state.tat, nowUs, unused);
      // A shard last seen long ago has refilled, to its burst at most.
      remaining += Math.min(shardLimit.burst, seen.remaining);
      reset = Math.max(reset, seen.reset);
    }
    return { ...decision, limit: limit.rpm, remaining: decision.allowed ? remaining : 0, reset };
  }

  /** One bucket (the key's, or one shard of it). */
  private async checkBucket(bucketId: string, limit: RateLimit, nowUs: number): Promise<RateLimitDecision> {
    const rule = bucketRule(limit);
    const state = this.state(bucketId);
    for (;;) {
      if (state.tokens > 0 && nowUs >= state.expiresUs) state.tokens = 0;
      if (state.tokens > 0) break;
      // One batch at a time per bucket while leasing: requests arriving meanwhile wait for it.
      if (state.taking && this.leasing(limit, rule, state, nowUs)) {
        state.waiting++;
        await state.taking.finally(() => state.waiting--);
        continue;
      }
      const taking = this.take(bucketId, limit, rule, state, nowUs);
      state.taking = taking;
      const took = await taking.finally(() => {
        if (state.taking === taking) state.taking = undefined;
      });
      // Refused, unless a batch taken meanwhile left a token.
      if (!took && state.tokens === 0) return deniedDecision(limit, state.tat ?? nowUs, nowUs);
    }
    state.tokens--;
    state.used++;
    if (!state.taking && state.batch > 1 && state.tokens <= state.batch / 2) {
      // The next batch, in the background. Its errors are not lost: a request that finds no token
      // takes one itself and sees them.
      const taking = this.take(bucketId, limit, rule, state, nowUs).catch(() => false);
      state.taking = taking;
      void taking.finally(() => {
        if (state.taking === taking) state.taking = undefined;
      });
    }
    return allowedDecision(limit, state.tat ?? nowUs, nowUs, state.tokens);
  }

  /** Takes a batch from the store into `state`; false when the bucket has no token left. */
  private async take(
    bucketId: string,
    limit: RateLimit,
    rule: BucketRule,
    state: BucketState,
    nowUs: number,
  ): Promise<boolean> {
    const wanted = this.batchSize(limit, rule, state, nowUs);
    let known = state.tat;
    for (let updates = 0; ; updates++) {
      if (known !== undefined && known > nowUs + rule.toleranceUs) return false;
      if (updates === MAX_UPDATES) throw new Error(`Rate limit bucket ${bucketId} kept changing.`);
      const idle = known === undefined || known <= nowUs;
      const left =
        known === undefined || known <= nowUs
          ? limit.burst
          : Math.floor((nowUs + limit.burst * rule.intervalUs - known) / rule.intervalUs);
      const n = Math.max(1, Math.min(wanted, left));
      const gc = gcAt(nowUs, rule, limit);
      const tat = idle
        ? await this.update(
            bucketId,
            "SET tat = :next, gcAt = :gc",
            "attribute_not_exists(tat) OR tat <= :now",
            { ":next": nowUs + n * rule.intervalUs, ":now": nowUs, ":gc": gc },
          )
        : await this.update(bucketId, "SET tat = tat + :taken, gcAt = :gc", "tat > :now AND tat <= :last", {
            ":taken": n * rule.intervalUs,
            ":now": nowUs,
            ":last": nowUs + (limit.burst - n) * rule.intervalUs,
            ":gc": gc,
          });
      if (tat !== undefined) {
        this.seen(state, tat);
        state.tokens += n;
        state.expiresUs = nowUs + leaseUs(limit, rule);
        state.takenUs = nowUs;
        state.batch = n;
        state.used = 0;
        return true;
      }
      if (idle) {
        // Another request made the bucket busy: tat > now from here on, so the busy update decides.
        known = nowUs + 1;
      } else {
        // Fewer tokens left than asked for: read how many.
        known = await this.read(bucketId);
        if (known !== undefined) this.seen(state, known);
      }
    }
  }

  /** The most a batch may hold now: above 1, this process leases. */
  private batchCap(limit: RateLimit, rule: BucketRule, state: BucketState, nowUs: number): number {
    const tat = Math.max(state.tat ?? nowUs, nowUs);
    const left = Math.floor((nowUs + limit.burst * rule.intervalUs - tat) / rule.intervalUs);
    return Math.min(MAX_BATCH, Math.floor(left / LEASE_SHARE));
  }

  private leasing(limit: RateLimit, rule: BucketRule, state: BucketState, nowUs: number): boolean {
    return this.batchCap(limit, rule, state, nowUs) > 1;
  }

  /**
   * One token, or as many as the requests waiting and the rate of the last batch's lifetime ask for
   * (what the process uses in half a lease's lifetime), within the bounds above.
   */
  private batchSize(limit: RateLimit, rule: BucketRule, state: BucketState, nowUs: number): number {
    const cap = this.batchCap(limit, rule, state, nowUs);
    if (cap <= 1) return 1;
    const perUs = state.used / Math.max(1000, nowUs - state.takenUs);
    const demand = Math.max(state.waiting + 1, Math.ceil((perUs * leaseUs(limit, rule)) / 2));
    return Math.min(cap, demand);
  }

  /** One conditional update; the new `tat`, or undefined when the condition failed. */
  private async update(
    bucketId: string,
    update: string,
    condition: string,
    values: Record<string, number>,
  ): Promise<number | undefined> {
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.rateLimits,
          Key: marshall({ bucketId }),
          UpdateExpression: update,
          ConditionExpression: condition,
          ExpressionAttributeValues: marshall(values),
          ReturnValues: "UPDATED_NEW",
        }),
      );
      return out.Attributes && (unmarshall(out.Attributes) as { tat: number }).tat;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  private async read(bucketId: string): Promise<number | undefined> {
    const item = await readItem(this.db, this.tables.rateLimits, { bucketId });
    return item && (item as { tat: number }).tat;
  }

  private state(bucketId: string): BucketState {
    let state = this.buckets.get(bucketId);
    if (state) {
      // Most recently used last, so the first is the one to forget.
      this.buckets.delete(bucketId);
    } else {
      state = {
        tat: undefined,
        tokens: 0,
        expiresUs: 0,
        takenUs: 0,
        batch: 1,
        used: 0,
        taking: undefined,
        waiting: 0,
      };
      if (this.buckets.size >= MAX_BUCKETS) {
        const oldest = this.buckets.keys().next().value;
        if (oldest !== undefined) this.buckets.delete(oldest);
      }
    }
    this.buckets.set(bucketId, state);
    return state;
  }

  private seen(state: BucketState, tat: number): void {
    state.tat = Math.max(state.tat ?? tat, tat);
  }
}

/** How long leased tokens last: 1 s, or the time that refills 1 % of the burst when that is shorter. */
function leaseUs(limit: RateLimit, rule: BucketRule): number {
  return Math.min(MAX_LEASE_US, Math.floor((limit.burst * rule.intervalUs) / 100));
}

/** The latest the bucket can be full again after this request, plus a margin, in Unix seconds. */
function gcAt(nowUs: number, rule: BucketRule, limit: RateLimit): number {
  return Math.ceil((nowUs + limit.burst * rule.intervalUs) / 1_000_000) + GC_AFTER_FULL_SECONDS;
}
