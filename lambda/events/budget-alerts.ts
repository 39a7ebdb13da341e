import type { AlertRuleStore, BudgetThresholdsRule } from "../core/alert-rules";
import { type Budget, type BudgetReport, type BudgetWatcher, EVERY_USER, windowSpan } from "../core/budgets";
import type { EventPublisher } from "../core/cloudevent";
import { decimalUsd } from "../core/credits";
import type { Logger } from "../core/logger";
import type { UserIdHasher } from "../core/privacy";
import type { CachedRules } from "./alerts";

export interface BudgetAlertDeps {
  rules: Pick<AlertRuleStore, "cross" | "uncross">;
  cached: CachedRules;
  publisher: EventPublisher;
  userIds: UserIdHasher;
  logger: Logger;
  clock: () => number;
}

const MAX_REMEMBERED = 10_000;
/** A crossed mark outlives its window by this much (the store may drop it after). */
const MARK_KEPT_MS = 7 * 86_400_000;

/**
 * Budget-threshold alerts: after each call's charge, a budget window's spend against the project's
 * thresholds. A threshold fires once per budget window (per end user for a budget of each user): the
 * process whose conditional write marks it crossed publishes `budget.threshold` (below 100%) or
 * `budget.exceeded` (100%, or a hard budget refusing a call its recorded spend leaves no room for).
 * Only recorded spend counts, never holds. A new window is a new counter, so every
 * threshold is armed again. If publishing fails the mark is taken back, so the next call fires it.
 */
/**
 * A hard budget refused a call because of what its window has recorded: the call would fit an empty
 * window, not this one. A refusal for holds of calls under way, or for a call larger than the budget,
 * says nothing about spend (at $0 spent it would be a false "exceeded").
 */
function refusedBySpend(report: BudgetReport): boolean {
  const needed = report.refusedMicros;
  if (needed === undefined) return false;
  const { limitMicros } = report.budget;
  return needed <= limitMicros && report.usedMicros + needed > limitMicros;
}

export class BudgetAlerts implements BudgetWatcher {
  /** `<counterId>#<percent>` this process knows crossed: no spend read for a window fully fired. */
  private readonly crossed = new Set<string>();

  constructor(private readonly deps: BudgetAlertDeps) {}

  async watching(budget: Budget, counterId: string): Promise<boolean> {
    const rule = await this.ruleOf(budget.projectId);
    return rule?.thresholds.some((p) => !this.crossed.has(`${counterId}#${p}`)) ?? false;
  }

  async report(report: BudgetReport): Promise<void> {
    const { budget, counterId } = report;
    const rule = await this.ruleOf(budget.projectId);
    if (!rule) return;
    for (const percent of rule.thresholds) {
      const key = `${counterId}#${percent}`;
      const reached = report.usedMicros * 100 >= budget.limitMicros * percent;
      if (this.crossed.has(key) || !(reached || (percent === 100 && refusedBySpend(report)))) continue;
      if (this.crossed.size >= MAX_REMEMBERED) this.crossed.clear();
      this.crossed.add(key);
      const now = this.deps.clock();
      const resetsAt = windowSpan(budget.window, now).resetsAt;
      const gcAt = resetsAt === undefined ? undefined : resetsAt + MARK_KEPT_MS;
      if (!(await this.deps.rules.cross(budget.projectId, counterId, percent, now, gcAt))) continue;
      try {
        await this.deps.publisher.publish({
          type: percent >= 100 ? "budget.exceeded" : "budget.threshold",
          projectId: budget.projectId,
          subject: budget.budgetId,
          data: await this.dataOf(report, percent),
        });
      } catch (err) {
        // Not sent: unmarked, so the next report fires it.
        this.crossed.delete(key);
        await this.deps.rules.uncross(budget.projectId, counterId, percent);
        throw err;
      }
    }
  }

  private async ruleOf(projectId: string): Promise<BudgetThresholdsRule | undefined> {
    return (await this.deps.cached.of(projectId)).find(
      (r): r is BudgetThresholdsRule => r.kind === "budget_thresholds",
    );
  }

  /** Ids and figures; the end user as the records keep them (a keyed hash at level `none`). */
  private async dataOf(report: BudgetReport, percent: number): Promise<Record<string, unknown>> {
    const { budget, usedMicros } = report;
    let subject: string | null = budget.subject ?? null;
    if (budget.scope === "user") {
      const user = budget.subject === EVERY_USER ? report.userId : (budget.subject ?? null);
      subject =
        user !== null && report.hideUserId ? await this.deps.userIds.keyed(budget.projectId, user) : user;
    }
    return {
      budget_id: budget.budgetId,
      scope: budget.scope,
      subject,
      soft: budget.soft,
      window: budget.window,
      window_id: report.windowId,
      threshold_percent: percent,
      limit_micros: budget.limitMicros,
      limit_usd: decimalUsd(budget.limitMicros),
      used_micros: usedMicros,
      used_usd: decimalUsd(usedMicros),
      refused: report.refusedMicros !== undefined,
    };
  }
}
