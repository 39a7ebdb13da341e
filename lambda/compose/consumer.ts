import { parquetCodec } from "../adapters/parquet/codec";
import { erasedUsageCodec } from "../adapters/parquet/erased-usage";
import type { TombstoneReader } from "../core/deletion";
import { createWarehouseConsumer, type WrittenListener } from "../warehouse/consumer";
import type { Infrastructure } from "./infrastructure";

/** What the consumer keeps in step with the warehouse, in the store. */
export interface ConsumerCopies {
  /** Records a running deletion covers are dropped. */
  tombstones?: TombstoneReader;
  /** Told of written records: the dashboard's interactions index and rollups. */
  onWritten?: WrittenListener[];
}

/** The store's copies: deletion tombstones and the dashboard's index, both hosts' consumers use them. */
export function storeCopies(infra: Pick<Infrastructure, "store">): Required<ConsumerCopies> {
  const index = infra.store.interactions;
  return { tombstones: infra.store.tombstones, onWritten: [(records) => index.write(records)] };
}

/**
 * The warehouse consumer: each batch of records becomes one Parquet file under `interactions/`,
 * exactly once through the delivery ledger; messages that keep failing become dead letters.
 */
export function composeWarehouseConsumer(
  infra: Pick<Infrastructure, "warehouse" | "deliveries" | "deadLetters" | "clock" | "logger">,
  copies: ConsumerCopies,
) {
  return createWarehouseConsumer({
    objects: infra.warehouse,
    codec: parquetCodec,
    ledger: infra.deliveries,
    deadLetters: infra.deadLetters,
    logger: infra.logger,
    clock: infra.clock,
    ...(copies.onWritten && { onWritten: copies.onWritten }),
    ...(copies.tombstones && { tombstones: copies.tombstones, erasedUsage: erasedUsageCodec }),
  });
}
