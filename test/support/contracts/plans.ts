import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../../lambda/core/errors";
import {
  createPlan,
  deletePlan,
  type PlanStore,
  setProjectPlan,
  updatePlan,
} from "../../../lambda/core/plans";

export interface PlansUnderTest {
  store: PlanStore;
  close(): Promise<void>;
}

const T0 = 1_700_000_000_000;
const HOUR = 3_600_000;
const MODELS = ["gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5"];

/**
 * The cases every adapter of the plan port (`core/plans.ts`) must pass: plans created, versioned from a
 * stated moment, listed; projects put on plans now or later; a plan in use never deleted, however the
 * writes interleave.
 */
export function plansContract(name: string, make: () => Promise<PlansUnderTest>): void {
  describe(`plans contract: ${name}`, () => {
    let subject: PlansUnderTest;
    beforeAll(async () => {
      subject = await make();
    });
    afterAll(() => subject.close());
    const store = () => subject.store;

    it("creates, versions from a stated moment, lists and shows a plan", async () => {
      const { plan } = await createPlan(
        store(),
        "resell",
        { percent: "20", vendors: { openai: "15" }, models: { "gpt-4o*": "-5" } },
        MODELS,
        T0,
      );
      expect(plan.versions).toEqual([
        {
          version: 1,
          effectiveFrom: T0,
          createdAt: T0,
          percent: "20",
          vendors: { openai: "15" },
          models: { "gpt-4o*": "-5" },
        },
      ]);
      const updated = await updatePlan(store(), "resell", { percent: "25", at: T0 + HOUR }, MODELS, T0 + 10);
      expect(updated.plan.versions.map((v) => [v.version, v.percent, v.effectiveFrom])).toEqual([
        [1, "20", T0],
        [2, "25", T0 + HOUR],
      ]);
      // Rules not given are kept from the newest version.
      expect(updated.plan.versions[1]?.models).toEqual({ "gpt-4o*": "-5" });
      // A version scheduled later is replaced by one that starts before it.
      const again = await updatePlan(store(), "resell", { percent: "22", at: T0 + 60_000 }, MODELS, T0 + 20);
      expect(again.plan.versions.map((v) => [v.version, v.percent])).toEqual([
        [1, "20"],
        [3, "22"],
      ]);
      expect(await store().getPlan("resell")).toEqual(again.plan);
      expect((await store().listPlans()).map((p) => p.planId)).toContain("resell");
      const taken = await createPlan(store(), "resell", { percent: "1" }, MODELS, T0).catch(
        (e: unknown) => e,
      );
      expect((taken as ApiError).code).toBe("already_exists");
    });

    it("puts a project on a plan now or later, and refuses a plan that does not exist", async () => {
      await createPlan(store(), "later", { percent: "5" }, MODELS, T0);
      const now = await setProjectPlan(store(), "contract-p1", "resell", undefined, T0 + 100);
      expect(now.entries).toEqual([{ planId: "resell", from: T0 + 100 }]);
      const scheduled = await setProjectPlan(store(), "contract-p1", "later", T0 + HOUR, T0 + 200);
      expect(scheduled.entries).toEqual([
        { planId: "resell", from: T0 + 100 },
        { planId: "later", from: T0 + HOUR },
      ]);
      expect((await store().getProjectPlan("contract-p1"))?.entries).toEqual(scheduled.entries);
      const missing = await setProjectPlan(store(), "contract-p1", "nope", undefined, T0).catch(
        (e: unknown) => e,
      );
      expect((missing as ApiError).status).toBe(404);
    });

    it("refuses to delete a plan in use, now or scheduled, and deletes it once no project is on it", async () => {
      await createPlan(store(), "busy", { percent: "7" }, MODELS, T0);
      await createPlan(store(), "spare", { percent: "9" }, MODELS, T0);
      await setProjectPlan(store(), "contract-p2", "busy", undefined, T0);
      const refused = await deletePlan(store(), "busy", T0 + 1).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ApiError);
      expect((refused as ApiError).status).toBe(409);
      expect((refused as ApiError).code).toBe("plan_in_use");
      expect((refused as ApiError).message).toContain("contract-p2");
      expect(await store().getPlan("busy")).toBeDefined();

      // Moving away later: still in use until the move takes effect.
      await setProjectPlan(store(), "contract-p2", "spare", T0 + HOUR, T0 + 2);
      expect(((await deletePlan(store(), "busy", T0 + 3).catch((e: unknown) => e)) as ApiError).code).toBe(
        "plan_in_use",
      );
      // A scheduled plan is in use too.
      expect(((await deletePlan(store(), "spare", T0 + 3).catch((e: unknown) => e)) as ApiError).code).toBe(
        "plan_in_use",
      );
      // Once the move took effect, the old plan is free.
      await deletePlan(store(), "busy", T0 + HOUR + 1);
      expect(await store().getPlan("busy")).toBeUndefined();
      const gone = await deletePlan(store(), "busy", T0 + HOUR + 2).catch((e: unknown) => e);
      expect((gone as ApiError).status).toBe(404);
    });

    it("never deletes a plan a project is being put on at the same moment", async () => {
      for (let round = 0; round < 10; round++) {
        const planId = `race-${round}`;
        const projectId = `contract-race-${round}`;
        await createPlan(store(), planId, { percent: "3" }, MODELS, T0);
        const [assigned, deleted] = await Promise.allSettled([
          setProjectPlan(store(), projectId, planId, undefined, T0 + 5),
          deletePlan(store(), planId, T0 + 5),
        ]);
        const onPlan = (await store().getProjectPlan(projectId))?.entries.some((e) => e.planId === planId);
        const exists = (await store().getPlan(planId)) !== undefined;
        // Whichever wins, a project's plan always exists.
        if (onPlan) expect(exists).toBe(true);
        expect(assigned.status === "fulfilled" || deleted.status === "fulfilled").toBe(true);
      }
    });
  });
}
