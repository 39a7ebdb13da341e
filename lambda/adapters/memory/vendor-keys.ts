import { type KeyWrapper, openSecret, type SealedSecret, sealSecret } from "../../core/crypto";
import {
  parseVendor,
  type VendorKeyStore,
  type VendorKeyView,
  validateVendorKey,
  vendorKeyContext,
} from "../../core/vendor-keys";
import type { VendorName } from "../../core/vendor-names";
import { MemoryTable } from "./table";

/** A stored key: its view and its envelope-encrypted secret, as the DynamoDB item; no plaintext. */
export type VendorKeyItem = VendorKeyView & SealedSecret;

/** Vendor keys in memory, sealed under `wrapper` and bound to their project and vendor as in DynamoDB. */
export class MemoryVendorKeys implements VendorKeyStore {
  constructor(
    private readonly wrapper: KeyWrapper,
    private readonly clock: () => number = Date.now,
    /** The table, keyed `<projectId>\n<vendor>`: a test reads and changes it as it would a DynamoDB table. */
    private readonly items = new MemoryTable<VendorKeyItem>(),
  ) {}

  async set(projectId: string, vendorName: string, key: string): Promise<VendorKeyView> {
    const vendor = parseVendor(vendorName);
    validateVendorKey(key);
    const sealed = await sealSecret(this.wrapper, key, vendorKeyContext(projectId, vendor));
    const now = this.clock();
    const stored = await this.items.upsert(vendorKeyItemKey(projectId, vendor), (found) => ({
      projectId,
      vendor,
      last4: key.slice(-4),
      createdAt: found?.createdAt ?? now,
      updatedAt: now,
      wrappedKey: sealed.wrappedKey,
      ciphertext: sealed.ciphertext,
    }));
    return view(stored);
  }

  async list(projectId: string): Promise<VendorKeyView[]> {
    return (await this.items.scan((_, item) => item.projectId === projectId)).map(([, item]) => view(item));
  }

  async delete(projectId: string, vendorName: string): Promise<boolean> {
    return (await this.items.delete(vendorKeyItemKey(projectId, parseVendor(vendorName)))) !== undefined;
  }

  async reveal(projectId: string, vendor: VendorName): Promise<string | undefined> {
    const item = await this.items.get(vendorKeyItemKey(projectId, vendor));
    return item && openSecret(this.wrapper, item, vendorKeyContext(projectId, vendor));
  }
}

/** Sorted by project, then vendor: the DynamoDB table's key order. */
export const vendorKeyItemKey = (projectId: string, vendor: VendorName) => `${projectId}\n${vendor}`;

function view(item: VendorKeyItem): VendorKeyView {
  return {
    projectId: item.projectId,
    vendor: item.vendor,
    last4: item.last4,
    createdAt: item.createdAt,
    updatedAt: item.updatedAt,
  };
}
