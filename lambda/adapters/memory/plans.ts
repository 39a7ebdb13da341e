import { liveEntries, namedPlans, type Plan, type PlanStore, type ProjectPlan } from "../../core/plans";
import { ConflictError } from "../../core/ports";

/**
 * Plans in memory, with the DynamoDB adapter's semantics (adapters/dynamodb/plans.ts): each plan keeps
 * the projects whose entries name it, changed in the same atomic step as the project's entries, so a
 * plan in use cannot be deleted. Every operation yields first, as a store round trip would.
 */
export class MemoryPlans implements PlanStore {
  private readonly plans = new Map<string, { plan: Plan; projects: Set<string> }>();
  private readonly projects = new Map<string, ProjectPlan & { revision: number }>();

  async createPlan(plan: Plan): Promise<void> {
    await turn();
    if (this.plans.has(plan.planId)) throw new ConflictError(`plan ${plan.planId} exists`);
    this.plans.set(plan.planId, { plan: structuredClone(plan), projects: new Set() });
  }

  async updatePlan(plan: Plan, expectedVersions: number): Promise<void> {
    await turn();
    const stored = this.plans.get(plan.planId);
    if (!stored || stored.plan.versions.length !== expectedVersions) {
      throw new ConflictError(`plan ${plan.planId} changed`);
    }
    stored.plan = structuredClone(plan);
  }

  async getPlan(planId: string): Promise<Plan | undefined> {
    await turn();
    const stored = this.plans.get(planId);
    return stored && structuredClone(stored.plan);
  }

  async listPlans(): Promise<Plan[]> {
    await turn();
    return [...this.plans.values()]
      .map((stored) => structuredClone(stored.plan))
      .sort((a, b) => (a.planId < b.planId ? -1 : 1));
  }

  async deletePlan(planId: string, now: number) {
    await turn();
    const stored = this.plans.get(planId);
    if (!stored) return { outcome: "missing" as const };
    // A project whose move away took effect no longer counts.
    const using = [...stored.projects].filter((projectId) =>
      namedPlans(liveEntries(this.projects.get(projectId)?.entries ?? [], now)).has(planId),
    );
    if (using.length > 0) return { outcome: "in_use" as const, projects: using.sort() };
    this.plans.delete(planId);
    return { outcome: "deleted" as const };
  }

  async getProjectPlan(projectId: string): Promise<ProjectPlan | undefined> {
    await turn();
    const stored = this.projects.get(projectId);
    return stored && structuredClone(stored);
  }

  async setProjectPlan(next: ProjectPlan, previous: ProjectPlan | undefined): Promise<void> {
    await turn();
    const stored = this.projects.get(next.projectId);
    if ((stored?.revision ?? undefined) !== (previous?.revision ?? undefined)) {
      throw new ConflictError(`project ${next.projectId} plan changed`);
    }
    const before = namedPlans(stored?.entries ?? []);
    const after = namedPlans(next.entries);
    for (const planId of after) {
      if (!this.plans.has(planId)) throw new ConflictError(`plan ${planId} does not exist`);
    }
    for (const planId of before)
      if (!after.has(planId)) this.plans.get(planId)?.projects.delete(next.projectId);
    for (const planId of after) this.plans.get(planId)?.projects.add(next.projectId);
    this.projects.set(next.projectId, {
      projectId: next.projectId,
      entries: structuredClone(next.entries),
      revision: (stored?.revision ?? 0) + 1,
    });
  }
}

const turn = () => Promise.resolve();
