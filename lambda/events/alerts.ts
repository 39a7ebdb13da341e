import type { CreditStore } from "../core/credits";
import { decimalUsd, MAX_BALANCE_MICROS, parseUsd } from "../core/credits";
import { errors } from "../core/errors";
import { errorFields, type Logger } from "../core/logger";
import type { EventPublisher } from "./ports";

/**
 * Alert rules per project. A rule fires once per crossing: firing disarms it with a conditional write
 * (only one process wins), and it re-arms when its condition clears. Kinds:
 * - `low_balance`: the available credits fell below an amount (re-arms when they are back at or above it);
 * - budget thresholds (50/80/100% of a budget's limit) slot in as another kind with a rule per budget
 *   and its thresholds, once budgets exist.
 */

export const LOW_BALANCE_RULE = "low-balance";

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

export type AlertRule = LowBalanceRule;

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
}

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

export interface BalanceAlertDeps {
  rules: AlertRuleStore;
  credits: Pick<CreditStore, "balance">;
  publisher: EventPublisher;
  logger: Logger;
  clock: () => number;
  /** How long a project's rules are taken as read (they change rarely; firing updates the copy). */
  cacheMs: number;
}

/**
 * Watches balances against low-balance rules. `check` runs after a managed call's charge and after a
 * grant; a project without rules costs one rules read per `cacheMs`, one with a rule a balance read.
 */
export class BalanceAlerts {
  private readonly cached = new Map<string, { at: number; rules: AlertRule[] }>();

  constructor(private readonly deps: BalanceAlertDeps) {}

  async check(projectId: string): Promise<void> {
    try {
      const rule = (await this.rulesOf(projectId)).find((r) => r.kind === "low_balance");
      if (!rule) return;
      const { availableMicros } = await this.deps.credits.balance(projectId);
      const below = availableMicros < rule.thresholdMicros;
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
              available_usd: decimalUsd(availableMicros),
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
      this.cached.delete(projectId);
      this.deps.logger.error("balance alert check failed", { ...errorFields(err), projectId });
    }
  }

  /** Drops the cached rules of a project (after `alerts set` or `delete` in this process). */
  forget(projectId: string): void {
    this.cached.delete(projectId);
  }

  private async rulesOf(projectId: string): Promise<AlertRule[]> {
    const now = this.deps.clock();
    const hit = this.cached.get(projectId);
    if (hit && now - hit.at < this.deps.cacheMs) return hit.rules;
    const rules = await this.deps.rules.list(projectId);
    this.cached.set(projectId, { at: now, rules });
    return rules;
  }
}
