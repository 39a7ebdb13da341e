import {
  MemoryDeliveryLog,
  MemoryWebhooks,
  type WebhookItem,
} from "../../../../lambda/adapters/memory/events";
import { MemoryMasterKey } from "../../../../lambda/adapters/memory/key-wrapper";
import { MemoryTable } from "../../../../lambda/adapters/memory/table";
import { webhooksContract } from "../../../support/contracts/webhooks";

webhooksContract("MemoryWebhooks and MemoryDeliveryLog", async () => {
  const items = new MemoryTable<WebhookItem>();
  return {
    webhooks: new MemoryWebhooks(new MemoryMasterKey(), items),
    withOtherMasterKey: () => new MemoryWebhooks(new MemoryMasterKey(), items),
    log: new MemoryDeliveryLog(),
    close: async () => {},
  };
});
