import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { positionRange } from "../../../core/interactions";
import { batchGet, batchWrite, queryItems } from "../paging";

const marshallOptions = { removeUndefinedValues: true };
/** Names the index in errors. */
const INDEX = "the interactions index";
/** Items under a position prefix (lists, entries written before packs) per Query round. */
const ENTRY_ROUND = 250;

type Key = Record<string, string>;
/** A condition on an item's version (`v`), for a rewrite that must not overwrite another. */
export type VersionCondition = {
  ConditionExpression: string;
  ExpressionAttributeValues: Record<string, AttributeValue>;
};

export const isConflict = (err: unknown) => (err as Error).name === "ConditionalCheckFailedException";

/** The `interactions` table's items of one project at a time: the reads and writes the index makes. */
export class IndexTable {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
  ) {}

  async get(key: Key, consistent = false): Promise<Record<string, unknown> | undefined> {
    const out = await this.db.send(
      new GetItemCommand({ TableName: this.table, Key: marshall(key), ConsistentRead: consistent }),
    );
    return out.Item && unmarshall(out.Item);
  }

  async put(item: Record<string, unknown>, condition?: VersionCondition): Promise<void> {
    await this.db.send(
      new PutItemCommand({ TableName: this.table, Item: marshall(item, marshallOptions), ...condition }),
    );
  }

  async delete(key: Key, condition?: VersionCondition): Promise<void> {
    await this.db.send(new DeleteItemCommand({ TableName: this.table, Key: marshall(key), ...condition }));
  }

  /** The items of these keys that exist (consistent reads), with these attributes. */
  async batchGet(keys: readonly Key[], projection: string): Promise<Record<string, unknown>[]> {
    const found = await batchGet(
      this.db,
      this.table,
      keys.map((k) => marshall(k)),
      { ProjectionExpression: projection, ConsistentRead: true },
      INDEX,
    );
    return found.map((item): Record<string, unknown> => unmarshall(item));
  }

  batchPut(items: readonly Record<string, unknown>[]): Promise<void> {
    return this.batchSend(items.map((item) => ({ PutRequest: { Item: marshall(item, marshallOptions) } })));
  }

  batchDelete(keys: readonly Key[]): Promise<void> {
    return this.batchSend(keys.map((key) => ({ DeleteRequest: { Key: marshall(key) } })));
  }

  private batchSend(requests: readonly WriteRequest[]): Promise<void> {
    return batchWrite(this.db, this.table, requests, INDEX);
  }

  /** The project's items with a sort key in [low, high], page by page. */
  between(
    projectId: string,
    low: string,
    high: string,
    options: { projection?: string | undefined; newestFirst?: boolean; round: number },
  ): AsyncGenerator<Record<string, unknown>, undefined> {
    return queryItems(this.db, {
      TableName: this.table,
      KeyConditionExpression: "projectId = :p AND sk BETWEEN :low AND :high",
      ExpressionAttributeValues: marshall({ ":p": projectId, ":low": low, ":high": high }),
      ...(options.projection ? { ProjectionExpression: options.projection } : {}),
      ScanIndexForward: !options.newestFirst,
      Limit: options.round,
    });
  }

  /** The items under `<prefix><position>` of [since, until] (epoch ms, both included), newest first. */
  positionsUnder(projectId: string, prefix: string, since: number, until: number, projection?: string) {
    const { low, high } = positionRange(since, until + 1);
    return this.between(projectId, prefix + low, prefix + high, {
      projection,
      newestFirst: true,
      round: ENTRY_ROUND,
    });
  }

  /** The project's items whose sort key begins with `prefix`, with these attributes, through a filter. */
  beginningWith(
    projectId: string,
    prefix: string,
    projection: string,
    filter?: { expression: string; values: Record<string, unknown> },
    consistent = false,
  ): AsyncGenerator<Record<string, unknown>, undefined> {
    return queryItems(this.db, {
      TableName: this.table,
      KeyConditionExpression: "projectId = :p AND begins_with(sk, :prefix)",
      ...(filter ? { FilterExpression: filter.expression } : {}),
      ProjectionExpression: projection,
      ExpressionAttributeValues: marshall({ ":p": projectId, ":prefix": prefix, ...filter?.values }),
      ConsistentRead: consistent,
    });
  }
}
