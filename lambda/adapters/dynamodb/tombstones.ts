import { type DynamoDBClient, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { Tombstone, TombstoneStore } from "../../core/deletion";
import { type Item, queryAll } from "./paging";

/**
 * Longer than SQS keeps a message (14 days): no record a tombstone covers can arrive after it expires.
 * The TTL only reclaims space; an expired tombstone DynamoDB has not removed yet still applies.
 */
export const TOMBSTONE_RETENTION_MS = 15 * 86_400_000;

/** The `deletionTombstones` table: one item per request, under its project. */
export class DynamoTombstones implements TombstoneStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
  ) {}

  async put(tombstone: Tombstone): Promise<void> {
    await this.db.send(
      new PutItemCommand({
        TableName: this.table,
        Item: marshall(
          { ...tombstone, expiresAt: Math.floor((tombstone.upTo + TOMBSTONE_RETENTION_MS) / 1000) },
          { removeUndefinedValues: true },
        ),
      }),
    );
  }

  async forProjects(projectIds: readonly string[]): Promise<Tombstone[]> {
    const pages = await Promise.all([...new Set(projectIds)].map((projectId) => this.ofProject(projectId)));
    return pages.flat();
  }

  private async ofProject(projectId: string): Promise<Tombstone[]> {
    const items = await queryAll(this.db, {
      TableName: this.table,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
      // A tombstone written before the in-flight wait must be seen by every batch after it.
      ConsistentRead: true,
    });
    return items.map(({ expiresAt: _expiresAt, ...tombstone }: Item) => tombstone as Tombstone);
  }
}
