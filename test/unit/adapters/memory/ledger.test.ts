import { MemoryDeliveryLedger } from "../../../../lambda/adapters/memory/ledger";
import { deliveryLedgerContract } from "../../../support/contracts/delivery-ledger";

deliveryLedgerContract("MemoryDeliveryLedger", async (clock) => new MemoryDeliveryLedger(clock), {
  claimsExpire: true,
});
