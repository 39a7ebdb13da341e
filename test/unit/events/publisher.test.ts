import { describe, expect, it } from "vitest";
import { buildEvent } from "../../../lambda/core/cloudevent";
import type { WebhookStore } from "../../../lambda/core/webhook-delivery";
import { wantedUsageOnly } from "../../../lambda/events/publisher";

describe("usage events where the delivery queue is the only way out", () => {
  const usage = (projectId: string) => ({ type: "usage.recorded" as const, projectId, data: {} });
  function setUp(webhookEvents: Record<string, string[][]>) {
    let now = 1_700_000_000_000;
    const listed: string[] = [];
    const published: string[] = [];
    const store = {
      list: async (projectId: string) => {
        listed.push(projectId);
        if (projectId === "broken") throw new Error("store down");
        return (webhookEvents[projectId] ?? []).map((events, i) => ({
          projectId,
          webhookId: `wh${i}`,
          url: "https://example.com/",
          events,
          createdAt: 0,
        }));
      },
    } as unknown as WebhookStore;
    const publisher = wantedUsageOnly(
      {
        publish: async (input) => {
          published.push(`${input.projectId} ${input.type}`);
          return buildEvent(input, now);
        },
      },
      store,
      () => now,
      1_000,
    );
    return { publisher, listed, published, webhookEvents, advance: (ms: number) => (now += ms) };
  }

  it("leaves out a usage event no webhook of its project names, and still answers with the event", async () => {
    const { publisher, published } = setUp({ quiet: [["key.created", "balance.low"]] });
    const event = await publisher.publish(usage("quiet"));
    expect(event).toMatchObject({ type: "usage.recorded", projectid: "quiet" });
    expect(event.id).toMatch(/^evt_/);
    await publisher.publish(usage("none"));
    expect(published).toEqual([]);
  });

  it("publishes a usage event a webhook names, and every other type whatever the webhooks", async () => {
    const { publisher, published } = setUp({ loud: [["key.created"], ["usage.recorded"]] });
    await publisher.publish(usage("loud"));
    await publisher.publish({ type: "key.created", projectId: "none", data: {} });
    await publisher.publish({ type: "balance.low", projectId: "none", data: {} });
    expect(published).toEqual(["loud usage.recorded", "none key.created", "none balance.low"]);
  });

  it("lists a project's webhooks once per period, and sees a webhook added once the period is over", async () => {
    const { publisher, listed, published, webhookEvents, advance } = setUp({});
    await Promise.all([publisher.publish(usage("p")), publisher.publish(usage("p"))]);
    await publisher.publish(usage("p"));
    expect(listed).toEqual(["p"]);
    webhookEvents.p = [["usage.recorded"]];
    advance(999);
    await publisher.publish(usage("p"));
    expect(published).toEqual([]);
    advance(1);
    await publisher.publish(usage("p"));
    expect(listed).toEqual(["p", "p"]);
    expect(published).toEqual(["p usage.recorded"]);
  });

  it("publishes when the webhooks cannot be listed: the delivery decides, as without the check", async () => {
    const { publisher, published } = setUp({});
    await publisher.publish(usage("broken"));
    expect(published).toEqual(["broken usage.recorded"]);
  });
});
