import { join } from "node:path";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoInteractionIndex } from "../adapters/dynamodb/interactions";
import type { TableNames } from "../adapters/dynamodb/tables";
import { FsWarehouseFiles } from "../adapters/fs/deletion-files";
import { FsObjectStore } from "../adapters/fs/object-store";
import { composeRetention } from "../compose/retention";
import type { Logger } from "../core/logger";
import { noMetrics } from "../core/metrics";
import type { Store } from "../core/ports";
import type { RetentionAudit } from "../core/retention";
import type { RetentionOptions } from "../warehouse/retention";

/**
 * The retention run over a data dir (`dmt retention run`): the composition the scheduled function runs
 * in AWS, over the warehouse folder and the store (dynalite, the server's when one runs). The consumer
 * only adds files meanwhile; a file changed under the run fails its version check and waits for the next.
 */
export function runLocalRetention(
  local: { dataDir: string; store: Store; db: DynamoDBClient; tables: TableNames },
  logger: Logger,
  options: RetentionOptions,
  clock: () => number = Date.now,
): Promise<RetentionAudit> {
  const warehouse = new FsObjectStore(join(local.dataDir, "warehouse"));
  return composeRetention({
    store: { keys: local.store, interactions: new DynamoInteractionIndex(local.db, local.tables) },
    warehouse,
    warehouseFiles: new FsWarehouseFiles(warehouse),
    clock,
    logger,
    metrics: noMetrics,
  })(options);
}
