import { MemoryObjectStore } from "../../../../lambda/adapters/memory/object-store";
import { objectStoreContract } from "../../../support/contracts/object-store";

objectStoreContract("MemoryObjectStore", () => new MemoryObjectStore());
