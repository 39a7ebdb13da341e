import {
  ConditionalCheckFailedException,
  type DynamoDBClient,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import type { Project, Tier } from "../../core/model";
import type { TableNames } from "./tables";

/** Changing a project's tier (the dashboard's operators): one conditional update of the project item. */
export class DynamoProjectTiers {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "projects">,
  ) {}

  /** The project with its new tier, or undefined if there is no such project. */
  async setTier(projectId: string, tier: Tier): Promise<Project | undefined> {
    try {
      const out = await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.projects,
          Key: marshall({ projectId }),
          UpdateExpression: "SET tier = :tier",
          ConditionExpression: "attribute_exists(projectId)",
          ExpressionAttributeValues: marshall({ ":tier": tier }),
          ReturnValues: "ALL_NEW",
        }),
      );
      return out.Attributes && (unmarshall(out.Attributes) as Project);
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return undefined;
      throw err;
    }
  }
}
