import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall } from "@aws-sdk/util-dynamodb";
import type { AlertRule, AlertRuleStore } from "../../core/alert-rules";
import { queryAll } from "./paging";
import type { TableNames } from "./tables";

/**
 * Alert rules over DynamoDB (table `alertRules`): a rule per (project, rule id), fired and re-armed
 * with single-item conditional writes; crossed budget thresholds under `<project>#crossed`. Apart from
 * the webhook adapters (events.ts), so the proxy bundle takes no more than it needs.
 */
export class DynamoAlertRules implements AlertRuleStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "alertRules">,
  ) {}

  async put(rule: AlertRule): Promise<void> {
    await this.db.send(
      new PutItemCommand({
        TableName: this.tables.alertRules,
        Item: marshall(rule, { removeUndefinedValues: true }),
      }),
    );
  }

  async list(projectId: string): Promise<AlertRule[]> {
    const rules = await queryAll(this.db, {
      TableName: this.tables.alertRules,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
      ConsistentRead: true,
    });
    return rules as AlertRule[];
  }

  async delete(projectId: string, ruleId: string): Promise<boolean> {
    const out = await this.db.send(
      new DeleteItemCommand({
        TableName: this.tables.alertRules,
        Key: marshall({ projectId, ruleId }),
        ReturnValues: "ALL_OLD",
      }),
    );
    return out.Attributes !== undefined;
  }

  disarm(projectId: string, ruleId: string, at: number): Promise<boolean> {
    return this.flip(projectId, ruleId, "SET armed = :to, firedAt = :at", true, { ":at": at });
  }

  rearm(projectId: string, ruleId: string): Promise<boolean> {
    return this.flip(projectId, ruleId, "SET armed = :to", false, {});
  }

  async cross(projectId: string, counterId: string, percent: number, at: number, gcAt?: number) {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.alertRules,
          Key: marshall({ projectId: crossedPartition(projectId), ruleId: counterId }),
          UpdateExpression: gcAt === undefined ? "SET #p = :at" : "SET #p = :at, gcAt = :gc",
          ConditionExpression: "attribute_not_exists(#p)",
          ExpressionAttributeNames: { "#p": `p${percent}` },
          ExpressionAttributeValues: marshall(
            gcAt === undefined ? { ":at": at } : { ":at": at, ":gc": gcAt },
          ),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }

  async uncross(projectId: string, counterId: string, percent: number): Promise<void> {
    await this.db.send(
      new UpdateItemCommand({
        TableName: this.tables.alertRules,
        Key: marshall({ projectId: crossedPartition(projectId), ruleId: counterId }),
        UpdateExpression: "REMOVE #p",
        ExpressionAttributeNames: { "#p": `p${percent}` },
      }),
    );
  }

  /** One conditional write: succeeds only for the caller that found the rule in state `from`. */
  private async flip(
    projectId: string,
    ruleId: string,
    update: string,
    from: boolean,
    values: Record<string, unknown>,
  ): Promise<boolean> {
    try {
      await this.db.send(
        new UpdateItemCommand({
          TableName: this.tables.alertRules,
          Key: marshall({ projectId, ruleId }),
          UpdateExpression: update,
          ConditionExpression: "armed = :from",
          ExpressionAttributeValues: marshall({ ":from": from, ":to": !from, ...values }),
        }),
      );
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    }
  }
}

/** Where a project's crossed budget thresholds live: a partition of their own, so rule reads skip them. */
function crossedPartition(projectId: string): string {
  return `${projectId}#crossed`;
}
