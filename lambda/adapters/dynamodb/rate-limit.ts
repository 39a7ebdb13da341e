import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
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
} from "../../core/rate-limit";
import type { TableNames } from "./tables";

/**
 * GCRA buckets (core/rate-limit.ts) in DynamoDB, item `{ bucketId, tat, gcAt }`. A request takes its
 * token with one conditional UpdateItem, computed in the store from the stored `tat`:
 *   idle  (tat <= now, or no item):  SET tat = :now + :T            IF attribute_not_exists(tat) OR tat <= :now
 *   busy  (now < tat <= now + tol):  SET tat = tat + :T             IF tat > :now AND tat <= :now + tol
 * Both are atomic and need no read first. Which one to try comes from the last `tat` this process saw.
 * As `tat` only grows, a failed condition says which case holds: a failed idle update means another
 * request made the bucket busy, so the busy update follows at once and decides; a failed busy update
 * (tried only once tat > now is known) means the bucket is exhausted, and one read gets its `tat` for
 * the refusal's numbers. So an allowed request costs one update, or two when this process's view was
 * stale, and a `tat` seen beyond now + tol refuses without any round trip (the true one is at least as
 * late). `gcAt` lets DynamoDB TTL delete a bucket an hour after it is full again, when it says no more
 * than a missing item.
 */

const MAX_UPDATES = 3;
const MAX_HINTS = 10_000;
const GC_AFTER_FULL_SECONDS = 3600;

export class DynamoRateLimiter implements RateLimiter {
  /** The latest `tat` seen per bucket: a lower bound of the stored one. */
  private readonly hints = new Map<string, number>();

  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "rateLimits">,
    private readonly clock: () => number = Date.now,
  ) {}

  async check(bucketId: string, limit: RateLimit): Promise<RateLimitDecision> {
    const nowUs = Math.round(this.clock() * 1000);
    const rule = bucketRule(limit);
    let known = this.hints.get(bucketId);
    for (let updates = 0; ; updates++) {
      if (known !== undefined && known > nowUs + rule.toleranceUs) {
        return deniedDecision(limit, known, nowUs);
      }
      if (updates === MAX_UPDATES) throw new Error(`Rate limit bucket ${bucketId} kept changing.`);
      const idle = known === undefined || known <= nowUs;
      const gc = gcAt(nowUs, rule, limit);
      const tat = idle
        ? await this.take(
            bucketId,
            "SET tat = :next, gcAt = :gc",
            "attribute_not_exists(tat) OR tat <= :now",
            {
              ":next": nowUs + rule.intervalUs,
              ":now": nowUs,
              ":gc": gc,
            },
          )
        : await this.take(bucketId, "SET tat = tat + :interval, gcAt = :gc", "tat > :now AND tat <= :last", {
            ":interval": rule.intervalUs,
            ":now": nowUs,
            ":last": nowUs + rule.toleranceUs,
            ":gc": gc,
          });
      if (tat !== undefined) {
        this.remember(bucketId, tat);
        return allowedDecision(limit, tat, nowUs);
      }
      if (idle) {
        // Another request made the bucket busy: tat > now from here on, so the busy update decides.
        known = nowUs + 1;
      } else {
        // The bucket is exhausted: read its tat for the refusal's numbers.
        known = await this.read(bucketId);
        if (known !== undefined) this.remember(bucketId, known);
      }
    }
  }

  /** One conditional update; the new `tat`, or undefined when the condition failed. */
  private async take(
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
    const out = await this.db.send(
      new GetItemCommand({
        TableName: this.tables.rateLimits,
        Key: marshall({ bucketId }),
        ConsistentRead: true,
      }),
    );
    return out.Item && (unmarshall(out.Item) as { tat: number }).tat;
  }

  private remember(bucketId: string, tat: number): void {
    this.hints.delete(bucketId);
    if (this.hints.size >= MAX_HINTS) {
      const oldest = this.hints.keys().next().value;
      if (oldest !== undefined) this.hints.delete(oldest);
    }
    this.hints.set(bucketId, tat);
  }
}

/** The latest the bucket can be full again after this request, plus a margin, in Unix seconds. */
function gcAt(nowUs: number, rule: BucketRule, limit: RateLimit): number {
  return Math.ceil((nowUs + limit.burst * rule.intervalUs) / 1_000_000) + GC_AFTER_FULL_SECONDS;
}
