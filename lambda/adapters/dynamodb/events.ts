import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { type KeyWrapper, openSecret, sealSecret } from "../../core/crypto";
import type { Delivery, DeliveryLog, WebhookStore, WebhookView } from "../../core/webhook-delivery";
import { webhookSecretContext } from "../../events/webhooks";
import { queryAll, readItem } from "./paging";
import type { TableNames } from "./tables";

/** Item: the webhook's view plus its secret, envelope-encrypted (core/crypto.ts); no plaintext. */
interface WebhookItem extends WebhookView {
  wrappedKey: Uint8Array;
  ciphertext: Uint8Array;
}

export class DynamoWebhooks implements WebhookStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "webhooks">,
    private readonly wrapper: KeyWrapper,
  ) {}

  async add(webhook: WebhookView, secret: string): Promise<void> {
    const sealed = await sealSecret(
      this.wrapper,
      secret,
      webhookSecretContext(webhook.projectId, webhook.webhookId),
    );
    await this.db.send(
      new PutItemCommand({
        TableName: this.tables.webhooks,
        Item: marshall({ ...webhook, wrappedKey: sealed.wrappedKey, ciphertext: sealed.ciphertext }),
        ConditionExpression: "attribute_not_exists(webhookId)",
      }),
    );
  }

  async list(projectId: string): Promise<WebhookView[]> {
    const webhooks = await queryAll(this.db, {
      TableName: this.tables.webhooks,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
      ConsistentRead: true,
    });
    return webhooks.map((item) => view(item as WebhookItem));
  }

  async get(projectId: string, webhookId: string): Promise<WebhookView | undefined> {
    const item = await this.item(projectId, webhookId);
    return item && view(item);
  }

  async delete(projectId: string, webhookId: string): Promise<boolean> {
    const out = await this.db.send(
      new DeleteItemCommand({
        TableName: this.tables.webhooks,
        Key: marshall({ projectId, webhookId }),
        ReturnValues: "ALL_OLD",
      }),
    );
    return out.Attributes !== undefined;
  }

  async secret(projectId: string, webhookId: string): Promise<string | undefined> {
    const item = await this.item(projectId, webhookId);
    return item && openSecret(this.wrapper, item, webhookSecretContext(projectId, webhookId));
  }

  private async item(projectId: string, webhookId: string): Promise<WebhookItem | undefined> {
    return (await readItem(this.db, this.tables.webhooks, { projectId, webhookId })) as
      | WebhookItem
      | undefined;
  }
}

function view(item: WebhookItem): WebhookView {
  return {
    projectId: item.projectId,
    webhookId: item.webhookId,
    url: item.url,
    events: item.events,
    createdAt: item.createdAt,
  };
}

/** Deliveries are kept 30 days (DynamoDB's TTL removes them in AWS; nothing depends on it). */
const DELIVERY_KEEP_MS = 30 * 86_400_000;

/** Item: the delivery with its event as JSON text (`eventJson`) and `expiresAt` in epoch seconds. */
export class DynamoDeliveryLog implements DeliveryLog {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "webhookDeliveries">,
  ) {}

  async begin(delivery: Delivery): Promise<void> {
    try {
      await this.db.send(
        new PutItemCommand({
          TableName: this.tables.webhookDeliveries,
          Item: toItem(delivery),
          ConditionExpression: "attribute_not_exists(eventId)",
        }),
      );
    } catch (err) {
      if (!(err instanceof ConditionalCheckFailedException)) throw err;
    }
  }

  async update(delivery: Delivery): Promise<void> {
    await this.db.send(
      new PutItemCommand({ TableName: this.tables.webhookDeliveries, Item: toItem(delivery) }),
    );
  }

  async get(webhookId: string, eventId: string): Promise<Delivery | undefined> {
    const out = await this.db.send(
      new GetItemCommand({
        TableName: this.tables.webhookDeliveries,
        Key: marshall({ webhookId, eventId }),
        ConsistentRead: true,
      }),
    );
    return out.Item && fromItem(out.Item);
  }

  async list(webhookId: string, limit: number): Promise<Delivery[]> {
    const out = await this.db.send(
      new QueryCommand({
        TableName: this.tables.webhookDeliveries,
        KeyConditionExpression: "webhookId = :w",
        ExpressionAttributeValues: marshall({ ":w": webhookId }),
        ScanIndexForward: false,
        Limit: limit,
      }),
    );
    return (out.Items ?? []).map(fromItem);
  }
}

function toItem(delivery: Delivery) {
  const { event, ...rest } = delivery;
  return marshall(
    {
      ...rest,
      eventJson: JSON.stringify(event),
      expiresAt: Math.ceil((delivery.createdAt + DELIVERY_KEEP_MS) / 1000),
    },
    { removeUndefinedValues: true },
  );
}

function fromItem(item: Parameters<typeof unmarshall>[0]): Delivery {
  const {
    eventJson,
    expiresAt: _expires,
    ...rest
  } = unmarshall(item) as Omit<Delivery, "event"> & {
    eventJson: string;
    expiresAt: number;
  };
  return { ...rest, event: JSON.parse(eventJson) };
}
