import { MemoryMasterKey } from "../../../../lambda/adapters/memory/key-wrapper";
import { MemoryTable } from "../../../../lambda/adapters/memory/table";
import {
  MemoryVendorKeys,
  type VendorKeyItem,
  vendorKeyItemKey,
} from "../../../../lambda/adapters/memory/vendor-keys";
import { vendorKeysContract } from "../../../support/contracts/vendor-keys";

vendorKeysContract("MemoryVendorKeys", async (clock) => {
  const items = new MemoryTable<VendorKeyItem>();
  return {
    store: new MemoryVendorKeys(new MemoryMasterKey(), clock, items),
    withOtherMasterKey: () => new MemoryVendorKeys(new MemoryMasterKey(), clock, items),
    stored: async () => (await items.scan()).map(([, item]) => item),
    async copy(projectId, vendor, toProjectId) {
      const item = await items.get(vendorKeyItemKey(projectId, vendor));
      if (!item) throw new Error("nothing to copy");
      await items.put(vendorKeyItemKey(toProjectId, vendor), { ...item, projectId: toProjectId });
    },
    close: async () => {},
  };
});
