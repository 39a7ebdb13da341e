import { parquetCodec } from "../adapters/parquet/codec";
import { erasedUsageCodec } from "../adapters/parquet/erased-usage";
import type { EventPublisher } from "../core/cloudevent";
import type { CopyPurger } from "../core/deletion";
import type { ExportSettings } from "../core/export-destination";
import type { StorePorts } from "../core/store-ports";
import { ExportFilesPurger } from "../deletion/purgers";
import { createDeletionSteps } from "../deletion/steps";
import type { Infrastructure } from "./infrastructure";

/**
 * Every step of a deletion request (find, tombstone, rewrite, purge...): the Step Functions tasks in
 * AWS, the local runner's. Purged besides the warehouse: bucket exports, the host's own copies, and
 * `purgers` (the dashboard's interactions index and rollups).
 */
export function composeDeletionSteps(
  infra: Pick<
    Infrastructure,
    | "deletionQuery"
    | "warehouse"
    | "warehouseFiles"
    | "openDestination"
    | "hostPurgers"
    | "userIds"
    | "clock"
    | "logger"
  > & { store: Pick<StorePorts, "deletionRequests" | "tombstones">; exportSettings: ExportSettings },
  purgers: CopyPurger[],
  /** Where `deletion.completed` goes; absent: no event. */
  events?: EventPublisher,
) {
  return createDeletionSteps({
    requests: infra.store.deletionRequests,
    tombstones: infra.store.tombstones,
    query: infra.deletionQuery,
    files: infra.warehouseFiles,
    // The manifests live beside the files they list.
    manifests: infra.warehouse,
    codec: parquetCodec,
    // Beside the records too: retention removes a day's erased usage with its records.
    erasedUsage: { objects: infra.warehouse, codec: erasedUsageCodec },
    purgers: [
      new ExportFilesPurger(infra.exportSettings, (destination) => infra.openDestination(destination)),
      ...infra.hostPurgers,
      ...purgers,
    ],
    ...(events && { events }),
    userIds: infra.userIds,
    logger: infra.logger,
    clock: infra.clock,
  });
}
