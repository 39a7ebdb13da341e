import type { DeletionStarter } from "../core/deletion";
import { parseDeletionManifest } from "../core/deletion-manifest";
import {
  DELETION_FAILURE_STEP,
  DELETION_STEPS,
  DeletionAlreadyCompletedError,
  DeletionFatalError,
  type DeletionState,
  type DeletionStep,
  type DeletionStepHandlers,
  EXCEEDED_TOLERATED_FAILURES,
  NOT_RETRIED,
  type RetryPolicy,
  retryDelayMs,
  runDeletionStep,
} from "../core/deletion-steps";
import { errorFields, type Logger } from "../core/logger";
import type { ObjectStore } from "../core/object-store";

export interface LocalRunnerOptions {
  steps: DeletionStepHandlers;
  /** Step 2 locally: deliver what the in-process queue holds (lambda/local/warehouse.ts). */
  waitForInFlight: () => Promise<void>;
  /** Where FindFiles wrote its manifest (the warehouse folder): the map reads its items from there. */
  manifests: Pick<ObjectStore, "get">;
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
      if (step.kind === "map") {
        // The Choice before the map: nothing found, nothing to rewrite.
        this.options.onState?.(step.skip.choice, state);
        if (!((state[step.skip.field] ?? 0) > 0)) {
          i = index(step.skip.goTo);
          continue;
        }
      }
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
        return "outcome" in next ? state : next;
      }
      case "map": {
        // The Distributed Map's ItemReader: the manifest FindFiles wrote, read from the same store.
        const key = state[step.manifest];
        const bytes = key === undefined ? undefined : await this.options.manifests.get(key);
        if (!bytes) throw new DeletionFatalError("the deletion manifest is missing");
        const items = parseDeletionManifest(bytes);
        // One item at a time: the rewrites are CPU-bound and share this thread (in AWS each item is a
        // child execution of its own, `maxConcurrency` at a time). Each retries on its own; one that
        // still fails is counted, as the map's tolerated failures count it.
        let failed = 0;
        for (const file of items) {
          const item = { projectId: state.projectId, requestId: state.requestId, key: file.key };
          try {
            await this.retrying(step.retry, () =>
              runDeletionStep(this.options.steps, { step: step.handler, state: item }),
            );
          } catch (err) {
            failed++;
            this.options.logger.error("deletion: a file's rewrite failed", {
              ...errorFields(err),
              key: file.key,
            });
          }
        }
        if (failed > (items.length * step.toleratedFailurePercentage) / 100) {
          const error = new Error(`${failed} of ${items.length} files failed`);
          error.name = EXCEEDED_TOLERATED_FAILURES;
          throw error;
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
