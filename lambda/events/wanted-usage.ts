import { buildEvent, type CloudEvent, type EventPublisher } from "../core/cloudevent";
import type { WebhookStore } from "../core/webhook-delivery";

/** The listings a `wantedUsageOnly` publisher keeps, at most; past it, the oldest goes. */
const MAX_LISTINGS = 10_000;

/**
 * A `usage.recorded` that no webhook of its project names would go out for nothing, one per proxied call:
 * locally onto the delivery queue (the only way out, no bus), in AWS onto the bus (a `PutEvents` on an
 * account-wide quota, then the webhook leg's queue and function). This publisher leaves such an event out. Whether a
 * webhook names the type is read from the project's webhooks as listed at most `cacheMs` before, so a
 * webhook that names it gets the calls that end from `cacheMs` after it was added. Every other type is
 * always published: they are few, and a new webhook gets them at once. A listing that fails publishes the event: the delivery
 * decides, as it would have.
 */
export function wantedUsageOnly(
  publisher: EventPublisher,
  webhooks: Pick<WebhookStore, "list">,
  clock: () => number,
  cacheMs: number,
): EventPublisher {
  const listings = new Map<string, { at: number; wanted: Promise<boolean> }>();
  const wanted = (projectId: string): Promise<boolean> => {
    const now = clock();
    const known = listings.get(projectId);
    if (known && now - known.at < cacheMs) return known.wanted;
    const listing = webhooks.list(projectId).then(
      (list) => list.some((webhook) => webhook.events.includes("usage.recorded")),
      () => true,
    );
    listings.delete(projectId);
    if (listings.size >= MAX_LISTINGS) listings.delete(listings.keys().next().value as string);
    listings.set(projectId, { at: now, wanted: listing });
    return listing;
  };
  return {
    async publish(input): Promise<CloudEvent> {
      if (input.type === "usage.recorded" && !(await wanted(input.projectId)))
        return buildEvent(input, clock());
      return publisher.publish(input);
    },
  };
}
