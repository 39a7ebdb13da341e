import {
  DeleteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { marshall, unmarshall } from "@aws-sdk/util-dynamodb";
import { type KeyWrapper, openSecret, sealSecret } from "../../core/crypto";
import {
  parseVendor,
  type VendorKeyStore,
  type VendorKeyView,
  validateVendorKey,
  vendorKeyContext,
} from "../../core/vendor-keys";
import type { VendorName } from "../../core/vendor-names";
import { queryAll } from "./paging";
import type { TableNames } from "./tables";

/** Item: { projectId, vendor, last4, createdAt, updatedAt, wrappedKey, ciphertext }; no plaintext. */
interface VendorKeyItem extends VendorKeyView {
  wrappedKey: Uint8Array;
  ciphertext: Uint8Array;
}

export class DynamoVendorKeys implements VendorKeyStore {
  constructor(
    private readonly db: DynamoDBClient,
    private readonly tables: Pick<TableNames, "vendorKeys">,
    private readonly wrapper: KeyWrapper,
    private readonly clock: () => number = Date.now,
  ) {}

  async set(projectId: string, vendorName: string, key: string): Promise<VendorKeyView> {
    const vendor = parseVendor(vendorName);
    validateVendorKey(key);
    const sealed = await sealSecret(this.wrapper, key, vendorKeyContext(projectId, vendor));
    const out = await this.db.send(
      new UpdateItemCommand({
        TableName: this.tables.vendorKeys,
        Key: marshall({ projectId, vendor }),
        UpdateExpression:
          "SET last4 = :last4, wrappedKey = :wrapped, ciphertext = :ciphertext, updatedAt = :now," +
          " createdAt = if_not_exists(createdAt, :now)",
        ExpressionAttributeValues: marshall({
          ":last4": key.slice(-4),
          ":wrapped": sealed.wrappedKey,
          ":ciphertext": sealed.ciphertext,
          ":now": this.clock(),
        }),
        ReturnValues: "ALL_NEW",
      }),
    );
    return view(unmarshall(out.Attributes ?? {}) as VendorKeyItem);
  }

  async list(projectId: string): Promise<VendorKeyView[]> {
    const keys = await queryAll(this.db, {
      TableName: this.tables.vendorKeys,
      KeyConditionExpression: "projectId = :p",
      ExpressionAttributeValues: marshall({ ":p": projectId }),
      ConsistentRead: true,
    });
    return keys.map((item) => view(item as VendorKeyItem));
  }

  async delete(projectId: string, vendorName: string): Promise<boolean> {
    const out = await this.db.send(
      new DeleteItemCommand({
        TableName: this.tables.vendorKeys,
        Key: marshall({ projectId, vendor: parseVendor(vendorName) }),
        ReturnValues: "ALL_OLD",
      }),
    );
    return out.Attributes !== undefined;
  }

  async reveal(projectId: string, vendor: VendorName): Promise<string | undefined> {
    const out = await this.db.send(
      new GetItemCommand({ TableName: this.tables.vendorKeys, Key: marshall({ projectId, vendor }) }),
    );
    if (!out.Item) return undefined;
    const item = unmarshall(out.Item) as VendorKeyItem;
    return openSecret(this.wrapper, item, vendorKeyContext(projectId, vendor));
  }
}

function view(item: VendorKeyItem): VendorKeyView {
  return {
    projectId: item.projectId,
    vendor: item.vendor,
    last4: item.last4,
    createdAt: item.createdAt,
    updatedAt: item.updatedAt,
  };
}
