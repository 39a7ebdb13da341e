import { MemoryStore } from "../../../../lambda/adapters/memory/store";
import { storeContract } from "../../../support/store-contract";

storeContract("MemoryStore", async () => ({ store: new MemoryStore(), close: async () => {} }));
