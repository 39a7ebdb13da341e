import type { AlertRuleStore } from "../core/alert-rules";
import type { BudgetWatcher } from "../core/budgets";
import type { ProxyHooks } from "../core/call";
import type { EventPublisher } from "../core/cloudevent";
import type { CreditStore } from "../core/credits";
import type { UserIdHasher } from "../core/privacy";
import type { StorePorts } from "../core/store-ports";
import { BalanceAlerts, CachedRules } from "../events/alerts";
import { BudgetAlerts } from "../events/budget-alerts";
import { eventHooks } from "../events/hooks";
import type { Infrastructure } from "./infrastructure";

/** How long a process takes a project's alert rules as read. */
const RULES_CACHE_MS = 10_000;

/** What the alert rules need: the rules and the balances in the store, and where events go. */
export type AlertsInfrastructure = Pick<Infrastructure, "events" | "logger" | "clock"> & {
  store: Pick<StorePorts, "alertRules"> & { credits: Pick<CreditStore, "balance"> };
};

export interface Alerts {
  publisher: EventPublisher;
  rules: AlertRuleStore;
  alerts: BalanceAlerts;
  /** The rules as this process read them lately. */
  cachedRules: CachedRules;
  /** The proxy's hook: usage events and balance checks. */
  hooks: ProxyHooks;
  /** The proxy's budget watcher: threshold alerts, with user ids hashed as the records hash them. */
  budgetAlerts(userIds: UserIdHasher): BudgetWatcher;
}

/**
 * The alert rules and the proxy's event hook, without webhooks: what a proxy function needs (in AWS
 * the bus's rule takes events to the delivery function). `composeProxy` and `composeEvents` call it.
 */
export function composeAlerts(infra: AlertsInfrastructure): Alerts {
  const { events: publisher, logger, clock } = infra;
  const rules = infra.store.alertRules;
  const cachedRules = new CachedRules(rules, clock, RULES_CACHE_MS);
  const alerts = new BalanceAlerts({
    rules,
    cached: cachedRules,
    credits: infra.store.credits,
    publisher,
    logger,
    clock,
  });
  return {
    publisher,
    rules,
    alerts,
    cachedRules,
    hooks: eventHooks(publisher, alerts, logger),
    budgetAlerts: (userIds) =>
      new BudgetAlerts({ rules, cached: cachedRules, publisher, userIds, logger, clock }),
  };
}
