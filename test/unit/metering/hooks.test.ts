import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { activePriceCatalogue } from "../../../lambda/adapters/fs/price-catalogue";
import { MemoryBudgets } from "../../../lambda/adapters/memory/budgets";
import { MemoryCredits } from "../../../lambda/adapters/memory/credits";
import { MemoryIdempotency } from "../../../lambda/adapters/memory/idempotency";
import { MemoryMasterKey } from "../../../lambda/adapters/memory/key-wrapper";
import { MemoryRateLimiter } from "../../../lambda/adapters/memory/rate-limit";
import { MemoryVendorKeys } from "../../../lambda/adapters/memory/vendor-keys";
import { counterId, newBudget, windowSpan } from "../../../lambda/core/budgets";
import type { ProxyCall } from "../../../lambda/core/call";
import { formatUsd, type LedgerEntry } from "../../../lambda/core/credits";
import { REPLAY_HEADER } from "../../../lambda/core/idempotency";
import { silentLogger } from "../../../lambda/core/logger";
import { holdMicros } from "../../../lambda/core/metering";
import { CachedVendorKeys } from "../../../lambda/core/metering-vendor-keys";
import { costBreakdown, type ModelPrice } from "../../../lambda/core/pricing";
import type { Usage } from "../../../lambda/core/usage";
import { BudgetGuard } from "../../../lambda/metering/budgets";
import { DEFAULT_LEASES, type LeaseTimes } from "../../../lambda/metering/credit-leases";
import { BILLING_MODE_HEADER, createMetering, type Metering } from "../../../lambda/metering/hooks";
import { callBounds } from "../../../lambda/vendors/bounds";
import { type ChatCallOptions, chatCall, outcomeOf, runCall } from "../../support/proxy-calls";

/**
 * Metering's hooks over the in-memory store ports: what a user of the proxy relies on, from the hold
 * before a call to its charge after it, without a server, a vendor or a DynamoDB.
 */

const T0 = Date.UTC(2026, 10, 22, 12);
const MINUTE = 60_000;
const prices = activePriceCatalogue({});
const USAGE: Partial<Usage> = { inputTokens: 1_000, outputTokens: 400 };

/** One store shared by every process of a test, and a way to start a process's metering on it. */
function deployment() {
  let now = T0;
  const clock = () => now;
  const credits = new MemoryCredits(clock);
  const limiter = new MemoryRateLimiter(clock);
  const idempotency = new MemoryIdempotency(clock);
  const vendorKeys = new MemoryVendorKeys(new MemoryMasterKey(), clock);
  const budgets = new MemoryBudgets(clock);
  const process = (leases?: LeaseTimes): Metering =>
    createMetering({
      credits,
      limiter,
      idempotency,
      vendorKeys: new CachedVendorKeys(vendorKeys, 0, 100, clock),
      prices,
      logger: silentLogger,
      clock,
      holdTtlMs: 15 * MINUTE,
      noteChargesMs: 0,
      ...(leases && { leases }),
      budgets: new BudgetGuard({
        counters: budgets,
        clock,
        logger: silentLogger,
        cacheMs: 0,
        holdTtlMs: 15 * MINUTE,
        noteChargesMs: 0,
        ...(leases && { leases }),
      }),
    });
  return {
    credits,
    vendorKeys,
    budgets,
    metering: process(),
    process,
    /** A call arriving now. */
    call: (options: ChatCallOptions = {}) => chatCall({ startedAt: now, ...options }),
    advance(ms: number) {
      now += ms;
    },
  };
}

function priceOf(model = "gpt-4o-mini"): ModelPrice {
  const price = prices.priceFor("openai", model, new Date(T0));
  if (!price) throw new Error(`no price for ${model}`);
  return price;
}

/** What a chat call holds: its input and its output limit at the price, markup included. */
function holdOf(call: ProxyCall): number {
  return holdMicros(
    priceOf(call.model),
    callBounds({
      operation: "chat",
      json: call.body,
      form: undefined,
      uploadBytes: call.rawBody?.length ?? 0,
    }),
  );
}

/** What usage costs a managed call, markup included. */
const costOf = (usage: Partial<Usage>) =>
  costBreakdown(outcomeOf(usage).usage, priceOf(), { applyMarkup: true }).micros;

async function ledgerSum(credits: MemoryCredits, projectId: string): Promise<number> {
  const { entries } = await credits.ledger(projectId, { limit: 1000 });
  return entries.reduce((sum: number, entry: LedgerEntry) => sum + entry.deltaMicros, 0);
}

describe("credits: a managed call", () => {
  it("is held before it is forwarded, charged its actual cost after, and the rest of the hold comes back", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const call = d.call({ maxTokens: 2_000 });
    const admission = await runCall(d.metering, call);
    expect(admission.refused).toBeUndefined();
    expect(call.responseHeaders[BILLING_MODE_HEADER]).toBe("managed");
    // The hold is on the balance before the vendor is called.
    expect((await d.credits.balance("proj-test")).availableMicros).toBeLessThanOrEqual(
      1_000_000 - holdOf(call),
    );

    await d.metering.after?.(call, outcomeOf(USAGE));
    expect(costOf(USAGE)).toBeLessThan(holdOf(call));
    expect(call.billing).toMatchObject({ mode: "managed", costMicros: costOf(USAGE) });
    await d.metering.settle();
    expect(await d.credits.balance("proj-test")).toMatchObject({
      availableMicros: 1_000_000 - costOf(USAGE),
      heldMicros: 0,
      openHolds: 0,
    });
    expect(await ledgerSum(d.credits, "proj-test")).toBe(1_000_000 - costOf(USAGE));
  });

  it("costs nothing when the vendor failed: the whole hold comes back", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const call = d.call();
    await runCall(
      d.metering,
      call,
      outcomeOf(USAGE, { status: 500, error: { type: "vendor_error", code: "500" } }),
    );
    expect(call.billing?.costMicros).toBe(0);
    await d.metering.settle();
    expect(await d.credits.balance("proj-test")).toMatchObject({ availableMicros: 1_000_000, openHolds: 0 });
  });

  it("is charged at most its hold; the ledger keeps the excess as uncollected", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const call = d.call({ maxTokens: 10 });
    const beyond = { inputTokens: 50_000, outputTokens: 5_000 };
    await runCall(d.metering, call, outcomeOf(beyond));
    expect(costOf(beyond)).toBeGreaterThan(holdOf(call));
    expect(call.billing?.costMicros).toBe(holdOf(call));
    expect(call.billing?.breakdown?.charged_micros).toBe(holdOf(call));
    await d.metering.settle();
    const { entries } = await d.credits.ledger("proj-test");
    expect(entries.find((e) => e.type === "settle")).toMatchObject({
      chargedMicros: holdOf(call),
      uncollectedMicros: costOf(beyond) - holdOf(call),
    });
    expect((await d.credits.balance("proj-test")).availableMicros).toBe(1_000_000 - holdOf(call));
  });

  it("is refused 402 insufficient_credits, naming both amounts, when the balance cannot cover its hold", async () => {
    const d = deployment();
    const call = d.call({ maxTokens: 4_000 });
    await d.credits.grant("proj-test", holdOf(call) - 1, "test");
    const { refused } = await runCall(d.metering, call);
    expect(refused).toMatchObject({ status: 402, code: "insufficient_credits" });
    expect(refused?.message).toContain(formatUsd(holdOf(call)));
    expect(refused?.message).toContain(formatUsd(holdOf(call) - 1));
    await d.metering.settle();
    expect(await d.credits.balance("proj-test")).toMatchObject({
      availableMicros: holdOf(call) - 1,
      openHolds: 0,
    });
  });

  it("never overspends: 40 calls at once from two processes on a balance that covers 10", async () => {
    const d = deployment();
    const hold = holdOf(d.call({ maxTokens: 1_000 }));
    await d.credits.grant("proj-test", 10 * hold, "test");
    const processes = [d.metering, d.process()];
    const calls = Array.from({ length: 40 }, () => d.call({ maxTokens: 1_000 }));
    // Each call used far more than it held: it is charged its whole hold.
    const results = await Promise.all(
      calls.map((call, i) =>
        runCall(processes[i % 2] as Metering, call, outcomeOf({ inputTokens: 90_000, outputTokens: 9_000 })),
      ),
    );
    const admitted = results.filter((r) => r.refused === undefined).length;
    for (const r of results) if (r.refused) expect(r.refused).toMatchObject({ code: "insufficient_credits" });
    expect(admitted).toBeGreaterThan(0);
    expect(admitted).toBeLessThanOrEqual(10);
    await Promise.all(processes.map((p) => p.settle()));
    const charged = calls.reduce((sum, call) => sum + (call.billing?.costMicros ?? 0), 0);
    expect(charged).toBe(admitted * hold);
    const balance = await d.credits.balance("proj-test");
    expect(balance).toMatchObject({ availableMicros: 10 * hold - charged, openHolds: 0 });
    expect(await ledgerSum(d.credits, "proj-test")).toBe(balance.availableMicros);
  });

  it("a lease kept through idle time (Lambda's frozen containers) serves the next call; one that settles when idle does not", async () => {
    const d = deployment();
    await d.credits.grant("proj-frozen", 1_000_000, "test");
    await d.credits.grant("proj-idle", 1_000_000, "test");
    const budget = newBudget({ projectId: "proj-frozen", usd: "100", window: "month" }, T0, "b-frozen");
    await d.budgets.put(budget);
    await d.budgets.put(newBudget({ projectId: "proj-idle", usd: "100", window: "month" }, T0, "b-idle"));
    const frozen = d.process({ openMs: 15 * MINUTE, idleMs: 15 * MINUTE });
    const idle = d.process({ openMs: 15 * MINUTE, idleMs: 1 });
    const twoCalls = async (metering: Metering, projectId: string) => {
      await runCall(metering, d.call({ projectId }), outcomeOf(USAGE));
      d.advance(MINUTE);
      if (metering === idle) {
        // Its timer settles the idle lease while it waits.
        while ((await d.credits.balance(projectId)).openHolds > 0) await sleep(5);
      } else {
        // Long enough for the default idle time's timer to have settled it, were it used.
        await sleep(DEFAULT_LEASES.idleMs + 500);
        expect((await d.credits.balance(projectId)).openHolds).toBe(1);
      }
      await runCall(metering, d.call({ projectId }), outcomeOf(USAGE));
      await metering.settle();
      const { entries } = await d.credits.ledger(projectId, { limit: 100 });
      return entries.filter((e) => e.type === "hold").length;
    };
    // One credit lease for both calls, a minute apart; the other process took one per call.
    expect(await twoCalls(frozen, "proj-frozen")).toBe(1);
    expect(await twoCalls(idle, "proj-idle")).toBe(2);
    // The same for the budget window's lease: one hold settled with both calls' charges.
    const spend = await d.budgets.spend(counterId(budget, windowSpan("month", T0), null));
    expect(spend).toEqual({ spentMicros: 2 * costOf(USAGE), heldMicros: 0 });
  });

  it("is refused 404 model_not_found for a model without a price, holding nothing", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const { refused } = await runCall(d.metering, d.call({ model: "gpt-unheard-of" }));
    expect(refused).toMatchObject({ status: 404, code: "model_not_found" });
    expect((await d.credits.balance("proj-test")).availableMicros).toBe(1_000_000);
  });

  it("is refused 403 model_not_allowed outside its key's allowlist", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const call = d.call({ auth: { models: ["gpt-4.1*"] } });
    expect((await runCall(d.metering, call)).refused).toMatchObject({
      status: 403,
      code: "model_not_allowed",
    });
  });
});

describe("who pays", () => {
  it("a project's stored vendor key pays (BYOK): forwarded, and no credit is held or charged", async () => {
    const d = deployment();
    const key = `sk-proj-${"k".repeat(40)}`;
    await d.vendorKeys.set("proj-test", "openai", key);
    const call = d.call();
    const admission = await runCall(d.metering, call, outcomeOf(USAGE));
    expect(admission).toEqual({ refused: undefined, decision: { vendorKey: key } });
    expect(call.responseHeaders[BILLING_MODE_HEADER]).toBe("byok");
    // Counted at list price (no markup), charged to nobody's credits.
    expect(call.billing).toMatchObject({
      mode: "byok",
      costMicros: costBreakdown(outcomeOf(USAGE).usage, priceOf()).micros,
    });
    expect(await d.credits.ledger("proj-test")).toEqual({ entries: [] });
  });

  it("a dual key's vendor half pays, and a malformed one is refused 401", async () => {
    const d = deployment();
    const call = d.call({ auth: { vendorKey: "sk-vendor-half-000000" } });
    expect((await runCall(d.metering, call, outcomeOf(USAGE))).refused).toBeUndefined();
    expect(call.billing?.mode).toBe("dual");
    const bad = d.call({ auth: { vendorKey: "sk vendor half" } });
    expect((await runCall(d.metering, bad)).refused).toMatchObject({ status: 401, code: "invalid_api_key" });
  });
});

describe("idempotency: X-Request-ID", () => {
  it("a retry of a call that succeeded replays its response and is not charged again", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const first = d.call({ requestId: "order-42" });
    const admission = await runCall(d.metering, first, outcomeOf(USAGE));
    expect(admission.refused === undefined && admission.decision?.keepResponseBytes).toBeGreaterThan(0);

    const retry = d.call({ requestId: "order-42" });
    const replayed = await runCall(d.metering, retry);
    if (replayed.refused !== undefined) throw replayed.refused;
    const replay = replayed.decision?.replay;
    expect(replay?.status).toBe(200);
    expect(replay?.headers).toContainEqual([REPLAY_HEADER, "true"]);
    expect(Buffer.concat(replay?.chunks ?? []).toString()).toContain("chatcmpl-1");
    await d.metering.after?.(retry, outcomeOf(USAGE, { replayed: true }));
    expect(retry.billing?.costMicros).toBe(0);
    await d.metering.settle();
    expect((await d.credits.balance("proj-test")).availableMicros).toBe(1_000_000 - costOf(USAGE));
  });

  it("a retry while the first runs gets 409, the same id for another request 422, and a failed call runs again", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const first = d.call({ requestId: "job-7" });
    expect((await runCall(d.metering, first)).refused).toBeUndefined();
    expect((await runCall(d.metering, d.call({ requestId: "job-7" }))).refused).toMatchObject({
      status: 409,
      code: "request_in_progress",
    });
    const other = d.call({ requestId: "job-7", maxTokens: 5 });
    expect((await runCall(d.metering, other)).refused).toMatchObject({
      status: 422,
      code: "request_id_reused",
    });
    await d.metering.after?.(
      first,
      outcomeOf({}, { status: 502, error: { type: "vendor_error", code: "502" } }),
    );
    expect(
      (await runCall(d.metering, d.call({ requestId: "job-7" }), outcomeOf(USAGE))).refused,
    ).toBeUndefined();
  });
});

describe("the key's rate limit", () => {
  it("admits the burst with X-RateLimit headers, refuses the next 429 with Retry-After, and refills", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 1_000_000, "test");
    const limited = { auth: { rateLimit: { rpm: 60, burst: 2 } } };
    for (let i = 0; i < 2; i++) {
      const call = d.call(limited);
      expect((await runCall(d.metering, call, outcomeOf(USAGE))).refused).toBeUndefined();
      expect(call.responseHeaders).toMatchObject({
        "X-RateLimit-Limit": "60",
        "X-RateLimit-Remaining": String(1 - i),
      });
    }
    const refused = d.call(limited);
    expect((await runCall(d.metering, refused)).refused).toMatchObject({
      status: 429,
      code: "rate_limit_exceeded",
      headers: expect.objectContaining({ "Retry-After": "1" }),
    });
    // A refused call holds nothing and leaves its key's budget and credits alone.
    expect(refused.billing?.costMicros).toBe(0);
    d.advance(1_000);
    expect((await runCall(d.metering, d.call(limited), outcomeOf(USAGE))).refused).toBeUndefined();
  });
});

describe("budgets and TPM through the hooks", () => {
  it("a hard daily budget refuses 402 budget_exceeded once spent, with the reset; the next UTC day admits again", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 100_000_000, "test");
    const hold = holdOf(d.call({ maxTokens: 1_000 }));
    // Room for two calls' holds and a bit.
    const limit = formatUsd(Math.floor(2.5 * hold)).slice(1);
    await d.budgets.put(newBudget({ projectId: "proj-test", usd: limit, window: "day" }, T0));
    const results = [];
    for (let i = 0; i < 4; i++) {
      const call = d.call({ maxTokens: 1_000 });
      results.push({
        call,
        ...(await runCall(d.metering, call, outcomeOf({ inputTokens: 90_000, outputTokens: 9_000 }))),
      });
    }
    expect(results.map((r) => r.refused?.code)).toEqual([
      undefined,
      undefined,
      "budget_exceeded",
      "budget_exceeded",
    ]);
    expect(results[0]?.call.responseHeaders).toHaveProperty("X-Budget-Remaining-USD");
    const refusal = results[2]?.refused;
    expect(refusal?.status).toBe(402);
    expect(refusal?.message).toContain("the project's daily budget");
    expect(refusal?.headers["X-Budget-Reset"]).toBe(String(Date.UTC(2026, 10, 23) / 1000));

    d.advance(12 * 60 * MINUTE);
    expect(
      (await runCall(d.metering, d.call({ maxTokens: 1_000 }), outcomeOf(USAGE))).refused,
    ).toBeUndefined();
  });

  it("a soft budget counts and never refuses", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 100_000_000, "test");
    await d.budgets.put(
      newBudget({ projectId: "proj-test", usd: "0.000001", window: "total", soft: true }, T0),
    );
    for (let i = 0; i < 3; i++) {
      expect((await runCall(d.metering, d.call(), outcomeOf(USAGE))).refused).toBeUndefined();
    }
  });

  it("a key past its tokens per minute gets 429 with Retry-After, and the next minute admits it", async () => {
    const d = deployment();
    await d.credits.grant("proj-test", 100_000_000, "test");
    const tpm = { maxTokens: 300, auth: { tpm: 500 } };
    expect(
      (await runCall(d.metering, d.call(tpm), outcomeOf({ inputTokens: 20, outputTokens: 300 }))).refused,
    ).toBeUndefined();
    const { refused } = await runCall(d.metering, d.call(tpm));
    expect(refused).toMatchObject({ status: 429, code: "rate_limit_exceeded" });
    expect(refused?.message).toContain("Tokens-per-minute limit of 500");
    d.advance(MINUTE);
    expect((await runCall(d.metering, d.call(tpm), outcomeOf(USAGE))).refused).toBeUndefined();
  });
});
