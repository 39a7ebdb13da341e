import { join } from "node:path";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import type { TableNames } from "../adapters/dynamodb/tables";
import { DynamoTombstones } from "../adapters/dynamodb/tombstones";
import { FileExportSettings } from "../adapters/fs/export-settings";
import { FileDeliveryLedger } from "../adapters/fs/ledger";
import { localUserIdHasher } from "../adapters/fs/master-key";
import { FsObjectStore } from "../adapters/fs/object-store";
import { FolderDeadLetters } from "../adapters/in-process/dead-letters";
import { QueueJournal } from "../adapters/in-process/journal";
import { InProcessQueue } from "../adapters/in-process/queue";
import type { ExportRouteDeps } from "../app/data-api/exports";
import { composeWarehouseConsumer } from "../compose/consumer";
import type { CopyPurger, TombstoneReader } from "../core/deletion";
import type { Logger } from "../core/logger";
import type { WrittenListener } from "../warehouse/consumer";
import type { LocalDeletion, LocalDeletionOptions } from "./deletion";

/**
 * Local delivery: records are written (and queryable) at most this long after they are handed over,
 * well inside the 5 s promise; each flush writes one file per project and day that had records.
 */
export const LOCAL_FLUSH_INTERVAL_MS = 2000;

/** The bucket-export settings of a data dir; the CLI's `settings set --export-bucket` writes them. */
export function localExportSettings(dataDir: string): FileExportSettings {
  return new FileExportSettings(join(dataDir, "export-settings.json"));
}

/** The warehouse folder of a data dir: `interactions/`, `dead-letter/`. */
const warehouseObjects = (dataDir: string) => new FsObjectStore(join(dataDir, "warehouse"));

/** The export query over a data dir's warehouse folder, for commands that read it (`dmt reconcile`). */
export async function openLocalWarehouseQuery(dataDir: string) {
  const { DuckDBWarehouseQuery } = await import("../adapters/duckdb/export-query");
  return DuckDBWarehouseQuery.open(warehouseObjects(dataDir).root);
}

export interface WarehouseQueueOptions {
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
  /** Records a running deletion covers are dropped; absent: none is. */
  tombstones?: TombstoneReader;
}

/**
 * The writing side of the local warehouse: the in-process queue, its journal, and the consumer Lambda
 * runs. The local stack runs it in a worker thread (lambda/local/warehouse-thread.ts).
 */
export async function startWarehouseQueue(options: WarehouseQueueOptions): Promise<InProcessQueue> {
  const clock = options.clock ?? Date.now;
  const objects = warehouseObjects(options.dataDir);
  const deadLetters = new FolderDeadLetters(objects);
  const handler = composeWarehouseConsumer(
    {
      warehouse: objects,
      deliveries: await FileDeliveryLedger.open(join(options.dataDir, "warehouse-ledger"), clock),
      deadLetters,
      logger: options.logger,
      clock,
    },
    {
      ...(options.onWritten ? { onWritten: options.onWritten } : {}),
      ...(options.tombstones ? { tombstones: options.tombstones } : {}),
    },
  );
  return new InProcessQueue({
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
}

export interface WarehouseReadsOptions {
  dataDir: string;
  logger: Logger;
  clock?: () => number;
  /** Runs deletion requests here (their tables live in the store); absent: no deletion. */
  deletion?: {
    db: DynamoDBClient;
    tables: TableNames;
    /** More copies a deletion purges (the dashboard's interaction index and rollups). */
    purgers?: CopyPurger[];
    events?: LocalDeletionOptions["events"];
    runner?: LocalDeletionOptions["runner"];
  };
}

/** The reading side of the local warehouse: exports, settings, deletion. */
export interface WarehouseReads {
  /** Dependencies of `exportRoutes` (lambda/app/data-api/exports.ts). */
  exports: ExportRouteDeps;
  settings: FileExportSettings;
  /** The warehouse folder: `interactions/`, `dead-letter/`. */
  objects: FsObjectStore;
  /** The deletion workflow, when `deletion` was given: `routes` are `deletionRoutes`' dependencies. */
  deletion?: LocalDeletion;
  /** Lets a deletion in progress end, then releases DuckDB. */
  close(): Promise<void>;
}

/**
 * DuckDB over the warehouse folder, the export settings, and the deletion workflow, which delivers
 * what `queue` holds when it waits out the records in flight.
 */
export async function openWarehouseReads(
  options: WarehouseReadsOptions,
  queue: { deliver(): Promise<void> },
): Promise<WarehouseReads> {
  // Loaded here: the local stack's warehouse worker imports this module for the writing side only, and
  // DuckDB and the deletion workflow would add about a third to its start.
  const { DuckDBWarehouseQuery } = await import("../adapters/duckdb/export-query");
  const { startLocalDeletion } = await import("./deletion");
  const clock = options.clock ?? Date.now;
  const objects = warehouseObjects(options.dataDir);
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
    options.deletion &&
    (await startLocalDeletion({
      db: options.deletion.db,
      requestsTable: options.deletion.tables.deletionRequests,
      tombstones: new DynamoTombstones(options.deletion.db, options.deletion.tables.deletionTombstones),
      objects,
      exports,
      userIds: localUserIdHasher(options.dataDir),
      // Locally the in-flight window is the queue itself: deliver what it holds, now.
      waitForInFlight: () => queue.deliver(),
      ...(options.deletion.purgers ? { purgers: options.deletion.purgers } : {}),
      ...(options.deletion.runner ? { runner: options.deletion.runner } : {}),
      ...(options.deletion.events ? { events: options.deletion.events } : {}),
      logger: options.logger,
      clock,
    }));
  return {
    exports,
    settings,
    objects,
    ...(deletion ? { deletion } : {}),
    async close() {
      await deletion?.close();
      query.close();
    },
  };
}

export type LocalWarehouseOptions = Omit<WarehouseQueueOptions, "tombstones"> & WarehouseReadsOptions;

export interface LocalWarehouse extends WarehouseReads {
  /** Where the proxy's after-hook sends records. */
  queue: InProcessQueue;
  /** Lets a deletion in progress end, releases DuckDB, and delivers every waiting record. */
  close(): Promise<void>;
}

/**
 * The embedded warehouse under the data dir, both sides in this thread:
 * `warehouse/` (Parquet under `interactions/project=<id>/dt=<day>/`, dead letters under `dead-letter/`),
 * `warehouse-ledger/` (the delivery ledger: claims of ids on files, and commits), `warehouse-queue/` (the queue's journal: records not yet
 * written, which survive a killed process), `export-settings.json`, and `buckets/<bucket>/` standing in
 * for `s3://` export destinations.
 */
export async function startLocalWarehouse(options: LocalWarehouseOptions): Promise<LocalWarehouse> {
  const queue = await startWarehouseQueue({
    ...options,
    ...(options.deletion
      ? { tombstones: new DynamoTombstones(options.deletion.db, options.deletion.tables.deletionTombstones) }
      : {}),
  });
  const reads = await openWarehouseReads(options, queue);
  return {
    ...reads,
    queue,
    async close() {
      await reads.close();
      await queue.close();
    },
  };
}
