import { DynamoAlertRules } from "../adapters/dynamodb/alert-rules";
import type { DynamoDBClient } from "../adapters/dynamodb/client";
import type { TableNames } from "../adapters/dynamodb/tables";
import type { BudgetWatcher } from "../core/budgets";
import type { ProxyHooks } from "../core/call";
import type { EventPublisher } from "../core/cloudevent";
import type { CreditStore } from "../core/credits";
import type { Logger } from "../core/logger";
import type { UserIdHasher } from "../core/privacy";
import { BalanceAlerts, CachedRules } from "../events/alerts";
import { BudgetAlerts } from "../events/budget-alerts";
import { eventHooks } from "../events/hooks";

/** How long a process takes a project's alert rules as read. */
const RULES_CACHE_MS = 10_000;

/** What the alert rules need: the rules' table, the balances and where events go. */
export interface AlertsInfrastructure {
  db: DynamoDBClient;
  tables: Pick<TableNames, "alertRules">;
  publisher: EventPublisher;
  credits: Pick<CreditStore, "balance">;
  logger: Logger;
  clock: () => number;
}

export interface Alerts {
  publisher: EventPublisher;
  rules: DynamoAlertRules;
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
 * the bus's rule takes events to the delivery function).
 */
export function composeAlerts(infra: AlertsInfrastructure): Alerts {
  const rules = new DynamoAlertRules(infra.db, infra.tables);
  const cachedRules = new CachedRules(rules, infra.clock, RULES_CACHE_MS);
  const alerts = new BalanceAlerts({
    rules,
    cached: cachedRules,
    credits: infra.credits,
    publisher: infra.publisher,
    logger: infra.logger,
    clock: infra.clock,
  });
  return {
    publisher: infra.publisher,
    rules,
    alerts,
    cachedRules,
    hooks: eventHooks(infra.publisher, alerts, infra.logger),
    budgetAlerts: (userIds) =>
      new BudgetAlerts({
        rules,
        cached: cachedRules,
        publisher: infra.publisher,
        userIds,
        logger: infra.logger,
        clock: infra.clock,
      }),
  };
}
