/**
 * Alert rules per project. A rule fires once per crossing: firing disarms it with a conditional write
 * (only one process wins), and it re-arms when its condition clears. Kinds:
 * - `low_balance`: the credits granted minus those charged fell below an amount, holds for calls not yet
 *   made not counted (re-arms when they are back at or above it: a grant);
 * - `budget_thresholds`: a budget's window reached a percentage of its limit (events/budget-alerts.ts);
 *   each (budget window, threshold) fires once, so a new window re-arms them all.
 */

export const LOW_BALANCE_RULE = "low-balance";
export const BUDGET_THRESHOLDS_RULE = "budget-thresholds";
export const RULE_IDS = [LOW_BALANCE_RULE, BUDGET_THRESHOLDS_RULE] as const;

export interface LowBalanceRule {
  projectId: string;
  ruleId: typeof LOW_BALANCE_RULE;
  kind: "low_balance";
  thresholdMicros: number;
  /** True until it fires; set again when the balance is back at or above the threshold. */
  armed: boolean;
  createdAt: number;
  firedAt?: number;
}

/** Percentages of every budget's limit of the project; 100 is `budget.exceeded`. */
export interface BudgetThresholdsRule {
  projectId: string;
  ruleId: typeof BUDGET_THRESHOLDS_RULE;
  kind: "budget_thresholds";
  /** Ascending, distinct, 1 to 100. */
  thresholds: number[];
  createdAt: number;
}

export type AlertRule = LowBalanceRule | BudgetThresholdsRule;

/** The alert-rule port: single-item conditional writes. */
export interface AlertRuleStore {
  /** Creates or replaces a rule, armed. */
  put(rule: AlertRule): Promise<void>;
  list(projectId: string): Promise<AlertRule[]>;
  /** False when there was no such rule. */
  delete(projectId: string, ruleId: string): Promise<boolean>;
  /** Disarms an armed rule; true for the one caller that did (and so fires it). */
  disarm(projectId: string, ruleId: string, at: number): Promise<boolean>;
  /** Arms a disarmed rule; true when it was disarmed. */
  rearm(projectId: string, ruleId: string): Promise<boolean>;
  /**
   * Marks a threshold of a budget's window (its counter id) crossed; true for the one caller that did
   * (and so fires it). A new window is a new counter id: nothing to reset. `gcAt`: when the mark may
   * go (after its window; never for a total window, which does not reset).
   */
  cross(projectId: string, counterId: string, percent: number, at: number, gcAt?: number): Promise<boolean>;
  /** Takes the mark back (the event could not be published): the next check fires it. */
  uncross(projectId: string, counterId: string, percent: number): Promise<void>;
}
