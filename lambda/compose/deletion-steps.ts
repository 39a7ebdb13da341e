import type { DynamoPorts } from "../adapters/dynamodb/ports";
import type { CopyPurger } from "../core/deletion";
import type { ExportSettings } from "../core/export-destination";
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
    "deletionQuery" | "warehouseFiles" | "openDestination" | "hostPurgers" | "clock" | "logger"
  > & { store: Pick<DynamoPorts, "deletionRequests" | "tombstones">; exportSettings: ExportSettings },
  purgers: CopyPurger[],
) {
  return createDeletionSteps({
    requests: infra.store.deletionRequests,
    tombstones: infra.store.tombstones,
    query: infra.deletionQuery,
    files: infra.warehouseFiles,
    purgers: [
      new ExportFilesPurger(infra.exportSettings, (destination) => infra.openDestination(destination)),
      ...infra.hostPurgers,
      ...purgers,
    ],
    logger: infra.logger,
    clock: infra.clock,
  });
}
