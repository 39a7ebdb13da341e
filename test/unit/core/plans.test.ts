import { describe, expect, it } from "vitest";
import { MemoryPlans } from "../../../lambda/adapters/memory/plans";
import { ApiError } from "../../../lambda/core/errors";
import {
  createPlan,
  deletePlan,
  pairs,
  parsePercent,
  percentFor,
  percentOfMarkup,
  projectPlanView,
  ratioOfPercent,
  setProjectPlan,
  updatePlan,
} from "../../../lambda/core/plans";

/** Plans' rules and the refusals a person typing a plan meets. */

const T0 = Date.UTC(2026, 11, 1);
const MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5", "gemini-2.5-pro"];

async function refusal(work: Promise<unknown>): Promise<ApiError> {
  const err = await work.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ApiError);
  return err as ApiError;
}

describe("plan percentages", () => {
  it.each([
    ["10", "10"],
    ["-5", "-5"],
    ["+12.50", "12.5"],
    ["0.0001", "0.0001"],
    ["-100", "-100"],
    ["900", "900"],
    ["15%", "15"],
    [7, "7"],
  ])("reads %s as %s", (raw, text) => {
    expect(parsePercent("percent", raw)).toBe(text);
  });

  it.each([
    ["below -100", "-100.01", "below -100"],
    ["far below -100", "-250", "below -100"],
    ["above 900", "901", "900"],
    ["not a number", "ten", "percentage"],
    ["empty", "", "percentage"],
    ["NaN", Number.NaN, "percentage"],
    ["Infinity", Number.POSITIVE_INFINITY, "percentage"],
    ["a factor's exponent", "1e3", "percentage"],
    ["five decimals", "1.23456", "percentage"],
    ["two signs", "--5", "percentage"],
  ])("refuses %s with 400 invalid_field", (_label, raw, why) => {
    let err: unknown;
    try {
      parsePercent("percent", raw);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).code).toBe("invalid_field");
    expect((err as ApiError).message).toContain(why);
  });

  it("turns a percentage into an exact ratio, and the deployment's markup into the default plan's", () => {
    expect(ratioOfPercent("10")).toEqual({ num: 1_100_000n, den: 1_000_000n });
    expect(ratioOfPercent("-100").num).toBe(0n);
    expect(ratioOfPercent("-12.5")).toEqual({ num: 875_000n, den: 1_000_000n });
    expect(percentOfMarkup({ num: 11n, den: 10n })).toBe("10");
    expect(percentOfMarkup({ num: 1n, den: 1n })).toBe("0");
    expect(percentOfMarkup({ num: 9n, den: 10n })).toBe("-10");
  });

  it("picks the most specific rule: an exact model over a glob over the vendor over the plan", () => {
    const rules = {
      percent: "30",
      vendors: { openai: "20" },
      models: { "gpt-*": "15", "gpt-4o*": "10", "gpt-4o-mini": "5" },
    };
    expect(percentFor(rules, "openai", ["gpt-4o-mini"])).toBe("5");
    expect(percentFor(rules, "openai", ["gpt-4o"])).toBe("10");
    expect(percentFor(rules, "openai", ["gpt-4.1"])).toBe("15");
    expect(percentFor(rules, "openai", ["o3"])).toBe("20");
    expect(percentFor(rules, "anthropic", ["claude-sonnet-4-5"])).toBe("30");
    // The catalogue's id or the name the request used, whichever matches.
    expect(percentFor(rules, "openai", ["gpt-4o", "gpt-4o-mini-2024-07-18"])).toBe("10");
  });
});

describe("plan changes: bad input", () => {
  it("refuses a percentage below -100 or not a number, storing nothing", async () => {
    const store = new MemoryPlans();
    expect((await refusal(createPlan(store, "cheap", { percent: "-101" }, MODELS, T0))).status).toBe(400);
    expect((await refusal(createPlan(store, "cheap", { percent: "abc" }, MODELS, T0))).status).toBe(400);
    expect(
      (await refusal(createPlan(store, "cheap", { percent: "5", vendors: { openai: "x" } }, MODELS, T0)))
        .message,
    ).toContain("vendor openai");
    expect(
      (await refusal(createPlan(store, "cheap", { percent: "5", models: { "gpt-4o": "-300" } }, MODELS, T0)))
        .message,
    ).toContain("model gpt-4o");
    expect(await store.listPlans()).toEqual([]);
    await createPlan(store, "cheap", { percent: "5" }, MODELS, T0);
    expect((await refusal(updatePlan(store, "cheap", { percent: "-100.5" }, MODELS, T0))).status).toBe(400);
    expect((await store.getPlan("cheap"))?.versions).toHaveLength(1);
  });

  it("warns, without refusing, about a model glob no catalogue model matches", async () => {
    const store = new MemoryPlans();
    const { plan, warnings } = await createPlan(
      store,
      "future",
      { percent: "5", models: { "gpt-7*": "2", "gpt-4o*": "3" } },
      MODELS,
      T0,
    );
    expect(warnings).toEqual([
      "model glob 'gpt-7*' matches no model of the price catalogue (kept: it may name a newer model)",
    ]);
    expect(plan.versions[0]?.models).toEqual({ "gpt-7*": "2", "gpt-4o*": "3" });
  });

  it.each([
    ["an unknown vendor", { percent: "5", vendors: { azure: "3" } }, "vendor"],
    ["a model glob with spaces", { percent: "5", models: { "gpt 4o": "3" } }, "model"],
    ["no percentage", {}, "percent"],
  ])("refuses %s", async (_label, input, field) => {
    const err = await refusal(createPlan(new MemoryPlans(), "plan-x", input, MODELS, T0));
    expect(err.status).toBe(400);
    expect(err.message).toContain(field);
  });

  it("refuses ids that are not ids, and `default`, which is the deployment's markup", async () => {
    const store = new MemoryPlans();
    for (const id of ["default", "A", "x", "has space", "-lead", "a".repeat(64)]) {
      expect((await refusal(createPlan(store, id, { percent: "5" }, MODELS, T0))).status).toBe(400);
    }
    expect((await refusal(updatePlan(store, "default", { percent: "5" }, MODELS, T0))).code).toBe(
      "read_only",
    );
    expect((await refusal(deletePlan(store, "default", T0))).code).toBe("read_only");
  });

  it("refuses a start in the past: a recorded call is never repriced", async () => {
    const store = new MemoryPlans();
    expect(
      (await refusal(createPlan(store, "late", { percent: "5", at: T0 - 1 }, MODELS, T0))).message,
    ).toContain("never repriced");
    await createPlan(store, "late", { percent: "5" }, MODELS, T0);
    expect((await refusal(updatePlan(store, "late", { percent: "6", at: T0 - 1 }, MODELS, T0))).status).toBe(
      400,
    );
    expect((await refusal(setProjectPlan(store, "proj-a", "late", T0 - 1, T0))).status).toBe(400);
  });

  it("refuses to put a project on a plan that does not exist, and to change or delete one that does not", async () => {
    const store = new MemoryPlans();
    expect((await refusal(setProjectPlan(store, "proj-a", "ghost", undefined, T0))).status).toBe(404);
    expect((await refusal(updatePlan(store, "ghost", { percent: "1" }, MODELS, T0))).status).toBe(404);
    expect((await refusal(deletePlan(store, "ghost", T0))).status).toBe(404);
    expect(await store.getProjectPlan("proj-a")).toBeUndefined();
  });

  it("refuses to delete a plan in use (409 plan_in_use, naming the project)", async () => {
    const store = new MemoryPlans();
    await createPlan(store, "kept", { percent: "5" }, MODELS, T0);
    await setProjectPlan(store, "proj-a", "kept", undefined, T0);
    const err = await refusal(deletePlan(store, "kept", T0 + 1));
    expect([err.status, err.code]).toEqual([409, "plan_in_use"]);
    expect(err.message).toContain("proj-a");
    // Moved back to the default plan, it can go.
    await setProjectPlan(store, "proj-a", "default", undefined, T0 + 2);
    await deletePlan(store, "kept", T0 + 3);
    expect(await store.getPlan("kept")).toBeUndefined();
  });

  it("reads `name=percent` pairs, and refuses a word without `=`", () => {
    expect(pairs("vendor", ["openai=5", "gemini=-2"])).toEqual({ openai: "5", gemini: "-2" });
    expect(pairs("vendor", [])).toBeUndefined();
    expect(() => pairs("model", ["gpt-4o"])).toThrow(/not <name>=<percent>/);
  });
});

describe("what a project's members see", () => {
  it("the plan in force, then each change to come: a new version, a move, a move back to the default", async () => {
    const store = new MemoryPlans();
    const HOUR = 3_600_000;
    const markup = { num: 11n, den: 10n };
    expect((await projectPlanView(store, "proj-a", markup, T0)).current).toMatchObject({
      planId: "default",
      percent: "10",
      version: 1,
    });
    await createPlan(store, "std", { percent: "5", name: "Standard" }, MODELS, T0);
    await createPlan(store, "gold", { percent: "-5" }, MODELS, T0);
    await setProjectPlan(store, "proj-a", "std", undefined, T0);
    await updatePlan(store, "std", { percent: "6", at: T0 + HOUR }, MODELS, T0);
    await setProjectPlan(store, "proj-a", "gold", T0 + 2 * HOUR, T0);
    await setProjectPlan(store, "proj-a", "default", T0 + 3 * HOUR, T0);
    const view = await projectPlanView(store, "proj-a", markup, T0 + 1);
    expect(view.current).toMatchObject({ planId: "std", name: "Standard", version: 1, percent: "5" });
    expect(view.scheduled.map((s) => [s.from - T0, s.planId, s.version, s.percent])).toEqual([
      [HOUR, "std", 2, "6"],
      [2 * HOUR, "gold", 1, "-5"],
      [3 * HOUR, "default", 1, "10"],
    ]);
  });
});
