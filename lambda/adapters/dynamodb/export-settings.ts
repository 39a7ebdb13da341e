import { type DynamoDBClient, GetItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import {
  DestinationError,
  type ExportDestination,
  type ExportSettings,
  parseExportDestination,
} from "../../core/export-destination";

/**
 * Bucket-export settings in AWS: the `exportDestination` attribute of the project's item in the
 * `projectSettings` table (`{ projectId, exportDestination: "s3://bucket/prefix/" }`). Read on every
 * export, so a change made with the CLI applies to the next one.
 */
export class DynamoExportSettings implements ExportSettings {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly table: string,
  ) {}

  async getExportDestination(projectId: string): Promise<ExportDestination | undefined> {
    const out = await this.db.send(
      new GetItemCommand({
        TableName: this.table,
        Key: { projectId: { S: projectId } },
        ProjectionExpression: "exportDestination",
        ConsistentRead: true,
      }),
    );
    const url = out.Item?.exportDestination?.S;
    return url === undefined ? undefined : parseExportDestination(url);
  }

  /**
   * Sets (or with `undefined` clears) a project's destination. Only `s3://` destinations: a folder
   * means nothing to a Lambda function. A malformed URL throws DestinationError.
   */
  async setExportDestination(projectId: string, url: string | undefined): Promise<void> {
    const Key = { projectId: { S: projectId } };
    if (url === undefined) {
      await this.db.send(
        new UpdateItemCommand({ TableName: this.table, Key, UpdateExpression: "REMOVE exportDestination" }),
      );
      return;
    }
    const destination = parseExportDestination(url);
    if (destination.kind !== "s3") {
      throw new DestinationError("in AWS an export destination is s3://bucket/prefix");
    }
    await this.db.send(
      new UpdateItemCommand({
        TableName: this.table,
        Key,
        UpdateExpression: "SET exportDestination = :url",
        ExpressionAttributeValues: { ":url": { S: destination.url } },
      }),
    );
  }
}
