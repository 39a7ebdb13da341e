import { MemoryMasterKey } from "../../../../lambda/adapters/memory/key-wrapper";
import { keyWrapperContract } from "../../../support/key-wrapper-contract";

keyWrapperContract("MemoryMasterKey", async () => ({
  wrapper: new MemoryMasterKey(),
  other: new MemoryMasterKey(),
  close: async () => {},
}));
