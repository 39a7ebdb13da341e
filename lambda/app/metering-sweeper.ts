import type { CreditStore } from "../core/credits";
import { errorFields, type Logger } from "../core/logger";

export interface Sweeper {
  /** Stops the interval and waits for a sweep in progress. */
  stop(): Promise<void>;
}

/**
 * Releases the holds a crash left open, once expired, now and then every `intervalMs` (never relying on
 * DynamoDB TTL). Sweeps never overlap; every process may run one, the protocol makes them idempotent.
 */
export function startSweeper(
  credits: Pick<CreditStore, "releaseExpired">,
  intervalMs: number,
  clock: () => number,
  logger: Logger,
): Sweeper {
  let running: Promise<void> | undefined;
  const sweep = () => {
    running ??= credits
      .releaseExpired(clock())
      .then((report) => {
        if (Object.values(report).some((count) => count > 0)) {
          logger.info("credit sweep", { ...report });
        }
      })
      .catch((err) => logger.error("credit sweep failed", errorFields(err)))
      .finally(() => {
        running = undefined;
      });
  };
  sweep();
  const timer = setInterval(sweep, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
