/**
 * The deletion workflow, declared once as data: its steps, their order, retry policies and handlers.
 * `lib/deletion.ts` builds the Step Functions state machine from it, and the local runner
 * (lambda/deletion/runner.ts) walks it, calling the same handlers (lambda/deletion/steps.ts).
 */

export type DeletionHandlerName = "record" | "find" | "rewrite" | "purge" | "verify" | "fail";
/** Handlers of task steps: they take the state and return the next one. */
export type StateHandlerName = Exclude<DeletionHandlerName, "rewrite">;

/** Step Functions' retrier: `maxAttempts` retries after the first try, waits growing by `backoffRate`. */
export interface RetryPolicy {
  maxAttempts: number;
  intervalSeconds: number;
  backoffRate: number;
  maxDelaySeconds: number;
}

/** A branch back to an earlier step while the step's output says so (`$.<when>` is true). */
export interface Repeat {
  /** The name of the Choice state that decides. */
  choice: string;
  when: "more" | "rowsRemain";
  goTo: DeletionStepName;
}

export type DeletionStepName =
  | "RecordRequest"
  | "WaitForInFlight"
  | "FindFiles"
  | "RewriteFiles"
  | "PurgeCopies"
  | "Verify";

export type DeletionStep =
  | { name: DeletionStepName; kind: "task"; handler: StateHandlerName; retry: RetryPolicy; repeat?: Repeat }
  | { name: DeletionStepName; kind: "wait" }
  | {
      name: DeletionStepName;
      kind: "map";
      /** Runs once per item, with a RewriteItem. */
      handler: "rewrite";
      /** The state field holding the items (file keys). */
      items: "files";
      maxConcurrency: number;
      retry: RetryPolicy;
      repeat?: Repeat;
    };

/** Transient failures (throttling, a file rewritten meanwhile): 2, 4, 8, 16, 30 s. */
const TRANSIENT: RetryPolicy = { maxAttempts: 5, intervalSeconds: 2, backoffRate: 2, maxDelaySeconds: 30 };

/** Files per FindFiles round: the list travels in the state, which Step Functions caps at 256 KB. */
export const FIND_BATCH_FILES = 500;
/** Verify sends the workflow back to FindFiles at most this many times before it fails the request. */
export const MAX_VERIFY_ROUNDS = 3;

export const DELETION_STEPS: readonly DeletionStep[] = [
  // 1. Mark the request running and write its tombstone (the warehouse consumer drops what it covers).
  { name: "RecordRequest", kind: "task", handler: "record", retry: TRANSIENT },
  // 2. Records the consumer took before the tombstone existed land within this window.
  { name: "WaitForInFlight", kind: "wait" },
  // 3. Files with matching rows, a batch at a time.
  { name: "FindFiles", kind: "task", handler: "find", retry: TRANSIENT },
  // 4. Each file rewritten without those rows (or removed); then the next batch, if any.
  {
    name: "RewriteFiles",
    kind: "map",
    handler: "rewrite",
    items: "files",
    maxConcurrency: 8,
    retry: TRANSIENT,
    repeat: { choice: "MoreFiles", when: "more", goTo: "FindFiles" },
  },
  // 5. Every other copy: interaction index, rollups, bucket exports, query results.
  { name: "PurgeCopies", kind: "task", handler: "purge", retry: TRANSIENT },
  // 6. Query again: zero rows left completes the request; rows left (a late file) go round again.
  {
    name: "Verify",
    kind: "task",
    handler: "verify",
    retry: TRANSIENT,
    repeat: { choice: "RowsRemain", when: "rowsRemain", goTo: "FindFiles" },
  },
];

/** Where any step's final failure goes: it marks the request failed, then the run fails. */
export const DELETION_FAILURE_STEP = { name: "MarkFailed", handler: "fail", retry: TRANSIENT } as const;
export const DELETION_SUCCEEDED = "Deleted";
export const DELETION_FAILED = "DeletionFailed";

/** Thrown for what no retry can fix (a missing request, rows that keep coming back): never retried. */
export class DeletionFatalError extends Error {
  override name = "DeletionFatalError";
}

/** The request was completed already (a duplicate run): the run ends as succeeded, changing nothing. */
export class DeletionAlreadyCompletedError extends Error {
  override name = "DeletionAlreadyCompletedError";
}

/** Errors that end a step at once instead of being retried. */
export const NOT_RETRIED = [DeletionFatalError.name, DeletionAlreadyCompletedError.name] as const;

/** The state that travels from step to step (the execution input is `{projectId, requestId}`). */
export interface DeletionState {
  projectId: string;
  requestId: string;
  /** How often Verify sent the run back to FindFiles. */
  round?: number;
  /** FindFiles' batch, the items of RewriteFiles. */
  files?: string[];
  more?: boolean;
  rowsRemain?: boolean;
  /** Set on the way to MarkFailed: Step Functions' `{Error, Cause}`. */
  error?: { Error: string; Cause: string };
}

/** One item of the RewriteFiles map. */
export interface RewriteItem {
  projectId: string;
  requestId: string;
  key: string;
}

export interface DeletionStepHandlers {
  record(state: DeletionState): Promise<DeletionState>;
  find(state: DeletionState): Promise<DeletionState>;
  rewrite(item: RewriteItem): Promise<void>;
  purge(state: DeletionState): Promise<DeletionState>;
  verify(state: DeletionState): Promise<DeletionState>;
  fail(state: DeletionState): Promise<DeletionState>;
}

/** The payload of the step Lambda: which handler, and its input. */
export type DeletionTaskEvent =
  | { step: StateHandlerName; state: DeletionState }
  | { step: "rewrite"; state: RewriteItem };

/** Runs one step: what the Lambda handler and the local runner both call. */
export async function runDeletionStep(
  handlers: DeletionStepHandlers,
  event: DeletionTaskEvent,
): Promise<DeletionState | null> {
  if (event.step === "rewrite") {
    await handlers.rewrite(event.state);
    return null;
  }
  return handlers[event.step](event.state);
}

/** The delay before retry `n` (0-based) of a policy, in ms, before jitter. */
export function retryDelayMs(policy: RetryPolicy, n: number): number {
  return Math.min(policy.intervalSeconds * policy.backoffRate ** n, policy.maxDelaySeconds) * 1000;
}
