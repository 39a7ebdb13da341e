import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoBudgets } from "../../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { type Budget, counterId, setBudget, windowSpan } from "../../lambda/core/budgets";
import type { CloudEvent } from "../../lambda/core/cloudevent";
import { formatUsd, parseUsd } from "../../lambda/core/credits";
import { budgetThresholdsRule } from "../../lambda/events/alerts";
import { addWebhook } from "../../lambda/events/webhooks";
import { startTestHost, type TestHost } from "../support/host";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver";

/**
 * Budget-threshold alerts through the real local stack: calls to the built-in simulator push a
 * budget's window past 50, 80 and 100% of its limit; a webhook gets exactly one event per crossing,
 * and none again in the same window.
 */

/** Only bounds a hang: deliveries wait on the after-work of calls, slow on a busy machine. */
const WAIT = { timeout: 100_000, interval: 50 };

let stack: TestHost;
let receiver: WebhookReceiver;
let credits: DynamoCredits;
let budgets: DynamoBudgets;

beforeAll(async () => {
  stack = await startTestHost({ DMT_METERING: "on" }, undefined, { webhooks: { retryDelaysMs: [50] } });
  receiver = await startWebhookReceiver();
  credits = new DynamoCredits(stack.db, tableNames(process.env));
  budgets = new DynamoBudgets(stack.db, tableNames(process.env));
});

afterAll(async () => {
  await receiver?.close();
  await stack?.stop();
});

interface BudgetEventData {
  budget_id: string;
  scope: string;
  subject: string | null;
  window_id: string;
  threshold_percent: number;
  limit_micros: number;
  used_micros: number;
  limit_usd: string;
  used_usd: string;
  refused: boolean;
}

/** A project with credits, a budget-thresholds rule and a webhook for the budget events. */
async function watchedProject(keyInput: { store?: string } = {}) {
  const { projectId, key, keyId } = await stack.newKey({ tier: "pro", ...keyInput });
  await credits.grant(projectId, parseUsd("100"), "test");
  await stack.events.rules.put(budgetThresholdsRule(projectId, "50,80,100", Date.now()));
  stack.events.cachedRules.forget(projectId);
  const { secret } = await addWebhook(
    stack.events.webhooks,
    { projectId, url: receiver.url, events: ["budget.threshold", "budget.exceeded"] },
    "public-or-loopback",
    Date.now(),
  );
  const received = () =>
    receiver.received
      .filter((r) => (JSON.parse(r.body) as CloudEvent).projectid === projectId)
      .map(
        (r) =>
          new Webhook(secret).verify(
            r.body,
            r.headers as Record<string, string>,
          ) as CloudEvent<BudgetEventData>,
      );
  return { projectId, key, keyId, received };
}

const body = {
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Count the sheep in the field." }],
  max_tokens: 20,
};

/** One call; its status and what it cost (the credits' charge, from the response header). */
async function chat(key: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  const cost = res.headers.get("x-dmt-cost-usd");
  return { status: res.status, costMicros: cost === null ? 0 : parseUsd(cost) };
}

/** What one call costs here (every call of `body` costs the same against the simulator). */
async function costOfACall(): Promise<number> {
  const { key, projectId } = await stack.newKey({ tier: "pro" });
  await credits.grant(projectId, parseUsd("1"), "test");
  const r = await chat(key);
  expect(r.status).toBe(200);
  expect(r.costMicros).toBeGreaterThan(0);
  return r.costMicros;
}

const usd = (micros: number) => formatUsd(micros).slice(1);

describe("budget-threshold alerts", () => {
  it("a soft budget: one event at 50, 80 and 100% as calls cross them, none again in the window", async () => {
    const cost = await costOfACall();
    const { projectId, key, received } = await watchedProject();
    // Five calls' worth: 60% after the third, 80% after the fourth, 100% after the fifth.
    const budget = await setBudget(
      stack.store,
      budgets,
      { projectId, usd: usd(5 * cost), window: "day", soft: true },
      Date.now(),
    );
    const spent: number[] = [];
    let total = 0;
    for (let i = 0; i < 7; i++) {
      const r = await chat(key);
      expect(r.status).toBe(200);
      expect(r.costMicros).toBe(cost);
      total += r.costMicros;
      spent.push(total);
      // Each call's charge counted before the next: the event names the spend as of its own call.
      await stack.drain();
    }
    await stack.drain();
    await expect.poll(() => received().length, WAIT).toBe(3);
    // Later calls in the window (6 and 7, at 120 and 140%) fire nothing more.
    await stack.drain();
    const events = received().sort(
      (a, b) => (a.data.threshold_percent ?? 0) - (b.data.threshold_percent ?? 0),
    );
    expect(events.map((e) => [e.type, e.data.threshold_percent])).toEqual([
      ["budget.threshold", 50],
      ["budget.threshold", 80],
      ["budget.exceeded", 100],
    ]);
    const windowId = windowSpan("day", Date.now()).id;
    for (const [event, call] of [
      [events[0], 3],
      [events[1], 4],
      [events[2], 5],
    ] as const) {
      expect(event).toMatchObject({
        specversion: "1.0",
        source: `/projects/${projectId}`,
        subject: budget.budgetId,
        projectid: projectId,
      });
      expect(event?.data).toEqual({
        budget_id: budget.budgetId,
        scope: "project",
        subject: null,
        soft: true,
        window: "day",
        window_id: windowId,
        threshold_percent: event?.data.threshold_percent,
        limit_micros: 5 * cost,
        limit_usd: usd(5 * cost),
        used_micros: spent[call - 1],
        used_usd: usd(spent[call - 1] ?? 0),
        refused: false,
      });
    }
  });

  it("a hard budget: thresholds as it fills, budget.exceeded once when it refuses, not again", async () => {
    const cost = await costOfACall();
    const { projectId, key, keyId, received } = await watchedProject();
    const budget = await setBudget(
      stack.store,
      budgets,
      { projectId, keyId, usd: usd(Math.floor(4.5 * cost)), window: "month" },
      Date.now(),
    );
    let total = 0;
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      const r = await chat(key);
      statuses.push(r.status);
      total += r.costMicros;
      // The refusal's event counts every charge before it (after-work may lag a call otherwise).
      await stack.drain();
    }
    expect(statuses).toContain(402);
    await stack.drain();
    const crossed = [50, 80].filter((p) => total * 100 >= budget.limitMicros * p);
    await expect.poll(() => received().length, WAIT).toBe(crossed.length + 1);
    const exceeded = received().filter((e) => e.type === "budget.exceeded");
    expect(exceeded).toHaveLength(1);
    expect(exceeded[0]?.data).toMatchObject({
      scope: "key",
      subject: keyId,
      threshold_percent: 100,
      refused: true,
      used_micros: total,
    });
    expect(
      received()
        .filter((e) => e.type === "budget.threshold")
        .map((e) => e.data.threshold_percent)
        .sort(),
    ).toEqual(crossed);

    // Refused again in the same window: no new event.
    expect((await chat(key)).status).toBe(402);
    await stack.drain();
    expect(received()).toHaveLength(crossed.length + 1);
  });

  it("a hard budget that refuses a call with nothing spent fires nothing", async () => {
    const cost = await costOfACall();
    const { projectId, key, keyId, received } = await watchedProject();
    // Below one call's maximum cost: the hold is refused at $0 spent.
    await setBudget(
      stack.store,
      budgets,
      { projectId, keyId, usd: usd(Math.floor(cost / 2)), window: "day" },
      Date.now(),
    );
    expect((await chat(key)).status).toBe(402);
    expect((await chat(key)).status).toBe(402);
    await stack.drain();
    // What a wrong event would take to arrive.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await stack.drain();
    expect(received()).toEqual([]);
  });

  it("a budget of each user names the user, as a keyed hash when the key keeps nothing", async () => {
    const cost = await costOfACall();
    const { projectId, key, received } = await watchedProject({ store: "none" });
    await setBudget(
      stack.store,
      budgets,
      { projectId, userId: "*", usd: usd(cost), window: "day", soft: true },
      Date.now(),
    );
    expect((await chat(key, { "x-user-id": "alice@example.com" })).status).toBe(200);
    await stack.drain();
    await expect.poll(() => received().length, WAIT).toBe(3);
    for (const event of received()) {
      expect(event.data.scope).toBe("user");
      expect(event.data.subject).toMatch(/^hmac:/);
      expect(JSON.stringify(event)).not.toContain("alice");
    }
  });

  it("fires again in a new window, and only once when several processes see the crossing", async () => {
    const { projectId, received } = await watchedProject();
    const budget: Budget = await setBudget(
      stack.store,
      budgets,
      { projectId, usd: "10", window: "day" },
      Date.now(),
    );
    // Two processes' watchers over the same store.
    const one = stack.events.budgetAlerts({ keyed: async () => "unused" });
    const two = stack.events.budgetAlerts({ keyed: async () => "unused" });
    const today = windowSpan("day", Date.now());
    const report = (windowId: string, usedMicros: number) => ({
      budget,
      windowId,
      counterId: counterId(budget, { id: windowId, resetsAt: today.resetsAt }, null),
      usedMicros,
      userId: null,
      hideUserId: false,
    });
    await Promise.all([one.report(report(today.id, 6_000_000)), two.report(report(today.id, 6_000_000))]);
    await one.report(report(today.id, 7_000_000)); // still past 50% only: nothing new
    // The next day's window is another counter: armed again.
    await two.report(report("d2999-01-01", 5_000_000));
    await stack.drain();
    await expect.poll(() => received().length, WAIT).toBe(2);
    expect(received().map((e) => [e.data.window_id, e.data.threshold_percent, e.data.used_usd])).toEqual(
      expect.arrayContaining([
        [today.id, 50, "6.00"],
        ["d2999-01-01", 50, "5.00"],
      ]),
    );
  });
});
