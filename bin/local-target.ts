import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { DynamoMemberStore } from "../lambda/adapters/dynamodb/members";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../lambda/adapters/fs/master-key";
import { localUserDirectory } from "../lambda/local/oidc";
import { openLocalStore } from "../lambda/local/store";
import { localExportSettings } from "../lambda/local/warehouse";

/**
 * What the store commands of the CLI use, over a local data dir (the running server's store, or one
 * opened here). The counterpart of aws-target.ts; imported only by commands that need a store.
 */
export async function openLocalTarget(dataDir: string, endpoint: string | undefined) {
  const local = await openLocalStore(dataDir, endpoint);
  const names = tableNames(process.env);
  return {
    close: () => local.close(),
    services: {
      store: local.store,
      credits: new DynamoCredits(local.db, names),
      vendorKeys: new DynamoVendorKeys(local.db, names, LocalMasterKey.inDataDir(dataDir)),
      exportSettings: localExportSettings(dataDir),
      members: new DynamoMemberStore(local.db, names),
      users: localUserDirectory(dataDir),
    },
  };
}
