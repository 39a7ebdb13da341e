import { DuckDBDeletionQuery } from "../adapters/duckdb/deletion-query";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoDeletionRequests } from "../adapters/dynamodb/deletion-requests";
import type { DynamoTombstones } from "../adapters/dynamodb/tombstones";
import { FsWarehouseFiles } from "../adapters/fs/deletion-files";
import type { FsObjectStore } from "../adapters/fs/object-store";
import type { DeletionRouteDeps } from "../app/data-api/deletion";
import { composeDeletionSteps } from "../compose/deletion-steps";
import type { EventPublisher } from "../core/cloudevent";
import type { CopyPurger } from "../core/deletion";
import type { ExportDestination, ExportSettings } from "../core/export-destination";
import type { Logger } from "../core/logger";
import type { ObjectStore } from "../core/object-store";
import type { UserIdHasher } from "../core/privacy";
import { DeadLetterPurger } from "../deletion/purgers";
import { LocalDeletionRunner, type LocalRunnerOptions } from "../deletion/runner";

export interface LocalDeletionOptions {
  /** The store's client and the physical name of the `deletionRequests` table. */
  db: DynamoDBClient;
  requestsTable: string;
  /** The tombstones the warehouse consumer reads too. */
  tombstones: DynamoTombstones;
  /** The keyed user-id hash of level `none` (from the data dir's master key). */
  userIds: UserIdHasher;
  /** The warehouse folder (`interactions/`, `dead-letter/`). */
  objects: FsObjectStore;
  /** Where bucket exports went, to purge them. */
  exports: { settings: ExportSettings; openDestination(destination: ExportDestination): ObjectStore };
  /** Step 2: deliver what the in-process queue holds. */
  waitForInFlight: () => Promise<void>;
  /** More copies to purge (the dashboard's interaction index and rollups). */
  purgers?: CopyPurger[];
  /** Where `deletion.completed` goes. */
  events?: EventPublisher;
  logger: Logger;
  clock?: () => number;
  /** Hooks of the runner (tests): its waits between retries, and each state entered. */
  runner?: Pick<LocalRunnerOptions, "sleep" | "onState">;
}

export interface LocalDeletion {
  /** Dependencies of `deletionRoutes` (lambda/app/data-api/deletion.ts). */
  routes: DeletionRouteDeps;
  runner: LocalDeletionRunner;
  /** Lets the run in progress end, then releases DuckDB. */
  close(): Promise<void>;
}

/**
 * The deletion workflow of the embedded stack: requests in the local DynamoDB, the local runner over
 * the same step handlers as the step Lambda, DuckDB over the warehouse folder. Requests a killed process
 * left queued or running are run again (every step is idempotent).
 */
export async function startLocalDeletion(options: LocalDeletionOptions): Promise<LocalDeletion> {
  const clock = options.clock ?? Date.now;
  const requests = new DynamoDeletionRequests(options.db, options.requestsTable);
  const query = await DuckDBDeletionQuery.open(options.objects.root);
  const steps = composeDeletionSteps(
    {
      store: { deletionRequests: requests, tombstones: options.tombstones },
      deletionQuery: query,
      warehouse: options.objects,
      warehouseFiles: new FsWarehouseFiles(options.objects),
      exportSettings: options.exports.settings,
      openDestination: options.exports.openDestination,
      hostPurgers: [new DeadLetterPurger(options.objects)],
      userIds: options.userIds,
      logger: options.logger,
      clock,
    },
    options.purgers ?? [],
    options.events,
  );
  const runner = new LocalDeletionRunner({
    steps,
    waitForInFlight: options.waitForInFlight,
    manifests: options.objects,
    logger: options.logger,
    ...options.runner,
  });
  for (const { projectId, requestId } of await requests.unfinished())
    await runner.start(projectId, requestId);
  return {
    routes: { requests, starter: runner, logger: options.logger, clock },
    runner,
    async close() {
      await runner.idle();
      query.close();
    },
  };
}
