import { meterOutbox } from "../billing/meter";
import type { MeterQueue, MeterStore } from "../core/billing-meter";
import type { Logger } from "../core/logger";
import type { WrittenListener } from "../warehouse/consumer";

/**
 * Apart from `billing.ts`, whose senders bring the Stripe SDK: the warehouse consumer's bundle holds
 * only this listener.
 */
export interface MeterListenerInfrastructure {
  meterStore: MeterStore;
  meterQueue: MeterQueue;
  logger: Logger;
  clock: () => number;
}

/** The warehouse consumer's listener that notes and queues each billable call of a connected project. */
export function meterListener(infra: MeterListenerInfrastructure): WrittenListener {
  return meterOutbox({
    store: infra.meterStore,
    queue: infra.meterQueue,
    logger: infra.logger,
    clock: infra.clock,
  });
}
