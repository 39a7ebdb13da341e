import { Agent } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import { CreateTableCommand, DynamoDBClient, ResourceInUseException } from "@aws-sdk/client-dynamodb";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { TABLES, type TableDefinition, type TableName, type TableNames } from "./tables";

/** One client per process, keep-alive on, created at module scope by the wiring. */
export function createDynamoClient(options: { endpoint?: string; region?: string } = {}): DynamoDBClient {
  const local = options.endpoint !== undefined;
  return new DynamoDBClient({
    region: options.region ?? process.env.AWS_REGION ?? "local",
    ...(local
      ? { endpoint: options.endpoint, credentials: { accessKeyId: "local", secretAccessKey: "local" } }
      : {}),
    maxAttempts: 3,
    requestHandler: new NodeHttpHandler({
      httpAgent: new Agent({ keepAlive: true, maxSockets: 256 }),
      httpsAgent: new HttpsAgent({ keepAlive: true, maxSockets: 256 }),
      connectionTimeout: 1000,
      requestTimeout: 3000,
    }),
  });
}

/** Creates every table of TABLES that does not exist yet (the local stack; CDK does this in AWS). */
export async function ensureTables(db: DynamoDBClient, names: TableNames): Promise<void> {
  for (const [name, def] of Object.entries(TABLES) as [TableName, TableDefinition][]) {
    const attributes = new Map<string, "S" | "N">([[def.partitionKey, "S"]]);
    const sortKey = def.sortKey;
    if (sortKey) attributes.set(sortKey.name, sortKey.type);
    const indexes = def.indexes ?? [];
    for (const index of indexes) {
      attributes.set(index.partitionKey, "S");
      attributes.set(index.sortKey.name, index.sortKey.type);
    }
    try {
      await db.send(
        new CreateTableCommand({
          TableName: names[name],
          BillingMode: "PAY_PER_REQUEST",
          AttributeDefinitions: [...attributes].map(([AttributeName, AttributeType]) => ({
            AttributeName,
            AttributeType,
          })),
          KeySchema: [
            { AttributeName: def.partitionKey, KeyType: "HASH" },
            ...(sortKey ? [{ AttributeName: sortKey.name, KeyType: "RANGE" as const }] : []),
          ],
          ...(indexes.length > 0
            ? {
                GlobalSecondaryIndexes: indexes.map((index) => ({
                  IndexName: index.name,
                  KeySchema: [
                    { AttributeName: index.partitionKey, KeyType: "HASH" as const },
                    { AttributeName: index.sortKey.name, KeyType: "RANGE" as const },
                  ],
                  Projection: { ProjectionType: "ALL" as const },
                })),
              }
            : {}),
        }),
      );
    } catch (err) {
      if (!(err instanceof ResourceInUseException)) throw err;
    }
  }
}
