import { MemoryRateLimiter } from "../../../../lambda/adapters/memory/rate-limit";
import { rateLimiterContract } from "../../../support/contracts/rate-limiter";

// No process keeps tokens of its own: every "process" is the one shared limiter.
rateLimiterContract("MemoryRateLimiter", async (clock) => {
  const limiter = new MemoryRateLimiter(clock);
  return { limiter, another: () => limiter, close: async () => {} };
});
