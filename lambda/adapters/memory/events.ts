import { type KeyWrapper, openSecret, type SealedSecret, sealSecret } from "../../core/crypto";
import type { Delivery, DeliveryLog, WebhookStore, WebhookView } from "../../core/webhook-delivery";
import { webhookSecretContext } from "../../events/webhooks";
import { MemoryTable } from "./table";

/** A stored webhook: its view and its sealed secret, as the DynamoDB item; no plaintext. */
export type WebhookItem = WebhookView & SealedSecret;

/** Webhooks in memory: each with its secret sealed under `wrapper`, as the DynamoDB item keeps it. */
export class MemoryWebhooks implements WebhookStore {
  constructor(
    private readonly wrapper: KeyWrapper,
    /** The table, keyed `<projectId>\n<webhookId>`: a test reads it as it would a DynamoDB table. */
    private readonly items = new MemoryTable<WebhookItem>(),
  ) {}

  async add(webhook: WebhookView, secret: string): Promise<void> {
    const sealed = await sealSecret(
      this.wrapper,
      secret,
      webhookSecretContext(webhook.projectId, webhook.webhookId),
    );
    const added = await this.items.put(
      itemKey(webhook.projectId, webhook.webhookId),
      { ...webhook, ...sealed },
      (found) => found === undefined,
    );
    if (!added) throw new Error(`Webhook ${webhook.webhookId} exists already.`);
  }

  async list(projectId: string): Promise<WebhookView[]> {
    return (await this.items.scan((_, item) => item.projectId === projectId)).map(([, item]) => view(item));
  }

  async get(projectId: string, webhookId: string): Promise<WebhookView | undefined> {
    const item = await this.items.get(itemKey(projectId, webhookId));
    return item && view(item);
  }

  async delete(projectId: string, webhookId: string): Promise<boolean> {
    return (await this.items.delete(itemKey(projectId, webhookId))) !== undefined;
  }

  async secret(projectId: string, webhookId: string): Promise<string | undefined> {
    const item = await this.items.get(itemKey(projectId, webhookId));
    return item && openSecret(this.wrapper, item, webhookSecretContext(projectId, webhookId));
  }
}

const itemKey = (projectId: string, webhookId: string) => `${projectId}\n${webhookId}`;

function view(item: WebhookView): WebhookView {
  return {
    projectId: item.projectId,
    webhookId: item.webhookId,
    url: item.url,
    events: item.events,
    createdAt: item.createdAt,
  };
}

/** The delivery log in memory, by webhook then event id (event ids are time-ordered): newest last. */
export class MemoryDeliveryLog implements DeliveryLog {
  private readonly entries = new MemoryTable<Delivery>();

  async begin(delivery: Delivery): Promise<void> {
    await this.entries.put(entryKey(delivery.webhookId, delivery.eventId), delivery, (found) => !found);
  }

  async update(delivery: Delivery): Promise<void> {
    await this.entries.put(entryKey(delivery.webhookId, delivery.eventId), delivery);
  }

  get(webhookId: string, eventId: string): Promise<Delivery | undefined> {
    return this.entries.get(entryKey(webhookId, eventId));
  }

  async list(webhookId: string, limit: number): Promise<Delivery[]> {
    const prefix = `${webhookId}\n`;
    const all = await this.entries.scan((key) => key.startsWith(prefix));
    return all
      .reverse()
      .slice(0, limit)
      .map(([, delivery]) => delivery);
  }
}

const entryKey = (webhookId: string, eventId: string) => `${webhookId}\n${eventId}`;
