import { MemoryPlans } from "../../../../lambda/adapters/memory/plans";
import { plansContract } from "../../../support/contracts/plans";

plansContract("MemoryPlans", async () => ({ store: new MemoryPlans(), close: async () => {} }));
