import type { DynamoDBClient } from "../adapters/dynamodb/client";
import { DynamoAlertRules, DynamoDeliveryLog, DynamoWebhooks } from "../adapters/dynamodb/events";
import type { TableNames } from "../adapters/dynamodb/tables";
import type { BudgetWatcher } from "../core/budgets";
import type { ProxyHooks } from "../core/call";
import type { CreditStore } from "../core/credits";
import type { KeyWrapper } from "../core/crypto";
import type { Logger } from "../core/logger";
import type { UserIdHasher } from "../core/privacy";
import { BalanceAlerts, CachedRules } from "../events/alerts";
import { BudgetAlerts } from "../events/budget-alerts";
import { createDeliveries, type Deliveries } from "../events/delivery";
import { eventHooks } from "../events/hooks";
import type { DeliveryQueue, EventPublisher, WebhookSender } from "../events/ports";

/** What a host gives the events: the store, the secrets' key wrapper, a queue, a sender and a publisher. */
export interface EventsInfrastructure {
  db: DynamoDBClient;
  tables: Pick<TableNames, "webhooks" | "webhookDeliveries" | "alertRules">;
  wrapper: KeyWrapper;
  queue: DeliveryQueue;
  sender: WebhookSender;
  publisher: EventPublisher;
  credits: Pick<CreditStore, "balance">;
  logger: Logger;
  clock: () => number;
  /** Waits before webhook retries; the default schedule spans more than an hour. */
  retryDelaysMs?: readonly number[];
}

export interface Events {
  publisher: EventPublisher;
  webhooks: DynamoWebhooks;
  log: DynamoDeliveryLog;
  rules: DynamoAlertRules;
  deliveries: Deliveries;
  alerts: BalanceAlerts;
  /** The rules as this process read them lately. */
  cachedRules: CachedRules;
  /** The proxy's hook: usage events and balance checks. */
  hooks: ProxyHooks;
  /** The proxy's budget watcher: threshold alerts, with user ids hashed as the records hash them. */
  budgetAlerts(userIds: UserIdHasher): BudgetWatcher;
}

/** How long a process takes a project's alert rules as read. */
const RULES_CACHE_MS = 10_000;

/** The events, assembled once for every host: the delivery function, the proxy, the dashboard, the CLI. */
export function composeEvents(infra: EventsInfrastructure): Events {
  const webhooks = new DynamoWebhooks(infra.db, infra.tables, infra.wrapper);
  const log = new DynamoDeliveryLog(infra.db, infra.tables);
  const rules = new DynamoAlertRules(infra.db, infra.tables);
  const deliveries = createDeliveries({
    webhooks,
    log,
    queue: infra.queue,
    sender: infra.sender,
    logger: infra.logger,
    clock: infra.clock,
    ...(infra.retryDelaysMs ? { retryDelaysMs: infra.retryDelaysMs } : {}),
  });
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
    webhooks,
    log,
    rules,
    deliveries,
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
