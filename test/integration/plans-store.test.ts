import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDynamoClient, ensureTables } from "../../lambda/adapters/dynamodb/client";
import { DynamoPlans } from "../../lambda/adapters/dynamodb/plans";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { startEmbeddedDynamo } from "../../lambda/local/embedded-dynamo";
import { plansContract } from "../support/contracts/plans";

plansContract("DynamoPlans over dynalite", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "dmt-plans-"));
  const dynamo = await startEmbeddedDynamo(dataDir);
  const db = createDynamoClient({ endpoint: dynamo.endpoint });
  const names = tableNames({});
  await ensureTables(db, names);
  return {
    store: new DynamoPlans(db, names),
    async close() {
      db.destroy();
      await dynamo.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
});
