import { MemoryBudgets } from "../../../../lambda/adapters/memory/budgets";
import { budgetCountersContract } from "../../../support/contracts/budget-counters";

budgetCountersContract("MemoryBudgets", async (clock) => {
  const counters = new MemoryBudgets(clock);
  return { counters, another: () => counters, close: async () => {} };
});
