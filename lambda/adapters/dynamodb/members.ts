import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  type QueryCommandInput,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { MemberStore, Membership, RequestLog, RequestRecord, Role } from "../../core/members";
import { ConflictError } from "../../core/ports";
import { queryAll, readItem } from "./paging";
import type { TableNames } from "./tables";

const opts = { removeUndefinedValues: true };

/** The dashboard's own state over DynamoDB: memberships and idempotency records. */
export class DynamoMemberStore implements MemberStore, RequestLog {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "members" | "dashboardRequests">,
  ) {}

  async addMembership(membership: Membership): Promise<void> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.members,
          Item: marshall(membership, opts),
          ConditionExpression: "attribute_not_exists(userId)",
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) {
        throw new ConflictError(`already a member of '${membership.projectId}'`);
      }
      throw err;
    }
  }

  async getMembership(userId: string, projectId: string): Promise<Membership | undefined> {
    return (await readItem(this.db, this.tables.members, { userId, projectId })) as Membership | undefined;
  }

  listMemberships(userId: string): Promise<Membership[]> {
    return this.memberships({
      TableName: this.tables.members,
      KeyConditionExpression: "userId = :u",
      ExpressionAttributeValues: marshall({ ":u": userId }),
      ConsistentRead: true,
    });
  }

  listProjectMembers(projectId: string): Promise<Membership[]> {
    return this.memberships({
      TableName: this.tables.members,
      IndexName: "byProject",
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
    });
  }

  async removeMembership(userId: string, projectId: string): Promise<boolean> {
    const out = await this.db.send(
      new DeleteItemCommand({
        TableName: this.tables.members,
        Key: marshall({ userId, projectId }),
        ReturnValues: "ALL_OLD",
      }),
    );
    return out.Attributes !== undefined;
  }

  async setRole(userId: string, projectId: string, role: Role): Promise<Membership | undefined> {
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.members,
          Key: marshall({ userId, projectId }),
          UpdateExpression: "SET #role = :role",
          ConditionExpression: "attribute_exists(userId)",
          ExpressionAttributeNames: { "#role": "role" },
          ExpressionAttributeValues: marshall({ ":role": role }),
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes && (unmarshall(out.Attributes) as Membership);
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  async begin(record: RequestRecord, now: number): Promise<RequestRecord | undefined> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.dashboardRequests,
          Item: marshall(record, opts),
          // TTL deletion is lazy (and dynalite has none): an expired record counts as absent.
          ConditionExpression: "attribute_not_exists(requestId) OR expiresAt <= :now",
          ExpressionAttributeValues: marshall({ ":now": now }),
        }),
      );
      return undefined;
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
      const stored = await readItem(this.db, this.tables.dashboardRequests, { requestId: record.requestId });
      if (!stored) throw new ConflictError("idempotency record vanished; retry");
      return stored as RequestRecord;
    }
  }

  async complete(requestId: string, resultId: string): Promise<void> {
    await this.db.send(
      new UpdateItemCommand({
        TableName: this.tables.dashboardRequests,
        Key: marshall({ requestId }),
        UpdateExpression: "SET #state = :done, resultId = :r",
        ExpressionAttributeNames: { "#state": "state" },
        ExpressionAttributeValues: marshall({ ":done": "done", ":r": resultId }),
      }),
    );
  }

  async discard(requestId: string): Promise<void> {
    await this.db.send(
      new DeleteItemCommand({ TableName: this.tables.dashboardRequests, Key: marshall({ requestId }) }),
    );
  }

  private async memberships(input: QueryCommandInput): Promise<Membership[]> {
    return (await queryAll(this.db, input)) as Membership[];
  }
}
