import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openLocalStore } from "../../lambda/local/store";
import { storeContract } from "../support/store-contract";

// DynamoStore over the DynamoDB wire protocol, served by dynalite persisted on disk.
storeContract("DynamoStore over dynalite", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dmt-contract-"));
  const local = await openLocalStore(dir);
  return {
    store: local.store,
    async close() {
      await local.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
