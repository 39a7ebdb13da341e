import { DynamoBudgets } from "../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { DynamoMemberStore } from "../lambda/adapters/dynamodb/members";
import { DynamoPayments } from "../lambda/adapters/dynamodb/payments";
import { DynamoPlans } from "../lambda/adapters/dynamodb/plans";
import { DynamoPrivacySettings } from "../lambda/adapters/dynamodb/privacy-settings";
import { DynamoUsageRollups } from "../lambda/adapters/dynamodb/rollups";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../lambda/adapters/fs/master-key";
import type { UserDirectory } from "../lambda/core/members";
import { openLocalStore } from "../lambda/local/store";
import type { CompactionOptions } from "../lambda/warehouse/compaction";
import type { RetentionOptions } from "../lambda/warehouse/retention";

/**
 * What the store commands of the CLI use, over a local data dir (the running server's store, or one
 * opened here). The counterpart of aws-target.ts; imported only by commands that need a store.
 *
 * Start time: the adapters are imported with this module (in the bundle, one chunk rather than one per
 * adapter: each ES module Node loads costs), and what few commands use (the identity provider's state,
 * the export settings, the retention run with its Parquet code) loads when called.
 */
export async function openLocalTarget(dataDir: string, endpoint: string | undefined) {
  // A command is short: an embedded store it opens runs on its thread, without a worker's start.
  const local = await openLocalStore(dataDir, endpoint, { worker: false });
  const names = tableNames(process.env);
  const users: UserDirectory = {
    async findUserId(email) {
      return (await import("../lambda/local/oidc")).localUserDirectory(dataDir).findUserId(email);
    },
  };
  return {
    close: () => local.close(),
    db: local.db,
    tables: names,
    /** The billing exports' store, and the meter queue's journal, which the server takes over. */
    async billing() {
      const [{ DynamoMeterStore }, { meterJournalQueue }, { jsonLogger }] = await Promise.all([
        import("../lambda/adapters/dynamodb/billing-meter"),
        import("../lambda/local/billing"),
        import("../lambda/core/logger"),
      ]);
      const journal = await meterJournalQueue(dataDir, jsonLogger("warn"));
      return { store: new DynamoMeterStore(local.db, names), queue: journal.queue, close: journal.close };
    },
    services: {
      store: local.store,
      credits: new DynamoCredits(local.db, names),
      budgets: new DynamoBudgets(local.db, names),
      usage: new DynamoUsageRollups(local.db, names),
      vendorKeys: new DynamoVendorKeys(local.db, names, LocalMasterKey.inDataDir(dataDir)),
      exportSettings: {
        async setExportDestination(projectId: string, url: string | undefined) {
          const { localExportSettings } = await import("../lambda/local/warehouse");
          await localExportSettings(dataDir).setExportDestination(projectId, url);
        },
      },
      members: new DynamoMemberStore(local.db, names),
      users,
      privacy: new DynamoPrivacySettings(local.db, names),
      plans: new DynamoPlans(local.db, names),
      payments: new DynamoPayments(local.db, names),
      retention: async (options: RetentionOptions) => {
        const [{ runLocalRetention }, { jsonLogger }] = await Promise.all([
          import("../lambda/local/retention"),
          import("../lambda/core/logger"),
        ]);
        return runLocalRetention(
          { dataDir, store: local.store, db: local.db, tables: names },
          jsonLogger("warn"),
          options,
        );
      },
      compaction: async (options: CompactionOptions) => {
        const [{ runLocalCompaction }, { jsonLogger }] = await Promise.all([
          import("../lambda/local/compaction"),
          import("../lambda/core/logger"),
        ]);
        return runLocalCompaction(
          { dataDir, store: local.store, db: local.db, tables: names },
          jsonLogger("warn"),
          options,
        );
      },
    },
  };
}
