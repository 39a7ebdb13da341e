import {
  type AlertRule,
  type AlertRuleStore,
  BUDGET_THRESHOLDS_RULE,
  type BudgetThresholdsRule,
  LOW_BALANCE_RULE,
  type LowBalanceRule,
} from "../core/alert-rules";
import type { EventPublisher } from "../core/cloudevent";
import type { CreditStore } from "../core/credits";
import { decimalUsd, MAX_BALANCE_MICROS, parseUsd } from "../core/credits";
import { errors } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";

const MAX_THRESHOLDS = 10;

/**
 * A budget-thresholds rule from a person's list (`50,80,100`): whole percentages from 1 to 100,
 * distinct, at most 10; a 400 naming `budget_thresholds` otherwise.
 */
export function budgetThresholdsRule(projectId: string, text: string, now: number): BudgetThresholdsRule {
  const parts = text.split(",").map((part) => part.trim());
  if (parts.length === 0 || parts.some((part) => part === "")) {
    throw errors.invalidField(
      "budget_thresholds",
      "give comma-separated whole percentages of the budgets' limits, like 50,80,100",
    );
  }
  const thresholds = parts.map((part) => {
    const percent = /^\d{1,3}$/.test(part) ? Number(part) : Number.NaN;
    if (!(percent >= 1 && percent <= 100)) {
      throw errors.invalidField(
        "budget_thresholds",
        `'${part.slice(0, 20)}' is not a whole percentage from 1 to 100`,
      );
    }
    return percent;
  });
  const duplicate = thresholds.find((percent, i) => thresholds.indexOf(percent) !== i);
  if (duplicate !== undefined) {
    throw errors.invalidField("budget_thresholds", `${duplicate} is given twice`);
  }
  if (thresholds.length > MAX_THRESHOLDS) {
    throw errors.invalidField("budget_thresholds", `give at most ${MAX_THRESHOLDS} thresholds`);
  }
  return {
    projectId,
    ruleId: BUDGET_THRESHOLDS_RULE,
    kind: "budget_thresholds",
    thresholds: thresholds.sort((a, b) => a - b),
    createdAt: now,
  };
}

/** What a person asks of `alerts set` (CLI) or Settings -> Alerts (dashboard). */
export interface AlertRulesInput {
  lowBalanceUsd?: string | undefined;
  budgetThresholds?: string | undefined;
}

/**
 * Sets a project's rules: either or both, each checked before either is stored (a 400 naming the
 * field); neither is a 400 too. A low-balance rule fires at once if the balance is below it already.
 */
export async function setAlertRules(
  deps: { rules: Pick<AlertRuleStore, "put">; cached: CachedRules; alerts: Pick<BalanceAlerts, "check"> },
  projectId: string,
  input: AlertRulesInput,
  now: number,
): Promise<AlertRule[]> {
  const { lowBalanceUsd, budgetThresholds } = input;
  if (lowBalanceUsd === undefined && budgetThresholds === undefined) {
    throw errors.missingField("low_balance_usd or budget_thresholds");
  }
  const rules: AlertRule[] = [
    ...(lowBalanceUsd !== undefined ? [lowBalanceRule(projectId, lowBalanceUsd, now)] : []),
    ...(budgetThresholds !== undefined ? [budgetThresholdsRule(projectId, budgetThresholds, now)] : []),
  ];
  for (const rule of rules) await deps.rules.put(rule);
  deps.cached.forget(projectId);
  if (lowBalanceUsd !== undefined) await deps.alerts.check(projectId);
  return rules;
}

/**
 * A project's rules as read within `cacheMs` (they change rarely): one read per project and period,
 * shared by the balance and budget alerts of a process.
 */
export class CachedRules {
  private readonly cached = new Map<string, { at: number; rules: Promise<AlertRule[]> }>();

  constructor(
    private readonly store: Pick<AlertRuleStore, "list">,
    private readonly clock: () => number,
    private readonly cacheMs: number,
  ) {}

  of(projectId: string): Promise<AlertRule[]> {
    const now = this.clock();
    const hit = this.cached.get(projectId);
    if (hit && now - hit.at < this.cacheMs) return hit.rules;
    const rules = this.store.list(projectId);
    if (this.cached.size >= MAX_CACHED_PROJECTS) this.cached.clear();
    this.cached.set(projectId, { at: now, rules });
    rules.catch(() => this.forget(projectId));
    return rules;
  }

  /** Drops a project's copy (after `alerts set` or `delete` in this process, or a failed check). */
  forget(projectId: string): void {
    this.cached.delete(projectId);
  }
}

const MAX_CACHED_PROJECTS = 10_000;

/** A low-balance rule from a person's amount (`5`, `12.50`): negative or malformed amounts are a 400. */
export function lowBalanceRule(projectId: string, amount: string, now: number): LowBalanceRule {
  if (amount.trim().startsWith("-")) throw errors.invalidField("low_balance_usd", "must not be negative");
  const thresholdMicros = parseUsd(amount, "low_balance_usd");
  if (thresholdMicros > MAX_BALANCE_MICROS) {
    throw errors.invalidField("low_balance_usd", "is larger than any balance can be");
  }
  return {
    projectId,
    ruleId: LOW_BALANCE_RULE,
    kind: "low_balance",
    thresholdMicros,
    armed: true,
    createdAt: now,
  };
}

/**
 * The credits' writes of a lease's charges, each followed by a balance check of its project: where a
 * process notes its calls' charges in batches, the check after a call comes before its charge counts,
 * and this one sees it.
 */
export function checkedAfterCharges(
  credits: Pick<CreditStore, "hold" | "recordCharges" | "settleCharges">,
  alerts: Pick<BalanceAlerts, "check">,
): Pick<CreditStore, "hold" | "recordCharges" | "settleCharges"> {
  return {
    hold: (projectId, holdId, micros, expiresAt) => credits.hold(projectId, holdId, micros, expiresAt),
    async recordCharges(hold, charges) {
      const noted = await credits.recordCharges(hold, charges);
      if (noted) await alerts.check(hold.projectId);
      return noted;
    },
    async settleCharges(hold, charges) {
      const settlement = await credits.settleCharges(hold, charges);
      await alerts.check(hold.projectId);
      return settlement;
    },
  };
}

export interface BalanceAlertDeps {
  rules: AlertRuleStore;
  /** The rules as read lately (firing updates the copy). */
  cached: CachedRules;
  credits: Pick<CreditStore, "balance">;
  publisher: EventPublisher;
  logger: Logger;
  clock: () => number;
}

/**
 * Watches balances against low-balance rules. `check` runs after a managed call's charge and after a
 * grant; a project without rules costs one rules read per `cacheMs`, one with a rule a balance read.
 */
export class BalanceAlerts {
  constructor(private readonly deps: BalanceAlertDeps) {}

  async check(projectId: string): Promise<void> {
    try {
      const rule = (await this.deps.cached.of(projectId)).find(
        (r): r is LowBalanceRule => r.kind === "low_balance",
      );
      if (!rule) return;
      const balance = await this.deps.credits.balance(projectId);
      // Money really gone: granted minus charged (settled and noted). What open holds reserve for
      // calls not yet made is not spent, so it takes nothing off.
      const unspentMicros = balance.availableMicros + balance.heldMicros;
      const below = unspentMicros < rule.thresholdMicros;
      if (below && rule.armed) {
        const now = this.deps.clock();
        rule.armed = false;
        if (!(await this.deps.rules.disarm(projectId, rule.ruleId, now))) return;
        try {
          await this.deps.publisher.publish({
            type: "balance.low",
            projectId,
            subject: rule.ruleId,
            data: {
              available_usd: decimalUsd(unspentMicros),
              threshold_usd: decimalUsd(rule.thresholdMicros),
            },
          });
        } catch (err) {
          // Not sent: armed again, so the next check fires it.
          await this.deps.rules.rearm(projectId, rule.ruleId);
          throw err;
        }
      } else if (!below && !rule.armed) {
        rule.armed = true;
        await this.deps.rules.rearm(projectId, rule.ruleId);
      }
    } catch (err) {
      this.deps.cached.forget(projectId);
      this.deps.logger.error("balance alert check failed", { ...errorFields(err), projectId });
    }
  }
}
