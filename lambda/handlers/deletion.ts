import { composeDeletionSteps } from "../compose/deletion-steps";
import { type DeletionTaskEvent, runDeletionStep } from "../core/deletion-steps";
import { athenaDeletion, awsHost, eventBridgePublisher, secretUserIds } from "./runtime/aws";
import { parseDeletionStepsConfig, parseEventBusConfig } from "./runtime/config";
import { withTelemetry } from "./runtime/telemetry";

/**
 * Every task of the deletion state machine (lib/deletion.ts): the payload names the step
 * (`{"step": "find", "state": {...}}`), the same steps the local runner calls. An error's `name`
 * becomes the Step Functions error the state machine's retriers and catchers match.
 */
const config = parseDeletionStepsConfig(process.env);
const aws = awsHost(process.env, "deletion");
// Purged besides: the dashboard's interactions index and its rollups.
const steps = composeDeletionSteps(
  { ...aws, ...athenaDeletion(config), ...secretUserIds(process.env, aws.logger) },
  [aws.store.interactions],
  // deletion.completed.
  eventBridgePublisher(parseEventBusConfig(process.env)),
);

export const handler = withTelemetry(aws.telemetry, (event: DeletionTaskEvent) =>
  runDeletionStep(steps, event),
);
