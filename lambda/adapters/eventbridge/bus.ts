import { type EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { buildEvent, type CloudEvent } from "../../events/cloudevent";
import type { EventPublisher } from "../../events/ports";

/** The `source` of every event the stack puts on its bus: what rules match on. */
export const BUS_SOURCE = "dmt";

/**
 * Publishes onto the stack's EventBridge bus: `detail-type` is the event type and `detail` the whole
 * CloudEvent, so users route by type or project with rules, and the delivery queue (a target of the
 * stack's own rule) gets the same CloudEvent the local stack delivers.
 */
export class EventBridgePublisher implements EventPublisher {
  constructor(
    private readonly client: EventBridgeClient,
    private readonly busName: string,
    private readonly clock: () => number = Date.now,
  ) {}

  async publish(input: Parameters<EventPublisher["publish"]>[0]): Promise<CloudEvent> {
    const event = buildEvent(input, this.clock());
    const out = await this.client.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: this.busName,
            Source: BUS_SOURCE,
            DetailType: event.type,
            Detail: JSON.stringify(event),
            Time: new Date(event.time),
          },
        ],
      }),
    );
    const failed = out.Entries?.find((entry) => entry.ErrorCode);
    if ((out.FailedEntryCount ?? 0) > 0 || failed) {
      throw new Error(`the event bus refused the event: ${failed?.ErrorCode ?? "unknown"}`);
    }
    return event;
  }
}
