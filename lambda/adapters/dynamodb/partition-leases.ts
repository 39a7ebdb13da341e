import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { MergeJournal, PartitionLeases } from "../../core/compaction";

/** A lease item is reclaimed by TTL a day after its lease ends; an expired item left meanwhile is free. */
const GC_AFTER_MS = 86_400_000;

/**
 * The `warehouseLeases` table: one item per partition held (`partition`), with its holder, the end of
 * its lease (`until`, epoch ms) and the merge in progress (`output`, `inputs`). Taking a lease is one
 * conditional update; every later write is conditional on still being the holder.
 */
export class DynamoPartitionLeases implements PartitionLeases {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
    private readonly clock: () => number = Date.now,
  ) {}

  async acquire(
    partition: string,
    holder: string,
    until: number,
  ): Promise<{ acquired: boolean; journal?: MergeJournal }> {
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: marshall({ partition }),
          UpdateExpression: "SET holder = :holder, #until = :until, gcAt = :gcAt",
          ConditionExpression: "attribute_not_exists(#partition) OR #until < :now",
          ExpressionAttributeNames: { "#partition": "partition", "#until": "until" },
          ExpressionAttributeValues: marshall({
            ":holder": holder,
            ":until": until,
            ":gcAt": Math.floor((until + GC_AFTER_MS) / 1000),
            ":now": this.clock(),
          }),
          ReturnValues: "ALL_OLD",
        }),
      );
      const output = out.Attributes?.output?.S;
      const inputs = out.Attributes?.inputs?.L?.flatMap((v) => (v.S === undefined ? [] : [v.S]));
      return { acquired: true, ...(output && inputs && { journal: { output, inputs } }) };
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return { acquired: false };
      throw err;
    }
  }

  async journal(partition: string, holder: string, merge: MergeJournal | undefined): Promise<void> {
    await this.db.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: marshall({ partition }),
        UpdateExpression: merge ? "SET #output = :output, inputs = :inputs" : "REMOVE #output, inputs",
        ConditionExpression: "holder = :holder",
        ExpressionAttributeNames: { "#output": "output" },
        ExpressionAttributeValues: marshall({
          ":holder": holder,
          ...(merge && { ":output": merge.output, ":inputs": merge.inputs }),
        }),
      }),
    );
  }

  async release(partition: string, holder: string): Promise<void> {
    try {
      await this.db.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: marshall({ partition }),
          // A merge still noted stays for the next holder to finish.
          ConditionExpression: "holder = :holder AND attribute_not_exists(#output)",
          ExpressionAttributeNames: { "#output": "output" },
          ExpressionAttributeValues: marshall({ ":holder": holder }),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }
}
