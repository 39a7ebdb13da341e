import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { ApiKeyRecord, Project } from "../../core/model";
import { ConflictError, type Store } from "../../core/ports";
import { queryAll, readItem, scanAll } from "./paging";
import type { TableNames } from "./tables";

const opts = { removeUndefinedValues: true };

/** The store port over DynamoDB: the same code talks to AWS and, locally, to dynalite. */
export class DynamoStore implements Store {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: TableNames,
  ) {}

  async createProject(project: Project): Promise<void> {
    await this.putNew(
      this.tables.projects,
      project,
      "projectId",
      `project '${project.projectId}' exists already`,
    );
  }

  async getProject(projectId: string): Promise<Project | undefined> {
    return this.get<Project>(this.tables.projects, { projectId });
  }

  async listProjects(): Promise<Project[]> {
    const items = (await scanAll(this.db, { TableName: this.tables.projects })) as Project[];
    return items.sort((a, b) => a.projectId.localeCompare(b.projectId));
  }

  async createKey(key: ApiKeyRecord): Promise<void> {
    await this.putNew(this.tables.keys, key, "keyId", "key id collision");
  }

  async getKey(keyId: string): Promise<ApiKeyRecord | undefined> {
    return this.get<ApiKeyRecord>(this.tables.keys, { keyId });
  }

  async listKeys(projectId: string): Promise<ApiKeyRecord[]> {
    const items = await queryAll(this.db, {
      TableName: this.tables.keys,
      IndexName: "byProject",
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
    });
    return items as ApiKeyRecord[];
  }

  async revokeKey(keyId: string, at: number): Promise<ApiKeyRecord | undefined> {
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.keys,
          Key: marshall({ keyId }),
          UpdateExpression: "SET revoked = :t, revokedAt = if_not_exists(revokedAt, :at)",
          ConditionExpression: "attribute_exists(keyId)",
          ExpressionAttributeValues: marshall({ ":t": true, ":at": at }),
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes && (unmarshall(out.Attributes) as ApiKeyRecord);
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  async updateKeyPolicy(
    keyId: string,
    policy: { models?: string[] | null; tpm?: number | null },
  ): Promise<ApiKeyRecord | undefined> {
    const set: string[] = [];
    const remove: string[] = [];
    const values: Record<string, unknown> = {};
    for (const field of ["models", "tpm"] as const) {
      const value = policy[field];
      if (value === undefined) continue;
      if (value === null) remove.push(field);
      else {
        set.push(`${field} = :${field}`);
        values[`:${field}`] = value;
      }
    }
    if (set.length === 0 && remove.length === 0) return this.getKey(keyId);
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.keys,
          Key: marshall({ keyId }),
          UpdateExpression: [
            set.length ? `SET ${set.join(", ")}` : "",
            remove.length ? `REMOVE ${remove.join(", ")}` : "",
          ]
            .join(" ")
            .trim(),
          ConditionExpression: "attribute_exists(keyId)",
          ...(set.length ? { ExpressionAttributeValues: marshall(values) } : {}),
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes && (unmarshall(out.Attributes) as ApiKeyRecord);
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  async touchKey(keyId: string, at: number): Promise<void> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.keys,
          Key: marshall({ keyId }),
          UpdateExpression: "SET lastUsedAt = :at",
          ConditionExpression:
            "attribute_exists(keyId) AND (attribute_not_exists(lastUsedAt) OR lastUsedAt < :at)",
          ExpressionAttributeValues: marshall({ ":at": at }),
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  private async get<T>(table: string, key: Record<string, unknown>): Promise<T | undefined> {
    return (await readItem(this.db, table, key)) as T | undefined;
  }

  private async putNew(table: string, item: object, keyAttribute: string, conflict: string): Promise<void> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: table,
          Item: marshall(item, opts),
          ConditionExpression: `attribute_not_exists(${keyAttribute})`,
        }),
      );
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) throw new ConflictError(conflict);
      throw err;
    }
  }
}
