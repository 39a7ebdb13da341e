import type { DeletionStarter } from "../core/deletion";
import {
  DELETION_FAILURE_STEP,
  DELETION_STEPS,
  DeletionAlreadyCompletedError,
  type DeletionState,
  type DeletionStep,
  type DeletionStepHandlers,
  NOT_RETRIED,
  type RetryPolicy,
  retryDelayMs,
  runDeletionStep,
} from "../core/deletion-steps";
import { errorFields, type Logger } from "../core/logger";

export interface LocalRunnerOptions {
  steps: DeletionStepHandlers;
  /** Step 2 locally: deliver what the in-process queue holds (lambda/local/warehouse.ts). */
  waitForInFlight: () => Promise<void>;
  logger: Logger;
  /** Waits between retries (tests pass one that does not wait). */
  sleep?: (ms: number) => Promise<void>;
  /** Told each state entered, in order: what a Step Functions execution's history would show. */
  onState?: (name: string, state: DeletionState) => void;
}

export type RunOutcome = "succeeded" | "failed";

/**
 * Step Functions in one process: walks the one definition of the steps (core/deletion-steps.ts) with
 * the same handlers, the same retry policies, the same loops and the same failure state. Requests run
 * one after another, so two never rewrite the same file at once.
 */
export class LocalDeletionRunner implements DeletionStarter {
  private tail: Promise<void> = Promise.resolve();
  private readonly sleep: (ms: number) => Promise<void>;

  constructor(private readonly options: LocalRunnerOptions) {
    this.sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** Queues a run of the request; resolves at once (the HTTP answer does not wait for the deletion). */
  async start(projectId: string, requestId: string): Promise<void> {
    this.tail = this.tail
      .then(() => this.run({ projectId, requestId }))
      .then(
        () => undefined,
        (err: unknown) =>
          this.options.logger.error("deletion run broke off", { ...errorFields(err), requestId }),
      );
  }

  /** Resolves once every run queued so far has ended. */
  idle(): Promise<void> {
    return this.tail;
  }

  /** One execution: the steps in order until the end, or the failure state. */
  async run(input: { projectId: string; requestId: string }): Promise<RunOutcome> {
    let state: DeletionState = { projectId: input.projectId, requestId: input.requestId };
    const index = (name: string) => DELETION_STEPS.findIndex((s) => s.name === name);
    for (let i = 0; i < DELETION_STEPS.length; ) {
      const step = DELETION_STEPS[i] as DeletionStep;
      this.options.onState?.(step.name, state);
      try {
        state = await this.execute(step, state);
      } catch (err) {
        if ((err as Error).name === DeletionAlreadyCompletedError.name) return "succeeded";
        await this.markFailed(state, err);
        return "failed";
      }
      if (step.kind !== "wait" && step.repeat) {
        this.options.onState?.(step.repeat.choice, state);
        if (state[step.repeat.when] === true) {
          i = index(step.repeat.goTo);
          continue;
        }
      }
      i++;
    }
    return "succeeded";
  }

  private async execute(step: DeletionStep, state: DeletionState): Promise<DeletionState> {
    switch (step.kind) {
      case "wait":
        await this.options.waitForInFlight();
        return state;
      case "task": {
        const next = await this.retrying(step.retry, () =>
          runDeletionStep(this.options.steps, { step: step.handler, state }),
        );
        return next ?? state;
      }
      case "map": {
        // One item at a time: the rewrites are CPU-bound and share this thread (in AWS each item is a
        // Lambda invocation of its own, `maxConcurrency` at a time).
        for (const key of state[step.items] ?? []) {
          const item = { projectId: state.projectId, requestId: state.requestId, key };
          await this.retrying(step.retry, () =>
            runDeletionStep(this.options.steps, { step: step.handler, state: item }),
          );
        }
        // The map's results are discarded: its input goes on.
        return state;
      }
    }
  }

  private async retrying<T>(policy: RetryPolicy, attempt: () => Promise<T>): Promise<T> {
    for (let retry = 0; ; retry++) {
      try {
        return await attempt();
      } catch (err) {
        const name = (err as Error).name;
        if ((NOT_RETRIED as readonly string[]).includes(name) || retry >= policy.maxAttempts) throw err;
        this.options.logger.warn("deletion step failed; retrying", { ...errorFields(err), retry: retry + 1 });
        await this.sleep(retryDelayMs(policy, retry));
      }
    }
  }

  private async markFailed(state: DeletionState, err: unknown): Promise<void> {
    const failed: DeletionState = {
      ...state,
      error: { Error: (err as Error).name ?? "Error", Cause: (err as Error).message ?? String(err) },
    };
    this.options.onState?.(DELETION_FAILURE_STEP.name, failed);
    try {
      await this.retrying(DELETION_FAILURE_STEP.retry, () =>
        runDeletionStep(this.options.steps, { step: DELETION_FAILURE_STEP.handler, state: failed }),
      );
    } catch (markErr) {
      this.options.logger.error("deletion: marking the request failed did not work", {
        ...errorFields(markErr),
        requestId: state.requestId,
      });
    }
  }
}
