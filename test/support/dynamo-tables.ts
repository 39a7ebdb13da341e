import { CreateTableCommand } from "@aws-sdk/client-dynamodb";
import { type DynamoDBClient, untilActive } from "../../lambda/adapters/dynamodb/client";

/** A table keyed by a string `pk` alone, once it is active. */
export async function createKeyTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: "PAY_PER_REQUEST",
      AttributeDefinitions: [{ AttributeName: "pk", AttributeType: "S" }],
      KeySchema: [{ AttributeName: "pk", KeyType: "HASH" }],
    }),
  );
  await untilActive(client, tableName);
}
