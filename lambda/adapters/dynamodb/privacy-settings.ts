import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { ApiKeyRecord, Project } from "../../core/model";
import type { KeyStoreLevel, PrivacySettings } from "../../core/privacy";
import type { TableNames } from "./tables";

/**
 * What records keep and for how long: attributes of the project item (`store`, `retentionDays`,
 * `bodyRetentionDays`) and of the key item (`store`), so authentication reads them with the key and
 * project it reads anyway. Each change is one conditional update of one item.
 */
export class DynamoPrivacySettings {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "projects" | "keys">,
  ) {}

  /**
   * Writes a project's settings as given (checked by `mergePrivacySettings`), on the condition that
   * the project is as `current` was read: two changes at once cannot combine into an invalid pair.
   * Undefined on a missing project or a lost race (read again and retry).
   */
  async setProject(
    projectId: string,
    current: PrivacySettings,
    next: PrivacySettings,
  ): Promise<Project | undefined> {
    const names = ["store", "retentionDays", "bodyRetentionDays"] as const;
    const set = names.filter((n) => next[n] !== undefined);
    const remove = names.filter((n) => next[n] === undefined);
    // Attribute names through placeholders: STORE is one of DynamoDB's reserved words.
    const unchanged = names.map((n) =>
      current[n] === undefined ? `attribute_not_exists(#${n})` : `#${n} = :was_${n}`,
    );
    const values: Record<string, unknown> = {};
    for (const n of set) values[`:${n}`] = next[n];
    for (const n of names) if (current[n] !== undefined) values[`:was_${n}`] = current[n];
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.projects,
          Key: marshall({ projectId }),
          UpdateExpression: [
            set.length > 0 ? `SET ${set.map((n) => `#${n} = :${n}`).join(", ")}` : "",
            remove.length > 0 ? `REMOVE ${remove.map((n) => `#${n}`).join(", ")}` : "",
          ].join(" "),
          ExpressionAttributeNames: Object.fromEntries(names.map((n) => [`#${n}`, n])),
          ConditionExpression: ["attribute_exists(projectId)", ...unchanged].join(" AND "),
          ...(Object.keys(values).length > 0 && { ExpressionAttributeValues: marshall(values) }),
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes && (unmarshall(out.Attributes) as Project);
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }

  /** Sets (or with undefined clears) a key's level; undefined if there is no such key. */
  async setKey(keyId: string, store: KeyStoreLevel | undefined): Promise<ApiKeyRecord | undefined> {
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.keys,
          Key: marshall({ keyId }),
          UpdateExpression: store === undefined ? "REMOVE #store" : "SET #store = :store",
          ExpressionAttributeNames: { "#store": "store" },
          ConditionExpression: "attribute_exists(keyId)",
          ...(store !== undefined && { ExpressionAttributeValues: marshall({ ":store": store }) }),
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes && (unmarshall(out.Attributes) as ApiKeyRecord);
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }
}
