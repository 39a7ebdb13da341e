import { buildEvent, type CloudEvent, type EventPublisher } from "../core/cloudevent";
import type { DeliveryQueue } from "../core/webhook-delivery";
import { eventMessage } from "./delivery";

/**
 * Publishes onto the delivery queue directly, where there is no bus: the local stack's in-process
 * queue, whose journal has the event on disk before `publish` resolves.
 */
export function queuePublisher(queue: DeliveryQueue, clock: () => number): EventPublisher {
  return {
    async publish(input): Promise<CloudEvent> {
      const event = buildEvent(input, clock());
      await queue.send(eventMessage(event), 0);
      return event;
    },
  };
}

// In a module of its own (no webhook signing library in the proxy's bundle); here for the local host.
export { wantedUsageOnly } from "./wanted-usage";
