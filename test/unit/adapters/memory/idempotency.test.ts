import { MemoryIdempotency } from "../../../../lambda/adapters/memory/idempotency";
import { idempotencyContract } from "../../../support/contracts/idempotency";

idempotencyContract("MemoryIdempotency", async (clock) => {
  const store = new MemoryIdempotency(clock);
  return { store, another: () => store, close: async () => {} };
});
