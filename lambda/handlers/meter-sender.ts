import type { SQSBatchResponse, SQSEvent } from "aws-lambda";
import { DynamoMeterStore } from "../adapters/dynamodb/billing-meter";
import { composeMeterSender } from "../compose/billing";
import type { BatchHandler } from "../core/queue";
import { awsHost, awsMeterSettings } from "./runtime/aws";
import { parseMeterSenderConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * The billing exports' sender behind the meter queue (ReportBatchItemFailures): each message's events
 * to Stripe's meter events or the OpenMeter endpoint, each noted sent, failed or waiting in the
 * `billingMeter` table. The Stripe key and the endpoint token come from Secrets Manager, read again
 * every 5 minutes; the sender is made again when one changed.
 */
const config = parseMeterSenderConfig(process.env);
const aws = awsHost(process.env, "meter-sender");
const meterStore = new DynamoMeterStore(aws.store.db, { billingMeter: config.DMT_TABLE_BILLINGMETER });
const settings = awsMeterSettings(config, aws.logger);
let current: { key: string; send: BatchHandler } | undefined;

export const handler: (event: SQSEvent) => Promise<SQSBatchResponse> = withTelemetry(
  aws.telemetry,
  async (event) => {
    const meter = await settings();
    const key = JSON.stringify(meter);
    if (current?.key !== key) {
      current = {
        key,
        send: composeMeterSender({ meterStore, logger: aws.logger, clock: aws.clock }, meter),
      };
    }
    return current.send(event);
  },
);
