import { join } from "node:path";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoPartitionLeases } from "../adapters/dynamodb/partition-leases";
import type { TableNames } from "../adapters/dynamodb/tables";
import { DynamoTombstones } from "../adapters/dynamodb/tombstones";
import { FsWarehouseFiles } from "../adapters/fs/deletion-files";
import { FileDeliveryLedger } from "../adapters/fs/ledger";
import { FsObjectStore } from "../adapters/fs/object-store";
import { composeCompaction } from "../compose/compaction";
import type { CompactionReport } from "../core/compaction";
import type { Logger } from "../core/logger";
import { noMetrics } from "../core/metrics";
import type { Store } from "../core/ports";
import type { CompactionOptions } from "../warehouse/compaction";

/**
 * The compaction run over a data dir (`dmt compaction run`): the composition the scheduled function
 * runs in AWS, over the warehouse folder, the local delivery ledger and the store (dynalite, the
 * server's when one runs), whose partition leases keep two runs off the same day.
 */
export async function runLocalCompaction(
  local: { dataDir: string; store: Store; db: DynamoDBClient; tables: TableNames },
  logger: Logger,
  options: CompactionOptions,
  clock: () => number = Date.now,
): Promise<CompactionReport> {
  const warehouse = new FsObjectStore(join(local.dataDir, "warehouse"));
  return composeCompaction({
    store: {
      keys: local.store,
      tombstones: new DynamoTombstones(local.db, local.tables.deletionTombstones),
    },
    leases: new DynamoPartitionLeases(local.db, local.tables.warehouseLeases, clock),
    warehouse,
    warehouseFiles: new FsWarehouseFiles(warehouse),
    deliveries: await FileDeliveryLedger.open(join(local.dataDir, "warehouse-ledger"), clock),
    clock,
    logger,
    metrics: noMetrics,
  })(options);
}
