import { createHash } from "node:crypto";
import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import {
  type DeletionFileCounts,
  type DeletionRequestPage,
  type DeletionRequestRecord,
  type DeletionRequestStore,
  isDeletionRequestId,
} from "../../core/deletion";
import { DeletionAlreadyCompletedError, DeletionFatalError } from "../../core/deletion-steps";
import { errors } from "../../core/errors";
import { queryItems, readItem, scanAll } from "./paging";

const opts = { removeUndefinedValues: true };
const FILE_MARK = "#file#";
/** The index of request items by creation time (file items have no `createdAt`: not in it). */
const BY_CREATED = "byCreated";
const MAX_PAGE = 100;

/**
 * The `deletionRequests` table: one item per request (`itemId` = request id, `kind` "request") and
 * one per rewritten file (`itemId` = `<request id>#file#<hash of the key>`, `kind` "file"). The
 * partition is the project, so a request of another project is simply not found.
 */
export class DynamoDeletionRequests implements DeletionRequestStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
  ) {}

  private key(projectId: string, requestId: string) {
    if (!isDeletionRequestId(requestId)) throw new DeletionFatalError("not a deletion request id");
    return marshall({ projectId, itemId: requestId });
  }

  async create(request: DeletionRequestRecord): Promise<void> {
    const { requestId, ...rest } = request;
    await this.db.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall({ ...rest, itemId: requestId, kind: "request" }, opts),
        ConditionExpression: "attribute_not_exists(itemId)",
      }),
    );
  }

  async get(projectId: string, requestId: string): Promise<DeletionRequestRecord | undefined> {
    if (!isDeletionRequestId(requestId)) return undefined;
    const stored = await readItem(this.db, this.table, { projectId, itemId: requestId });
    if (!stored) return undefined;
    const { itemId, kind: _kind, ...rest } = stored;
    return { ...rest, requestId: itemId } as DeletionRequestRecord;
  }

  async list(projectId: string, options: { limit: number; cursor?: string }): Promise<DeletionRequestPage> {
    const { limit } = options;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_PAGE) {
      throw errors.invalidField("limit", `must be a whole number from 1 to ${MAX_PAGE}`);
    }
    const after = options.cursor === undefined ? undefined : readCursor(options.cursor);
    const page = await this.db.send(
      new QueryCommand({
        TableName: this.table,
        IndexName: BY_CREATED,
        KeyConditionExpression: "projectId = :p",
        ExpressionAttributeValues: marshall({ ":p": projectId }),
        ScanIndexForward: false,
        Limit: limit,
        // The cursor holds only a position; the partition is always the caller's project.
        ExclusiveStartKey:
          after && marshall({ projectId, itemId: after.requestId, createdAt: after.createdAt }),
      }),
    );
    const requests = (page.Items ?? []).map((item) => {
      const { itemId, kind: _kind, ...rest } = unmarshall(item);
      return { ...rest, requestId: itemId } as DeletionRequestRecord;
    });
    const last =
      page.LastEvaluatedKey && (unmarshall(page.LastEvaluatedKey) as { itemId: string; createdAt: number });
    return last ? { requests, cursor: writeCursor(last.createdAt, last.itemId) } : { requests };
  }

  async markRunning(projectId: string, requestId: string, at: number): Promise<void> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: this.key(projectId, requestId),
          UpdateExpression:
            "SET #status = :running, startedAt = if_not_exists(startedAt, :at), updatedAt = :at REMOVE #error",
          ConditionExpression: "attribute_exists(itemId) AND #status <> :completed",
          ExpressionAttributeNames: { "#status": "status", "#error": "error" },
          ExpressionAttributeValues: marshall({
            ":running": "running",
            ":completed": "completed",
            ":at": at,
          }),
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) {
        throw new DeletionAlreadyCompletedError("the request is completed or gone");
      }
      throw err;
    }
  }

  async recordFile(
    projectId: string,
    requestId: string,
    file: { key: string; rows: number; removed: boolean },
  ): Promise<void> {
    if (!isDeletionRequestId(requestId)) throw new DeletionFatalError("not a deletion request id");
    const hash = createHash("sha256").update(file.key).digest("hex").slice(0, 32);
    await this.db.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall({
          projectId,
          itemId: `${requestId}${FILE_MARK}${hash}`,
          kind: "file",
          key: file.key,
          rows: file.rows,
          removed: file.removed,
        }),
      }),
    );
  }

  async fileCounts(projectId: string, requestId: string): Promise<DeletionFileCounts> {
    const counts: DeletionFileCounts = { rowsDeleted: 0, filesRewritten: 0, filesDeleted: 0 };
    const files = queryItems(this.db, {
      TableName: this.table,
      KeyConditionExpression: "projectId = :p AND begins_with(itemId, :files)",
      ExpressionAttributeValues: marshall({ ":p": projectId, ":files": `${requestId}${FILE_MARK}` }),
      ProjectionExpression: "#rows, removed",
      ExpressionAttributeNames: { "#rows": "rows" },
      ConsistentRead: true,
    });
    for await (const item of files) {
      const file = item as { rows: number; removed: boolean };
      counts.rowsDeleted += file.rows;
      if (file.removed) counts.filesDeleted++;
      else counts.filesRewritten++;
    }
    return counts;
  }

  async addCopiesPurged(projectId: string, requestId: string, count: number, at: number): Promise<void> {
    await this.db.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: this.key(projectId, requestId),
        UpdateExpression: "ADD copiesPurged :n SET updatedAt = :at",
        ConditionExpression: "attribute_exists(itemId)",
        ExpressionAttributeValues: marshall({ ":n": count, ":at": at }),
      }),
    );
  }

  async complete(
    projectId: string,
    requestId: string,
    counts: DeletionFileCounts,
    at: number,
  ): Promise<void> {
    await this.db.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key: this.key(projectId, requestId),
        // What was deleted stops being named here: the audit keeps the hash and the counts.
        UpdateExpression:
          "SET #status = :completed, finishedAt = :at, updatedAt = :at, #counts = :counts " +
          "REMOVE userId, transactionIds, #error",
        ConditionExpression: "attribute_exists(itemId)",
        ExpressionAttributeNames: { "#status": "status", "#counts": "counts", "#error": "error" },
        ExpressionAttributeValues: marshall({ ":completed": "completed", ":at": at, ":counts": counts }),
      }),
    );
  }

  async fail(projectId: string, requestId: string, error: string, at: number): Promise<void> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: this.key(projectId, requestId),
          UpdateExpression: "SET #status = :failed, finishedAt = :at, updatedAt = :at, #error = :error",
          ConditionExpression: "attribute_exists(itemId) AND #status <> :completed",
          ExpressionAttributeNames: { "#status": "status", "#error": "error" },
          ExpressionAttributeValues: marshall({
            ":failed": "failed",
            ":completed": "completed",
            ":at": at,
            ":error": error,
          }),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  async unfinished(): Promise<{ projectId: string; requestId: string }[]> {
    const found = (await scanAll(this.db, {
      TableName: this.table,
      FilterExpression: "kind = :request AND (#status = :queued OR #status = :running)",
      ProjectionExpression: "projectId, itemId, createdAt",
      ExpressionAttributeNames: { "#status": "status" },
      ExpressionAttributeValues: marshall({
        ":request": "request",
        ":queued": "queued",
        ":running": "running",
      }),
    })) as { projectId: string; itemId: string; createdAt: number }[];
    // Oldest first, the order they were accepted in.
    return found
      .sort((a, b) => a.createdAt - b.createdAt)
      .map(({ projectId, itemId }) => ({ projectId, requestId: itemId }));
  }
}

const writeCursor = (createdAt: number, requestId: string) =>
  Buffer.from(JSON.stringify([createdAt, requestId])).toString("base64url");

function readCursor(cursor: string): { createdAt: number; requestId: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    parsed = undefined;
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== 2 ||
    !Number.isSafeInteger(parsed[0]) ||
    typeof parsed[1] !== "string" ||
    !isDeletionRequestId(parsed[1])
  ) {
    throw errors.invalidField("cursor", "is not a cursor from a previous page");
  }
  return { createdAt: parsed[0] as number, requestId: parsed[1] };
}
