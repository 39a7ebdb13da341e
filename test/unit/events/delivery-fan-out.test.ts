import { describe, expect, it } from "vitest";
import { buildEvent } from "../../../lambda/core/cloudevent";
import { silentLogger } from "../../../lambda/core/logger";
import type { Delivery, WebhookStore } from "../../../lambda/core/webhook-delivery";
import { createDeliveries, eventMessage } from "../../../lambda/events/delivery";

describe("event fan-out", () => {
  it("lists a project's webhooks once per batch, however many of its events the batch carries", async () => {
    const listed: string[] = [];
    const webhooks = {
      list: async (projectId: string) => {
        listed.push(projectId);
        return projectId === "alpha"
          ? [
              {
                projectId,
                webhookId: "wh1",
                url: "https://example.com/",
                events: ["usage.recorded"],
                createdAt: 0,
              },
            ]
          : [];
      },
    } as unknown as WebhookStore;
    const begun: Delivery[] = [];
    const sent: string[] = [];
    const deliveries = createDeliveries({
      webhooks,
      log: {
        begin: async (d) => void begun.push(d),
        update: async () => {},
        get: async () => undefined,
        list: async () => [],
      },
      queue: { send: async (body) => void sent.push(body) },
      sender: { post: async () => ({ status: 200 }) },
      logger: silentLogger,
      clock: () => 1_700_000_000_000,
    });
    const event = (projectId: string, n: number) =>
      eventMessage(
        buildEvent(
          { type: "usage.recorded", projectId, subject: `tx${n}`, data: { transaction_id: `tx${n}` } },
          1_700_000_000_000 + n,
        ),
      );
    const bodies = [event("alpha", 1), event("beta", 2), event("alpha", 3), event("alpha", 4)];
    const result = await deliveries.handler({
      Records: bodies.map((body, i) => ({ messageId: `m${i}`, body, attributes: {} })),
    } as never);
    expect(result.batchItemFailures).toEqual([]);
    expect(listed.sort()).toEqual(["alpha", "beta"]);
    // Every event of the project still fans out to its webhook.
    expect(begun).toHaveLength(3);
    expect(sent).toHaveLength(3);
  });
});
