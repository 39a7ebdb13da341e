import {
  type AttributeValue,
  BatchGetItemCommand,
  type BatchGetItemCommandOutput,
  BatchWriteItemCommand,
  type BatchWriteItemCommandOutput,
  type DynamoDBClient,
  GetItemCommand,
  type KeysAndAttributes,
  QueryCommand,
  type QueryCommandInput,
  ScanCommand,
  type ScanCommandInput,
  type WriteRequest,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";

/**
 * The reads and the write loops the DynamoDB adapters share: one item by its key, every page of a
 * Query or a Scan (DynamoDB ends a page at 1 MB, or at `Limit`), and batches of keys or writes repeated
 * until DynamoDB has taken them all (what it leaves unprocessed means throttling: back off, and give
 * up after MAX_ROUNDS).
 */

/** An item as DynamoDB sends and takes it. */
export type StoredItem = Record<string, AttributeValue>;
/** An item as `unmarshall` makes it: its attributes typed as the caller's item type says. */
export type Item = ReturnType<typeof unmarshall>;

/** BatchGetItem takes up to 100 keys, BatchWriteItem up to 25 requests. */
const READ_BATCH = 100;
const WRITE_BATCH = 25;
const MAX_ROUNDS = 8;

const backoff = (round: number) =>
  round === 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, 25 * 2 ** round));

/** `items` in groups of `size`, in order. */
export const chunks = <T>(items: readonly T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));

type Page = { Items?: StoredItem[]; LastEvaluatedKey?: StoredItem };

async function* pages(
  read: (start: StoredItem | undefined) => Promise<Page>,
): AsyncGenerator<Item, undefined> {
  let start: StoredItem | undefined;
  do {
    const page = await read(start);
    for (const item of page.Items ?? []) yield unmarshall(item);
    start = page.LastEvaluatedKey;
  } while (start);
  return undefined;
}

/** The item under `key`, read consistently and unmarshalled; undefined when there is none. */
export async function readItem(
  db: DynamoDBClient,
  table: string,
  key: Record<string, unknown>,
): Promise<Item | undefined> {
  const out = await db.send(
    new GetItemCommand({ TableName: table, Key: marshall(key), ConsistentRead: true }),
  );
  return out.Item && unmarshall(out.Item);
}

/** Every item a Query finds, unmarshalled, page by page: the next page is read when this one is used up. */
export function queryItems(db: DynamoDBClient, input: QueryCommandInput): AsyncGenerator<Item, undefined> {
  return pages((start) => db.send(new QueryCommand({ ...input, ExclusiveStartKey: start })));
}

/** Every item a Scan finds, unmarshalled, page by page. */
export function scanItems(db: DynamoDBClient, input: ScanCommandInput): AsyncGenerator<Item, undefined> {
  return pages((start) => db.send(new ScanCommand({ ...input, ExclusiveStartKey: start })));
}

/** Every item a Query finds, unmarshalled, in one array. */
export async function queryAll(db: DynamoDBClient, input: QueryCommandInput): Promise<Item[]> {
  const items: Item[] = [];
  for await (const item of queryItems(db, input)) items.push(item);
  return items;
}

/** Every item a Scan finds, unmarshalled, in one array. */
export async function scanAll(db: DynamoDBClient, input: ScanCommandInput): Promise<Item[]> {
  const items: Item[] = [];
  for await (const item of scanItems(db, input)) items.push(item);
  return items;
}

/**
 * The items of one table under these keys that exist, as stored, with the projection of `read`
 * (`Keys` aside). `owner` names the table in the error when DynamoDB keeps throttling.
 */
export async function batchGet(
  db: DynamoDBClient,
  table: string,
  keys: readonly StoredItem[],
  read: Omit<KeysAndAttributes, "Keys">,
  owner: string,
): Promise<StoredItem[]> {
  const found: StoredItem[] = [];
  for (const group of chunks(keys, READ_BATCH)) {
    let request: Record<string, KeysAndAttributes> | undefined = { [table]: { ...read, Keys: group } };
    for (let round = 0; request && Object.keys(request).length > 0; round++) {
      if (round >= MAX_ROUNDS) throw new Error(`${owner} kept throttling reads`);
      await backoff(round);
      const out: BatchGetItemCommandOutput = await db.send(
        new BatchGetItemCommand({ RequestItems: request }),
      );
      for (const item of out.Responses?.[table] ?? []) found.push(item);
      request = out.UnprocessedKeys;
    }
  }
  return found;
}

/** Puts and deletes in one table, 25 a request, until DynamoDB has taken all of them. */
export async function batchWrite(
  db: DynamoDBClient,
  table: string,
  requests: readonly WriteRequest[],
  owner: string,
): Promise<void> {
  for (const group of chunks(requests, WRITE_BATCH)) {
    let request: Record<string, WriteRequest[]> | undefined = { [table]: group };
    for (let round = 0; request && Object.keys(request).length > 0; round++) {
      if (round >= MAX_ROUNDS) throw new Error(`${owner} kept throttling writes`);
      await backoff(round);
      const out: BatchWriteItemCommandOutput = await db.send(
        new BatchWriteItemCommand({ RequestItems: request }),
      );
      request = out.UnprocessedItems;
    }
  }
}
