import { DynamoBudgets } from "../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { DynamoMemberStore } from "../lambda/adapters/dynamodb/members";
import { DynamoPrivacySettings } from "../lambda/adapters/dynamodb/privacy-settings";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../lambda/adapters/fs/master-key";
import { jsonLogger } from "../lambda/core/logger";
import { localUserDirectory } from "../lambda/local/oidc";
import { runLocalRetention } from "../lambda/local/retention";
import { openLocalStore } from "../lambda/local/store";
import { localExportSettings } from "../lambda/local/warehouse";
import type { RetentionOptions } from "../lambda/warehouse/retention";

/**
 * What the store commands of the CLI use, over a local data dir (the running server's store, or one
 * opened here). The counterpart of aws-target.ts; imported only by commands that need a store.
 */
export async function openLocalTarget(dataDir: string, endpoint: string | undefined) {
  const local = await openLocalStore(dataDir, endpoint);
  const names = tableNames(process.env);
  return {
    close: () => local.close(),
    db: local.db,
    tables: names,
    services: {
      store: local.store,
      credits: new DynamoCredits(local.db, names),
      budgets: new DynamoBudgets(local.db, names),
      vendorKeys: new DynamoVendorKeys(local.db, names, LocalMasterKey.inDataDir(dataDir)),
      exportSettings: localExportSettings(dataDir),
      members: new DynamoMemberStore(local.db, names),
      users: localUserDirectory(dataDir),
      privacy: new DynamoPrivacySettings(local.db, names),
      retention: (options: RetentionOptions) =>
        runLocalRetention(
          { dataDir, store: local.store, db: local.db, tables: names },
          jsonLogger("warn"),
          options,
        ),
    },
  };
}
