import { randomUUID } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { activePriceCatalogue } from "../../lambda/adapters/fs/price-catalogue";
import type { CloudEvent } from "../../lambda/core/cloudevent";
import { formatUsd, parseUsd } from "../../lambda/core/credits";
import { holdMicros } from "../../lambda/core/metering";
import { lowBalanceRule } from "../../lambda/events/alerts";
import { addWebhook } from "../../lambda/events/webhooks";
import { callBounds } from "../../lambda/vendors/bounds";
import { startTestHost, type TestHost } from "../support/host";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * The low-balance alert through the real local stack: a rule in the store, balances in dynalite, the
 * event delivered to a webhook. It fires once per crossing and re-arms when the balance is back.
 */

const WAIT = { timeout: 20_000, interval: 50 };
const usd = (micros: number) => formatUsd(micros).slice(1);

let stack: TestHost;
let receiver: WebhookReceiver;
let credits: DynamoCredits;

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on" }, undefined, { webhooks: { retryDelaysMs: [50] } });
  receiver = await startWebhookReceiver();
  credits = new DynamoCredits(stack.db, tableNames(process.env));
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

/** A project with a webhook for balance.low; returns the verified events it got, in order. */
async function watchedProject(grantUsd: string) {
  const { projectId, key } = await stack.newKey();
  await credits.grant(projectId, parseUsd(grantUsd), "test");
  const { secret } = await addWebhook(
    stack.events.webhooks,
    { projectId, url: receiver.url, events: ["balance.low"] },
    "public-or-loopback",
    Date.now(),
  );
  const received = () =>
    receiver.received
      .filter((r) => (JSON.parse(r.body) as CloudEvent).projectid === projectId)
      .map((r) => new Webhook(secret).verify(r.body, r.headers as Record<string, string>) as CloudEvent);
  return { projectId, key, received };
}

/** Spends `usd` from the balance as a call would: a hold settled at that cost. */
async function spend(projectId: string, usd: string): Promise<void> {
  const micros = parseUsd(usd);
  const held = await credits.hold(projectId, randomUUID(), micros, Date.now() + 60_000);
  if (!held.ok) throw new Error("not enough credits to spend");
  await credits.settle(held.hold, micros);
}

describe("low-balance alert", () => {
  it("fires once per crossing and re-arms when the balance is back above the threshold", async () => {
    const { projectId, received } = await watchedProject("10");
    await stack.events.rules.put(lowBalanceRule(projectId, "5", Date.now()));
    const alerts = stack.events.alerts;
    stack.events.cachedRules.forget(projectId);

    await spend(projectId, "4");
    await alerts.check(projectId); // $6 left: above
    await spend(projectId, "2");
    await alerts.check(projectId); // $4 left: below, fires
    await spend(projectId, "1");
    await alerts.check(projectId); // $3 left: still below, does not fire again
    await stack.drain();
    await expect.poll(() => received().length, WAIT).toBe(1);
    expect(received()[0]).toMatchObject({
      type: "balance.low",
      subject: "low-balance",
      data: { available_usd: "4.00", threshold_usd: "5.00" },
    });

    await credits.grant(projectId, parseUsd("10"), "test");
    await alerts.check(projectId); // $13: re-armed
    expect((await stack.events.rules.list(projectId))[0]).toMatchObject({ armed: true });
    await spend(projectId, "9");
    await alerts.check(projectId); // $4 again: fires again
    await expect.poll(() => received().length, WAIT).toBe(2);
    expect(received()[1]?.data).toEqual({ available_usd: "4.00", threshold_usd: "5.00" });
  });

  it("holds for calls not yet made are not money gone: a lease's reservation fires nothing", async () => {
    const body = { model: "gpt-4o", messages: [{ role: "user", content: "hi" }], max_tokens: 16_000 };
    const price = activePriceCatalogue({}).priceFor("openai", body.model, new Date());
    if (!price) throw new Error("gpt-4o has no price");
    const hold = holdMicros(
      price,
      callBounds({ operation: "chat", json: body, form: undefined, uploadBytes: 0 }),
    );
    // A lease reserves many calls' maximum cost at once: most of this grant, well past the threshold.
    const { projectId, key, received } = await watchedProject(usd(20 * hold));
    await stack.events.rules.put(lowBalanceRule(projectId, usd(10 * hold), Date.now()));
    stack.events.cachedRules.forget(projectId);
    const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const { availableMicros, heldMicros } = await credits.balance(projectId);
    expect(availableMicros).toBeLessThan(10 * hold); // what the lease holds...
    expect(availableMicros + heldMicros).toBeGreaterThan(19 * hold); // ...is not spent
    await stack.events.alerts.check(projectId);
    await stack.drain();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await stack.drain();
    expect(received()).toEqual([]);
    expect((await stack.events.rules.list(projectId))[0]).toMatchObject({ armed: true });
  });

  it("one managed call that crosses the threshold fires it, though its charge is noted after the call", async () => {
    const call = (key: string) =>
      fetch(`${stack.url}/openai/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
      });
    // What one such call costs (every call of this body costs the same against the simulator).
    const probe = await stack.newKey();
    await credits.grant(probe.projectId, parseUsd("1"), "test");
    const probed = await call(probe.key);
    await probed.arrayBuffer();
    const cost = parseUsd(probed.headers.get("x-dmt-cost-usd") ?? "");
    expect(cost).toBeGreaterThan(1);

    const { projectId, key, received } = await watchedProject("1");
    // Above the balance less half a call: the one call crosses it, and no call comes after.
    await stack.events.rules.put(
      lowBalanceRule(projectId, usd(1_000_000 - Math.floor(cost / 2)), Date.now()),
    );
    stack.events.cachedRules.forget(projectId);
    const res = await call(key);
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await stack.drain();
    await expect.poll(() => received().length, WAIT).toBe(1);
    expect(received()[0]?.data).toEqual({
      available_usd: usd(1_000_000 - cost),
      threshold_usd: usd(1_000_000 - Math.floor(cost / 2)),
    });
  });

  it("only one of several processes that see the crossing fires it", async () => {
    const { projectId, received } = await watchedProject("3");
    await stack.events.rules.put(lowBalanceRule(projectId, "5", Date.now()));
    stack.events.cachedRules.forget(projectId);
    const disarmed = await Promise.all(
      Array.from({ length: 5 }, () => stack.events.rules.disarm(projectId, "low-balance", Date.now())),
    );
    expect(disarmed.filter(Boolean)).toHaveLength(1);
    await stack.events.alerts.check(projectId);
    await stack.drain();
    expect(received()).toHaveLength(0);
  });

  it("a managed call that takes the balance below the threshold fires the alert", async () => {
    const { projectId, key, received } = await watchedProject("1");
    // A threshold above the balance: the first charged call is below it.
    await stack.events.rules.put(lowBalanceRule(projectId, "100", Date.now()));
    const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    await stack.drain();
    await expect.poll(() => received().length, WAIT).toBe(1);
    expect(received()[0]?.data).toMatchObject({ threshold_usd: "100.00" });
  });
});
