import { join } from "node:path";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { DynamoInteractionIndex } from "../adapters/dynamodb/interactions";
import type { TableNames } from "../adapters/dynamodb/tables";
import { FsObjectStore } from "../adapters/objectstore/fs";
import type { Logger } from "../core/logger";
import type { Store } from "../core/ports";
import type { RetentionAudit } from "../core/retention";
import { FsWarehouseFiles } from "../deletion/files";
import { decodeRecords } from "../deletion/parquet-read";
import { encodeRecords } from "../warehouse/parquet";
import { type RetentionOptions, runRetention } from "../warehouse/retention";

/**
 * The retention run over a data dir: the same use case as the scheduled function in AWS, over the
 * warehouse folder and the store (dynalite, the server's when one runs). The consumer only adds new
 * files meanwhile; a file it rewrote under us is caught by the version check and left for next time.
 */
export function runLocalRetention(
  local: { dataDir: string; store: Store; db: DynamoDBClient; tables: TableNames },
  logger: Logger,
  options: RetentionOptions,
  clock: () => number = Date.now,
): Promise<RetentionAudit> {
  const objects = new FsObjectStore(join(local.dataDir, "warehouse"));
  return runRetention(
    {
      projects: local.store,
      objects,
      files: new FsWarehouseFiles(objects),
      codec: { decode: decodeRecords, encode: encodeRecords },
      index: new DynamoInteractionIndex(local.db, local.tables),
      logger,
      clock,
    },
    options,
  );
}
