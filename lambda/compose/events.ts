import type { DeliveryLog, WebhookStore } from "../core/webhook-delivery";
import { createDeliveries, type Deliveries } from "../events/delivery";
import { type Alerts, type AlertsInfrastructure, composeAlerts } from "./alerts";
import type { Infrastructure } from "./infrastructure";

/** What the events need besides the alerts': the webhooks, their delivery log and queue, a sender. */
export type EventsInfrastructure = AlertsInfrastructure &
  Pick<Infrastructure, "webhooks" | "deliveryLog" | "deliveryQueue" | "webhookSender">;

export interface EventsSettings {
  /** Waits before webhook retries; the default schedule spans more than an hour. */
  retryDelaysMs?: readonly number[];
}

export interface Events extends Alerts {
  webhooks: WebhookStore;
  log: DeliveryLog;
  deliveries: Deliveries;
}

/**
 * The events, assembled once for every host: the delivery function, the dashboard, the CLI, and the
 * embedded host, which shares them with its proxy (`ProxySettings.alerts`).
 */
export function composeEvents(infra: EventsInfrastructure, settings: EventsSettings = {}): Events {
  const deliveries = createDeliveries({
    webhooks: infra.webhooks,
    log: infra.deliveryLog,
    queue: infra.deliveryQueue,
    sender: infra.webhookSender,
    logger: infra.logger,
    clock: infra.clock,
    ...(settings.retryDelaysMs && { retryDelaysMs: settings.retryDelaysMs }),
  });
  return { ...composeAlerts(infra), webhooks: infra.webhooks, log: infra.deliveryLog, deliveries };
}
