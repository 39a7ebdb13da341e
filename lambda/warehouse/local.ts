import { join } from "node:path";
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { TableNames } from "../adapters/dynamodb/tables";
import { FsObjectStore } from "../adapters/objectstore/fs";
import { DuckDBWarehouseQuery } from "../adapters/query/duckdb";
import { FolderDeadLetters } from "../adapters/queue/dead-letter-folder";
import { InProcessQueue } from "../adapters/queue/in-process";
import { QueueJournal } from "../adapters/queue/journal";
import { FileDeliveryLedger } from "../adapters/queue/ledger";
import type { ExportRouteDeps } from "../app/exports";
import type { CopyPurger } from "../core/deletion";
import type { Logger } from "../core/logger";
import { type LocalDeletion, type LocalDeletionOptions, startLocalDeletion } from "../deletion/local";
import { DynamoTombstones } from "../deletion/tombstones-dynamodb";
import { createWarehouseConsumer, type WrittenListener } from "./consumer";
import { FileExportSettings } from "./export-settings-file";

/**
 * Local delivery: records are written (and queryable) at most this long after they are handed over,
 * well inside the 5 s promise; each flush writes one file per project and day that had records.
 */
export const LOCAL_FLUSH_INTERVAL_MS = 2000;

/** The bucket-export settings of a data dir; the CLI's `settings set --export-bucket` writes them. */
export function localExportSettings(dataDir: string): FileExportSettings {
  return new FileExportSettings(join(dataDir, "export-settings.json"));
}

export interface LocalWarehouseOptions {
  dataDir: string;
  logger: Logger;
  flushIntervalMs?: number;
  /** Hidden time of a failed record before redelivery (default 2 s). */
  visibilityTimeoutMs?: number;
  /** Deliveries before a record is dead-lettered (default 5). */
  maxReceives?: number;
  clock?: () => number;
  /** Told of records once written (the dashboard's interactions index). */
  onWritten?: WrittenListener[];
  /** Runs deletion requests here (their tables live in the store); absent: no deletion. */
  deletion?: {
    db: DynamoDBClient;
    tables: TableNames;
    /** More copies a deletion purges (the dashboard's interaction index and rollups). */
    purgers?: CopyPurger[];
    runner?: LocalDeletionOptions["runner"];
  };
}

export interface LocalWarehouse {
  /** Where the proxy's after-hook sends records. */
  queue: InProcessQueue;
  /** Dependencies of `exportRoutes` (lambda/app/exports.ts). */
  exports: ExportRouteDeps;
  settings: FileExportSettings;
  /** The warehouse folder: `interactions/`, `dead-letter/`. */
  objects: FsObjectStore;
  /** The deletion workflow, when `deletion` was given: `routes` are `deletionRoutes`' dependencies. */
  deletion?: LocalDeletion;
  /** Delivers every waiting record, then releases DuckDB. */
  close(): Promise<void>;
}

/**
 * The embedded warehouse under the data dir:
 * `warehouse/` (Parquet under `interactions/project=<id>/dt=<day>/`, dead letters under `dead-letter/`),
 * `warehouse-ledger/` (ids already written), `warehouse-queue/` (the queue's journal: records not yet
 * written, which survive a killed process), `export-settings.json`, and `buckets/<bucket>/` standing in
 * for `s3://` export destinations.
 */
export async function startLocalWarehouse(options: LocalWarehouseOptions): Promise<LocalWarehouse> {
  const clock = options.clock ?? Date.now;
  const objects = new FsObjectStore(join(options.dataDir, "warehouse"));
  const ledger = await FileDeliveryLedger.open(join(options.dataDir, "warehouse-ledger"), clock);
  const deadLetters = new FolderDeadLetters(objects);
  const tombstones =
    options.deletion && new DynamoTombstones(options.deletion.db, options.deletion.tables.deletionTombstones);
  const handler = createWarehouseConsumer({
    objects,
    ledger,
    deadLetters,
    logger: options.logger,
    clock,
    ...(options.onWritten ? { onWritten: options.onWritten } : {}),
    ...(tombstones ? { tombstones } : {}),
  });
  const queue = new InProcessQueue({
    handler,
    deadLetters,
    logger: options.logger,
    flushIntervalMs: options.flushIntervalMs ?? LOCAL_FLUSH_INTERVAL_MS,
    batchSize: 10_000,
    visibilityTimeoutMs: options.visibilityTimeoutMs ?? 2000,
    maxReceives: options.maxReceives ?? 5,
    clock,
    journal: await QueueJournal.open(join(options.dataDir, "warehouse-queue"), options.logger),
  }).start();
  const query = await DuckDBWarehouseQuery.open(objects.root);
  const settings = localExportSettings(options.dataDir);
  const exports: ExportRouteDeps = {
    query,
    settings,
    openDestination: (destination) =>
      new FsObjectStore(
        destination.kind === "file" ? destination.path : join(options.dataDir, "buckets", destination.bucket),
      ),
    logger: options.logger,
    clock,
  };
  const deletion =
    options.deletion && tombstones
      ? await startLocalDeletion({
          db: options.deletion.db,
          requestsTable: options.deletion.tables.deletionRequests,
          tombstones,
          objects,
          exports,
          // Locally the in-flight window is the queue itself: deliver what it holds, now.
          waitForInFlight: () => queue.deliver(),
          ...(options.deletion.purgers ? { purgers: options.deletion.purgers } : {}),
          ...(options.deletion.runner ? { runner: options.deletion.runner } : {}),
          logger: options.logger,
          clock,
        })
      : undefined;
  return {
    queue,
    exports,
    settings,
    objects,
    ...(deletion ? { deletion } : {}),
    async close() {
      await deletion?.close();
      await queue.close();
      query.close();
    },
  };
}
