import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { activePriceCatalogue } from "../../lambda/adapters/fs/price-catalogue";
import type { CreditBalance } from "../../lambda/core/credits";
import { holdMicros } from "../../lambda/core/metering";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { callBounds } from "../../lambda/vendors/bounds";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

/**
 * 200 calls at once against a balance that covers 50 of their holds, all in flight together (the vendor
 * is slow to answer): holds never overdraw the balance, the ledger adds up to it, and the settled
 * charges are the exact costs of the calls' usage.
 */
let simulator: Simulator;
let stack: TestHost;
let credits: DynamoCredits;

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost({ ...simulatorEnv(simulator.origins), DMT_METERING: "on" });
  credits = new DynamoCredits(stack.db, tableNames(process.env));
});
afterAll(async () => {
  await stack.stop();
  await simulator.close();
});

const CALLS = 200;
const COVERED = 50;
const body = {
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Count the sheep in the field, one by one, slowly." }],
  max_tokens: 100,
};

describe("concurrent calls on one balance", () => {
  it("never spends beyond the holds, and the ledger adds up to the final balance exactly", async () => {
    // Pro tier: a burst of 1000, so the rate limit stays out of the way.
    const { key, projectId } = await stack.newKey({ tier: "pro" });
    const price = activePriceCatalogue({}).priceFor("openai", body.model, new Date());
    if (!price) throw new Error("gpt-4o-mini has no price");
    const hold = holdMicros(
      price,
      callBounds({ operation: "chat", json: body, form: undefined, uploadBytes: 0 }),
    );
    const granted = COVERED * hold;
    await credits.grant(projectId, granted, "test");
    simulator.inject({ vendor: "openai", fault: { kind: "slowFirstByte", ms: 1500 }, times: CALLS });

    // Sample the balance while the calls run: available never negative, nothing charged beyond the grant.
    const samples: CreditBalance[] = [];
    let running = true;
    const sampler = (async () => {
      while (running) samples.push(await credits.balance(projectId));
    })();
    const responses = await Promise.all(
      Array.from({ length: CALLS }, async () => {
        const res = await fetch(`${stack.url}/openai/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        return { status: res.status, json: await res.json() };
      }),
    );
    running = false;
    await sampler;
    await stack.drain();

    const answered = responses.filter((r) => r.status === 200);
    const refused = responses.filter((r) => r.status === 402);
    expect(answered.length + refused.length).toBe(CALLS);
    expect(answered.length).toBeGreaterThanOrEqual(COVERED);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) expect(r.json.error.code).toBe("insufficient_credits");
    // Refused calls never reached the vendor.
    expect(simulator.requests).toHaveLength(answered.length);

    expect(samples.length).toBeGreaterThan(0);
    for (const sample of samples) {
      expect(sample.availableMicros).toBeGreaterThanOrEqual(0);
      expect(sample.availableMicros + sample.heldMicros).toBeLessThanOrEqual(granted);
    }

    // Each answer's cost by hand: gpt-4o-mini at 0.15 (input) and 0.60 (output) USD per million tokens.
    const costs = answered.map((r) =>
      Math.ceil((r.json.usage.prompt_tokens * 150 + r.json.usage.completion_tokens * 600) / 1000),
    );
    const entries = [];
    let cursor: string | undefined;
    do {
      const page = await credits.ledger(projectId, { limit: 1000, ...(cursor ? { cursor } : {}) });
      entries.push(...page.entries);
      cursor = page.cursor;
    } while (cursor);
    // Holds are taken as leases of several calls' worth; each settles at its calls' total.
    const settled = entries.filter((e) => e.type === "settle");
    const spent = costs.reduce((sum, cost) => sum + cost, 0);
    expect(settled.reduce((sum, e) => sum + (e.chargedMicros ?? 0), 0)).toBe(spent);
    expect(settled.reduce((sum, e) => sum + (e.calls ?? 0), 0)).toBe(answered.length);
    for (const entry of settled) {
      expect(entry.chargedMicros).toBeLessThanOrEqual((entry.calls ?? 0) * hold);
      expect(entry.uncollectedMicros).toBe(0);
    }
    const balance = await credits.balance(projectId);
    expect(balance).toMatchObject({ availableMicros: granted - spent, heldMicros: 0, openHolds: 0 });
    expect(entries.reduce((sum, e) => sum + e.deltaMicros, 0)).toBe(balance.availableMicros);
  });
});
