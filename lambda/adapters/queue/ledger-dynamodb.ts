import {
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  BatchWriteItemCommand,
  type BatchWriteItemCommandOutput,
  type DynamoDBClient,
  type KeysAndAttributes,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import type { DeliveryLedger } from "./ledger";

/**
 * Longer than SQS can keep a message (14 days), so no redelivery outlives its ledger entry. The TTL
 * only reclaims space; an expired entry that DynamoDB has not removed yet still counts.
 */
const RETENTION_MS = 15 * 86_400_000;
const READ_BATCH = 100;
const WRITE_BATCH = 25;
const MAX_ROUNDS = 8;

/** Unprocessed items mean throttling: back off before the next round. */
const backoff = (round: number) =>
  round === 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, 25 * 2 ** round));

const chunks = <T>(items: T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

/** The ledger in AWS: one item per transaction id in the `warehouseDeliveries` table. */
export class DynamoDeliveryLedger implements DeliveryLedger {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
    private readonly clock: () => number = Date.now,
  ) {}

  async committed(ids: string[]): Promise<Set<string>> {
    const found = new Set<string>();
    for (const group of chunks([...new Set(ids)], READ_BATCH)) {
      let request: Record<string, KeysAndAttributes> | undefined = {
        [this.table]: {
          Keys: group.map((id) => ({ transactionId: { S: id } })),
          ProjectionExpression: "transactionId",
          ConsistentRead: true,
        },
      };
      for (let round = 0; request && Object.keys(request).length > 0; round++) {
        if (round >= MAX_ROUNDS) throw new Error("the delivery ledger kept throttling reads");
        await backoff(round);
        const out: BatchGetItemCommandOutput = await this.db.send(
          new BatchGetItemCommand({ RequestItems: request }),
        );
        for (const item of out.Responses?.[this.table] ?? []) {
          const id = item.transactionId?.S;
          if (id) found.add(id);
        }
        request = out.UnprocessedKeys;
      }
    }
    return found;
  }

  async commit(ids: string[]): Promise<void> {
    const expiresAt = String(Math.floor((this.clock() + RETENTION_MS) / 1000));
    for (const group of chunks([...new Set(ids)], WRITE_BATCH)) {
      let request: Record<string, WriteRequest[]> | undefined = {
        [this.table]: group.map((id) => ({
          PutRequest: { Item: { transactionId: { S: id }, expiresAt: { N: expiresAt } } },
        })),
      };
      for (let round = 0; request && Object.keys(request).length > 0; round++) {
        if (round >= MAX_ROUNDS) throw new Error("the delivery ledger kept throttling writes");
        await backoff(round);
        const out: BatchWriteItemCommandOutput = await this.db.send(
          new BatchWriteItemCommand({ RequestItems: request }),
        );
        request = out.UnprocessedItems;
      }
    }
  }
}
