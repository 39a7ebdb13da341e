import { buildEvent, type CloudEvent } from "./cloudevent";
import { eventMessage } from "./delivery";
import type { DeliveryQueue, EventPublisher } from "./ports";

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
