import { errorFields, type Logger } from "../core/logger";

export interface Sweeper {
  /** Stops the interval and waits for a sweep in progress. */
  stop(): Promise<void>;
}

/**
 * Runs the credit sweep (lambda/compose/sweeper.ts: releases the holds a crash left open, once
 * expired) now and then every `intervalMs` (never relying on
 * DynamoDB TTL). Sweeps never overlap; every process may run one, the protocol makes them idempotent.
 */
export function startSweeper(sweepOnce: () => Promise<unknown>, intervalMs: number, logger: Logger): Sweeper {
  let running: Promise<void> | undefined;
  const sweep = () => {
    running ??= sweepOnce()
      .then(() => {})
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
