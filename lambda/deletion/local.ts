import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { FsObjectStore } from "../adapters/objectstore/fs";
import type { ObjectStore } from "../adapters/objectstore/port";
import type { DeletionRouteDeps } from "../app/deletion";
import type { CopyPurger } from "../core/deletion";
import type { ExportDestination, ExportSettings } from "../core/export-destination";
import type { Logger } from "../core/logger";
import type { UserIdHasher } from "../core/privacy";
import { FsWarehouseFiles } from "./files";
import { DeadLetterPurger, ExportFilesPurger } from "./purgers";
import { DuckDBDeletionQuery } from "./query-duckdb";
import { DynamoDeletionRequests } from "./requests-dynamodb";
import { LocalDeletionRunner, type LocalRunnerOptions } from "./runner";
import { createDeletionSteps } from "./steps";
import type { DynamoTombstones } from "./tombstones-dynamodb";

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
  logger: Logger;
  clock?: () => number;
  /** Hooks of the runner (tests): its waits between retries, and each state entered. */
  runner?: Pick<LocalRunnerOptions, "sleep" | "onState">;
}

export interface LocalDeletion {
  /** Dependencies of `deletionRoutes` (lambda/app/deletion.ts). */
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
  const steps = createDeletionSteps({
    requests,
    tombstones: options.tombstones,
    query,
    files: new FsWarehouseFiles(options.objects),
    purgers: [
      new ExportFilesPurger(options.exports.settings, options.exports.openDestination),
      new DeadLetterPurger(options.objects),
      ...(options.purgers ?? []),
    ],
    userIds: options.userIds,
    logger: options.logger,
    clock,
  });
  const runner = new LocalDeletionRunner({
    steps,
    waitForInFlight: options.waitForInFlight,
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
