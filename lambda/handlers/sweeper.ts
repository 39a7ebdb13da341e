import { composeSweeper } from "../compose/sweeper";
import { awsHost } from "./runtime/aws";
import { parseStoreConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/** The credit sweeper, run every minute by an EventBridge schedule (lambda/compose/sweeper.ts). */
parseStoreConfig(process.env);
const aws = awsHost(process.env, "sweeper");

export const handler = withTelemetry(aws.telemetry, composeSweeper(aws));
