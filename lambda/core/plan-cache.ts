import {
  type AppliedPlan,
  DEFAULT_PLAN_ID,
  defaultPlan,
  entryAt,
  namedPlans,
  type Plan,
  type PlanEntry,
  type PlanStore,
  percentFor,
  ratioOfPercent,
  versionAt,
} from "./plans";
import type { Ratio } from "./pricing/decimal";
import type { VendorName } from "./vendor-names";

/** A project's entries and the plans they name, as read together. */
interface ProjectPlans {
  entries: readonly PlanEntry[];
  plans: ReadonlyMap<string, Plan>;
}

/** What metering asks per call: the plan that prices a project's call to a model at a moment. */
export interface PlanLookup {
  applied(projectId: string, vendor: VendorName, models: readonly string[], at: number): Promise<AppliedPlan>;
  /** Starts reading a project's plan when it is not cached, so `applied` finds it. */
  warm?(projectId: string): void;
}

/**
 * Caches each project's plan (its entries and the plans they name) for `ttlMs`, as keys are cached
 * (key-cache.ts): a plan change made elsewhere applies within that time, and a change scheduled for a
 * moment applies at that moment, since the cache holds the schedule. Concurrent lookups of a project
 * share one read; a failed read is not kept. The percentages per model are kept per plan version, so a
 * warm call costs a map lookup. The default plan (no entry) is the deployment's markup.
 */
export class CachedPlans implements PlanLookup {
  private readonly entries = new Map<string, { value: Promise<ProjectPlans>; expires: number }>();
  private readonly fallback: Plan;
  /** Applied plans by plan version and model: the same object for every call that shares them. */
  private readonly appliedOf = new WeakMap<object, Map<string, AppliedPlan>>();

  constructor(
    private readonly store: Pick<PlanStore, "getProjectPlan" | "getPlan">,
    private readonly markup: Ratio,
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
    private readonly clock: () => number = Date.now,
  ) {
    this.fallback = defaultPlan(markup);
  }

  async applied(
    projectId: string,
    vendor: VendorName,
    models: readonly string[],
    at: number,
  ): Promise<AppliedPlan> {
    const { entries, plans } = await this.lookup(projectId);
    const entry = entryAt(entries, at);
    // A plan deleted under a scheduled entry cannot be: deletion refuses plans any entry names.
    const plan = (entry && plans.get(entry.planId)) ?? this.fallback;
    const version = versionAt(plan.versions, at) ?? (plan.versions[0] as Plan["versions"][number]);
    let byModel = this.appliedOf.get(version);
    if (!byModel) {
      byModel = new Map();
      this.appliedOf.set(version, byModel);
    }
    const key = `${vendor}/${models.join("\u0000")}`;
    let applied = byModel.get(key);
    if (!applied) {
      const percent = percentFor(version, vendor, models);
      // The default plan charges the markup exactly (its percentage is for reading).
      const ratio = plan === this.fallback ? this.markup : ratioOfPercent(percent);
      applied = { id: plan.planId, version: version.version, percent, ratio };
      if (byModel.size >= 1000) byModel.clear();
      byModel.set(key, applied);
    }
    return applied;
  }

  warm(projectId: string): void {
    // Nothing kept: `applied` reads anyway, and a second read would only double the store's work.
    if (this.ttlMs <= 0) return;
    // A failed read is dropped from the cache and read again by `applied`.
    this.lookup(projectId).catch(() => {});
  }

  /** Drops a project at once, for changes made through this process. */
  forget(projectId: string): void {
    this.entries.delete(projectId);
  }

  private lookup(projectId: string): Promise<ProjectPlans> {
    const now = this.clock();
    const hit = this.entries.get(projectId);
    if (hit && hit.expires > now) return hit.value;
    const value = this.load(projectId);
    this.entries.delete(projectId);
    if (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(projectId, { value, expires: now + this.ttlMs });
    value.catch(() => {
      if (this.entries.get(projectId)?.value === value) this.entries.delete(projectId);
    });
    return value;
  }

  private async load(projectId: string): Promise<ProjectPlans> {
    const assigned = await this.store.getProjectPlan(projectId);
    const entries = assigned?.entries ?? [];
    const ids = [...namedPlans(entries)];
    const found = await Promise.all(ids.map((id) => this.store.getPlan(id)));
    const plans = new Map<string, Plan>();
    for (const plan of found) if (plan) plans.set(plan.planId, plan);
    plans.set(DEFAULT_PLAN_ID, this.fallback);
    return { entries, plans };
  }
}

/** Without a plan store: every project on the default plan (the deployment's markup). */
export function defaultPlanLookup(markup: Ratio): PlanLookup {
  const plan = defaultPlan(markup);
  const version = plan.versions[0] as Plan["versions"][number];
  const applied: AppliedPlan = {
    id: plan.planId,
    version: version.version,
    percent: version.percent,
    ratio: markup,
  };
  return { applied: async () => applied };
}
