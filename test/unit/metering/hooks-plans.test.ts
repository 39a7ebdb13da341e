import { describe, expect, it } from "vitest";
import { activePriceCatalogue } from "../../../lambda/adapters/fs/price-catalogue";
import { MemoryCredits } from "../../../lambda/adapters/memory/credits";
import { MemoryIdempotency } from "../../../lambda/adapters/memory/idempotency";
import { MemoryMasterKey } from "../../../lambda/adapters/memory/key-wrapper";
import { MemoryPlans } from "../../../lambda/adapters/memory/plans";
import { MemoryRateLimiter } from "../../../lambda/adapters/memory/rate-limit";
import { MemoryVendorKeys } from "../../../lambda/adapters/memory/vendor-keys";
import { silentLogger } from "../../../lambda/core/logger";
import { CachedVendorKeys } from "../../../lambda/core/metering-vendor-keys";
import { CachedPlans } from "../../../lambda/core/plan-cache";
import { createPlan, setProjectPlan, updatePlan } from "../../../lambda/core/plans";
import { costBreakdown, type PriceCatalogue } from "../../../lambda/core/pricing";
import type { Usage } from "../../../lambda/core/usage";
import { createMetering } from "../../../lambda/metering/hooks";
import { chatCall, outcomeOf, runCall } from "../../support/proxy-calls";

/**
 * Price plans through metering's hooks over the in-memory ports: what a project on a plan is held and
 * charged, what its record says, and that a plan change never reprices a call already made.
 */

const T0 = Date.UTC(2026, 10, 22, 12);
const MINUTE = 60_000;
/** Within the hold of a call asking for 2,000 output tokens (a call is charged at most its hold). */
const USAGE: Partial<Usage> = { inputTokens: 10, outputTokens: 1_937, cachedInputTokens: 4 };
const MODELS = ["gpt-4o-mini", "gpt-4o", "gpt-4.1"];

function deployment(prices: PriceCatalogue = activePriceCatalogue({}), cacheMs = 60_000) {
  let now = T0;
  const clock = () => now;
  const credits = new MemoryCredits(clock);
  const plans = new MemoryPlans();
  let planReads = 0;
  const counted = {
    getPlan: (id: string) => {
      planReads++;
      return plans.getPlan(id);
    },
    getProjectPlan: (id: string) => {
      planReads++;
      return plans.getProjectPlan(id);
    },
  };
  const metering = createMetering({
    credits,
    limiter: new MemoryRateLimiter(clock),
    idempotency: new MemoryIdempotency(clock),
    vendorKeys: new CachedVendorKeys(new MemoryVendorKeys(new MemoryMasterKey(), clock), 0, 100, clock),
    prices,
    plans: new CachedPlans(counted, prices.markup, cacheMs, 100, clock),
    logger: silentLogger,
    clock,
    holdTtlMs: 15 * MINUTE,
    noteChargesMs: 0,
  });
  return {
    credits,
    plans,
    metering,
    reads: () => planReads,
    now: () => now,
    advance(ms: number) {
      now += ms;
    },
    /** A managed call of `model` arriving now, run to its end; its billing. */
    async run(model = "gpt-4o-mini", usage = USAGE) {
      const call = chatCall({ startedAt: now, model, maxTokens: 2_000 });
      const { refused } = await runCall(metering, call, outcomeOf(usage));
      expect(refused).toBeUndefined();
      return call.billing;
    },
  };
}

/** List price of USAGE for a model, exactly as the catalogue prices it without markup. */
function listOf(prices: PriceCatalogue, model: string, usage = USAGE): number {
  const price = prices.priceFor("openai", model, new Date(T0));
  if (!price) throw new Error(model);
  return costBreakdown(outcomeOf(usage).usage, price, { applyMarkup: false }).micros;
}

/** ceil(list exact × (100 + percent) / 100) from the line amounts, recomputed independently. */
function billedOf(prices: PriceCatalogue, model: string, percent: number): number {
  const price = prices.priceFor("openai", model, new Date(T0));
  if (!price) throw new Error(model);
  const { items } = costBreakdown(outcomeOf(USAGE).usage, price, { applyMarkup: false });
  // amount_micros is exact to the nano-USD for these rates: sum them as integers of nano-USD.
  const nanos = items.reduce((sum, item) => sum + BigInt(Math.round(Number(item.amount_micros) * 1000)), 0n);
  const scaled = nanos * BigInt(100 + percent);
  const den = 100_000n;
  return Number((scaled + den - 1n) / den);
}

describe("price plans in metering", () => {
  it("a project on no plan pays the default plan: the deployment's markup, named in the record", async () => {
    const marked = activePriceCatalogue({ DMT_PRICE_MARKUP: "1.25" });
    const d = deployment(marked);
    await d.credits.grant("proj-test", 10_000_000, "test");
    const billing = await d.run();
    expect(billing?.breakdown?.plan).toEqual({ id: "default", version: 1, percent: "25" });
    expect(billing?.costMicros).toBe(billedOf(marked, "gpt-4o-mini", 25));
    expect(billing?.breakdown?.list_micros).toBe(listOf(marked, "gpt-4o-mini"));
  });

  it("a plan's markup replaces the deployment's; the record shows list and billed per line, summing to the totals", async () => {
    const prices = activePriceCatalogue({ DMT_PRICE_MARKUP: "1.1" });
    const d = deployment(prices);
    await d.credits.grant("proj-test", 10_000_000, "test");
    await createPlan(d.plans, "resell", { percent: "30" }, MODELS, T0);
    await setProjectPlan(d.plans, "proj-test", "resell", undefined, T0);
    const billing = await d.run();
    const breakdown = billing?.breakdown;
    expect(breakdown?.plan).toEqual({ id: "resell", version: 1, percent: "30" });
    expect(breakdown?.markup).toBe("1.3");
    expect(billing?.costMicros).toBe(billedOf(prices, "gpt-4o-mini", 30));
    expect(breakdown?.list_micros).toBe(listOf(prices, "gpt-4o-mini"));
    const items = breakdown?.items ?? [];
    expect(items.length).toBeGreaterThan(1);
    expect(items.reduce((sum, item) => sum + item.billed_micros, 0)).toBe(billing?.costMicros);
    expect(items.reduce((sum, item) => sum + item.list_micros, 0)).toBe(breakdown?.list_micros);
    for (const item of items) expect(Number.isInteger(item.billed_micros)).toBe(true);
    await d.metering.settle();
    expect((await d.credits.balance("proj-test")).availableMicros).toBe(
      10_000_000 - (billing?.costMicros ?? 0),
    );
  });

  it("the most specific rule wins: a model glob over the vendor's over the plan's; a discount charges less", async () => {
    const prices = activePriceCatalogue({});
    const d = deployment(prices);
    await d.credits.grant("proj-test", 10_000_000, "test");
    await createPlan(
      d.plans,
      "mixed",
      { percent: "50", vendors: { openai: "20" }, models: { "gpt-4o*": "10", "gpt-4o-mini": "-40" } },
      MODELS,
      T0,
    );
    await setProjectPlan(d.plans, "proj-test", "mixed", undefined, T0);
    expect((await d.run("gpt-4o-mini"))?.breakdown?.plan?.percent).toBe("-40");
    expect((await d.run("gpt-4o"))?.breakdown?.plan?.percent).toBe("10");
    const other = await d.run("gpt-4.1");
    expect(other?.breakdown?.plan?.percent).toBe("20");
    expect(other?.costMicros).toBe(billedOf(prices, "gpt-4.1", 20));
    expect((await d.run("gpt-4o-mini"))?.costMicros).toBe(billedOf(prices, "gpt-4o-mini", -40));
  });

  it("a plan at -100 is free: nothing held, nothing charged", async () => {
    const d = deployment();
    await createPlan(d.plans, "free", { percent: "-100" }, MODELS, T0);
    await setProjectPlan(d.plans, "proj-test", "free", undefined, T0);
    // No credits at all: a free call holds nothing, so it goes ahead.
    const billing = await d.run();
    expect(billing?.costMicros).toBe(0);
    expect(billing?.breakdown?.list_micros).toBeGreaterThan(0);
  });

  it("a change takes effect at its stated time and never reprices a call made before it", async () => {
    const prices = activePriceCatalogue({});
    const d = deployment(prices);
    await d.credits.grant("proj-test", 10_000_000, "test");
    await createPlan(d.plans, "standard", { percent: "10" }, MODELS, T0);
    await createPlan(d.plans, "gold", { percent: "-10" }, MODELS, T0);
    await setProjectPlan(d.plans, "proj-test", "standard", undefined, T0);
    const before = await d.run();
    const recorded = structuredClone(before);
    // Scheduled: the plan rises in an hour, the project moves to gold in two.
    await updatePlan(d.plans, "standard", { percent: "15", at: T0 + 60 * MINUTE }, MODELS, d.now());
    await setProjectPlan(d.plans, "proj-test", "gold", T0 + 120 * MINUTE, d.now());
    d.advance(59 * MINUTE);
    expect((await d.run())?.breakdown?.plan).toEqual({ id: "standard", version: 1, percent: "10" });
    d.advance(2 * MINUTE);
    const raised = await d.run();
    expect(raised?.breakdown?.plan).toEqual({ id: "standard", version: 2, percent: "15" });
    expect(raised?.costMicros).toBe(billedOf(prices, "gpt-4o-mini", 15));
    d.advance(60 * MINUTE);
    expect((await d.run())?.breakdown?.plan).toEqual({ id: "gold", version: 1, percent: "-10" });
    // The first call's figures are as they were.
    expect(before).toEqual(recorded);
    expect(before?.costMicros).toBe(billedOf(prices, "gpt-4o-mini", 10));
  });

  it("a scheduled change applies at its moment from the cache: the lookup stays off the store", async () => {
    const d = deployment(activePriceCatalogue({}), 24 * 60 * MINUTE);
    await d.credits.grant("proj-test", 100_000_000, "test");
    await createPlan(d.plans, "plan-a", { percent: "5" }, MODELS, T0);
    await createPlan(d.plans, "plan-b", { percent: "7" }, MODELS, T0);
    await setProjectPlan(d.plans, "proj-test", "plan-a", undefined, T0);
    await setProjectPlan(d.plans, "proj-test", "plan-b", T0 + 10 * MINUTE, T0);
    for (let i = 0; i < 50; i++) await d.run();
    // The project's entries and its two plans: read once for 50 calls.
    expect(d.reads()).toBe(3);
    d.advance(10 * MINUTE);
    expect((await d.run())?.breakdown?.plan?.id).toBe("plan-b");
    expect(d.reads()).toBe(3);
  });

  it("a BYOK call is counted at list price: no plan applies", async () => {
    const d = deployment();
    await createPlan(d.plans, "resell", { percent: "30" }, MODELS, T0);
    await setProjectPlan(d.plans, "proj-test", "resell", undefined, T0);
    const call = chatCall({ startedAt: d.now(), auth: { vendorKey: "sk-dual-vendor-half-0123456789" } });
    await runCall(d.metering, call, outcomeOf(USAGE));
    expect(call.billing?.mode).toBe("dual");
    expect(call.billing?.breakdown?.plan).toBeUndefined();
    expect(call.billing?.costMicros).toBe(call.billing?.breakdown?.list_micros);
  });
});
