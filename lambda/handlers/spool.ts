import { awsTelemetry, spoolResender } from "./runtime/aws";
import { parseRecordQueueConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The spool re-sender, run by an EventBridge schedule: offers every record the proxy functions spooled
 * (`queue-spool/` of the warehouse bucket) to the queue again, and removes what went out. A record sent
 * twice (a re-send racing a late first send) is dropped by the consumer's delivery ledger. An AWS part
 * only: the local queue has no spool.
 */
const config = parseRecordQueueConfig(process.env);
const telemetry = awsTelemetry(process.env, "spool-resender");
const queue = spoolResender(config, telemetry.logger);

const resend = withTelemetry(telemetry, async () => {
  await queue.resendSpooled();
});

export const handler = (): Promise<void> => resend(undefined);
