import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll } from "vitest";
import { createDynamoClient, type DynamoDBClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoDeliveryLog, DynamoWebhooks } from "../../lambda/adapters/dynamodb/events";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { LocalMasterKey } from "../../lambda/adapters/fs/master-key";
import { type EmbeddedDynamo, startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { webhooksContract } from "../support/contracts/webhooks";

// The webhook store and delivery log over the DynamoDB wire protocol, served by dynalite.
const dir = mkdtempSync(join(tmpdir(), "dmt-contract-"));
let dynamo: EmbeddedDynamo;
let db: DynamoDBClient;
beforeAll(async () => {
  dynamo = await startEmbeddedDynamo(join(dir, "dynamo"));
  db = createDynamoClient({ endpoint: dynamo.endpoint });
});
afterAll(async () => {
  db.destroy();
  await dynamo.close();
  rmSync(dir, { recursive: true, force: true });
});

webhooksContract("DynamoWebhooks and DynamoDeliveryLog over dynalite", async () => {
  const tables = tableNames({}, "webhooks-contract-");
  await ensureTables(db, tables);
  return {
    webhooks: new DynamoWebhooks(db, tables, LocalMasterKey.inDataDir(join(dir, "one"))),
    withOtherMasterKey: () => new DynamoWebhooks(db, tables, LocalMasterKey.inDataDir(join(dir, "two"))),
    log: new DynamoDeliveryLog(db, tables),
    close: async () => {},
  };
});
