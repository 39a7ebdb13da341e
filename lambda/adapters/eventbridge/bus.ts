import { type EventBridgeClient, PutEventsCommand } from "@aws-sdk/client-eventbridge";
import { buildEvent, type CloudEvent, type EventPublisher } from "../../core/cloudevent";

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
    const entry = busEntry(this.busName, event);
    const out = await this.client.send(
      new PutEventsCommand({ Entries: [{ ...entry, Time: new Date(event.time) }] }),
    );
    checkPut(out);
    return event;
  }
}

/** The bus entry of an event: `detail-type` its type, `detail` the whole CloudEvent. */
export function busEntry(busName: string, event: CloudEvent) {
  return { EventBusName: busName, Source: BUS_SOURCE, DetailType: event.type, Detail: JSON.stringify(event) };
}

/** PutEvents answers 200 with failed entries: those are a failure too. */
export function checkPut(out: { FailedEntryCount?: number; Entries?: { ErrorCode?: string }[] }): void {
  const failed = out.Entries?.find((entry) => entry.ErrorCode);
  if ((out.FailedEntryCount ?? 0) > 0 || failed) {
    throw new Error(`the event bus refused the event: ${failed?.ErrorCode ?? "unknown"}`);
  }
}
