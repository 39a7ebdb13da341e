import { createSpoolResender } from "./runtime/aws";
import { parseRecordQueueConfig } from "./runtime/config";
import { lambdaTelemetry } from "./runtime/telemetry";

/**
 * The spool re-sender, run by an EventBridge schedule: offers every record the proxy functions spooled
 * (`queue-spool/` of the warehouse bucket) to the queue again, and removes what went out. A record sent
 * twice (a re-send racing a late first send) is dropped by the consumer's delivery ledger.
 */
const config = parseRecordQueueConfig(process.env);
const queue = createSpoolResender(config, lambdaTelemetry(config, "spool-resender").logger);

export async function handler(): Promise<void> {
  await queue.resendSpooled();
}
