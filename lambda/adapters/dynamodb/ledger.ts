import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  PutItemCommand,
} from "@aws-sdk/client-dynamodb";
import {
  CLAIM_LEASE_MS,
  type ClaimRequest,
  type Delivery,
  type DeliveryLedger,
  WRITTEN,
} from "../../core/delivery-ledger";
import { batchGet } from "./paging";

/**
 * Longer than SQS can keep a message (14 days), so no redelivery outlives its ledger entry. The TTL
 * only reclaims space; an expired entry that DynamoDB has not removed yet still counts.
 */
const RETENTION_MS = 15 * 86_400_000;

/** Claims in flight at once: one conditional write per id (BatchWriteItem takes no conditions). */
const CLAIM_CONCURRENCY = 16;

/**
 * The ledger in AWS, in the `warehouseDeliveries` table (partition key `transactionId`), the protocol of
 * ledger.ts. Two kinds of items:
 *   claim  { transactionId: <id>, file, claimedAt (ms) }: the id's latest claim; an item without
 *          `file` (the ledger's first format) is written
 *   file   { transactionId: <object key>, outcome: "committed" | "abandoned" }: object keys hold `/`,
 *          which transaction ids never do, so the two kinds never share a key
 * A claim is a PutItem if there is no claim yet (or `file` = the replaced file); `file` = the new file
 * also passes, so the SDK's retry of a claim that landed keeps it. A batch of N records in F files
 * costs N claims plus F commits (the first format wrote N ids in batches of 25: the same capacity in
 * more requests), N/100 + F/100 reads, and no read of the object store unless a writer failed.
 */
export class DynamoDeliveryLedger implements DeliveryLedger {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
    private readonly clock: () => number = Date.now,
  ) {}

  async lookup(ids: readonly string[]): Promise<Map<string, Delivery>> {
    const claims = await this.read([...new Set(ids)]);
    const files = [...new Set([...claims.values()].flatMap((item) => (item.file?.S ? [item.file.S] : [])))];
    const outcomes = new Map<string, string | undefined>();
    for (const [key, item] of await this.read(files)) outcomes.set(key, item.outcome?.S);
    const now = this.clock();
    const found = new Map<string, Delivery>();
    for (const [id, item] of claims) {
      const file = item.file?.S;
      const outcome = file === undefined ? "committed" : outcomes.get(file);
      if (file === undefined || outcome === "committed") {
        found.set(id, WRITTEN);
        continue;
      }
      const live = outcome === undefined && now < Number(item.claimedAt?.N ?? 0) + CLAIM_LEASE_MS;
      found.set(id, { state: "claimed", file, live });
    }
    return found;
  }

  async claim(file: string, requests: readonly ClaimRequest[]): Promise<Set<string>> {
    const claimedAt = String(this.clock());
    const expiresAt = this.expiresAt();
    const pending = [...requests];
    const won = new Set<string>();
    let failure: { error: unknown } | undefined;
    const claimNext = async () => {
      for (let request = pending.pop(); request && !failure; request = pending.pop()) {
        const free =
          request.replaces === undefined ? "attribute_not_exists(transactionId)" : "#file = :replaces";
        try {
          await this.db.send(
            new PutItemCommand({
              TableName: this.table,
              Item: {
                transactionId: { S: request.id },
                file: { S: file },
                claimedAt: { N: claimedAt },
                expiresAt: { N: expiresAt },
              },
              ConditionExpression: `${free} OR #file = :file`,
              ExpressionAttributeNames: { "#file": "file" },
              ExpressionAttributeValues: {
                ":file": { S: file },
                ...(request.replaces !== undefined && { ":replaces": { S: request.replaces } }),
              },
            }),
          );
          won.add(request.id);
        } catch (err) {
          if (!(err instanceof ConditionalCheckFailedException)) failure ??= { error: err };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(CLAIM_CONCURRENCY, pending.length) }, claimNext));
    if (failure) throw failure.error;
    return won;
  }

  async commit(file: string): Promise<void> {
    await this.putOutcome(file, "committed");
  }

  async abandon(file: string): Promise<void> {
    try {
      // Never over a commit: a file found there after all stays committed.
      await this.putOutcome(file, "abandoned", "attribute_not_exists(transactionId)");
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  private expiresAt(): string {
    return String(Math.floor((this.clock() + RETENTION_MS) / 1000));
  }

  private async putOutcome(file: string, outcome: string, condition?: string): Promise<void> {
    await this.db.send(
      new PutItemCommand({
        TableName: this.table,
        Item: { transactionId: { S: file }, outcome: { S: outcome }, expiresAt: { N: this.expiresAt() } },
        ...(condition && { ConditionExpression: condition }),
      }),
    );
  }

  /** The items under these keys, consistently read. */
  private async read(keys: string[]): Promise<Map<string, Record<string, AttributeValue>>> {
    const items = await batchGet(
      this.db,
      this.table,
      keys.map((key) => ({ transactionId: { S: key } })),
      {
        ProjectionExpression: "transactionId, #file, claimedAt, #outcome",
        ExpressionAttributeNames: { "#file": "file", "#outcome": "outcome" },
        ConsistentRead: true,
      },
      "the delivery ledger",
    );
    const found = new Map<string, Record<string, AttributeValue>>();
    for (const item of items) {
      const key = item.transactionId?.S;
      if (key) found.set(key, item);
    }
    return found;
  }
}
