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
  when: "rowsRemain";
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
      /** Runs once per item, with a RewriteItem: one child execution per file, retried on its own. */
      handler: "rewrite";
      /** The state field holding the key of the manifest (core/deletion-manifest.ts) the items are read from. */
      manifest: "manifest";
      /** The Choice before the map: with `$.<field>` 0 (nothing found) the map is skipped. */
      skip: { choice: string; field: "files"; goTo: DeletionStepName };
      maxConcurrency: number;
      /** Files that may still fail after their retries without failing the map (Verify goes round again). */
      toleratedFailurePercentage: number;
      retry: RetryPolicy;
      repeat?: Repeat;
    };

/** Transient failures (throttling, a file rewritten meanwhile): 2, 4, 8, 16, 30 s. */
const TRANSIENT: RetryPolicy = { maxAttempts: 5, intervalSeconds: 2, backoffRate: 2, maxDelaySeconds: 30 };

/** Verify sends the workflow back to FindFiles at most this many times before it fails the request. */
export const MAX_VERIFY_ROUNDS = 3;

export const DELETION_STEPS: readonly DeletionStep[] = [
  // 1. Mark the request running and write its tombstone (the warehouse consumer drops what it covers).
  { name: "RecordRequest", kind: "task", handler: "record", retry: TRANSIENT },
  // 2. Records the consumer took before the tombstone existed land within this window.
  { name: "WaitForInFlight", kind: "wait" },
  // 3. Files with matching rows: one query, its list written once as a manifest in the object store.
  { name: "FindFiles", kind: "task", handler: "find", retry: TRANSIENT },
  // 4. Each file of the manifest rewritten without those rows (or removed): a Distributed Map in AWS.
  {
    name: "RewriteFiles",
    kind: "map",
    handler: "rewrite",
    manifest: "manifest",
    skip: { choice: "AnyFiles", field: "files", goTo: "PurgeCopies" },
    maxConcurrency: 32,
    // A file still failing after its retries leaves rows that Verify finds and sends round again; more
    // than this share failing is something broken for every file, so the request fails at once.
    toleratedFailurePercentage: 5,
    retry: TRANSIENT,
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
  /** FindFiles' manifest (its object key), the items of RewriteFiles, and how many files it lists. */
  manifest?: string;
  files?: number;
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

/** What the rewrite of one file did ("missing": the manifest named a file already gone: skipped). */
export type RewriteOutcome = "rewritten" | "removed" | "unchanged" | "missing";

/** The map's error when more files failed than it tolerates (Step Functions' own name for it). */
export const EXCEEDED_TOLERATED_FAILURES = "States.ExceedToleratedFailureThreshold";

export interface DeletionStepHandlers {
  record(state: DeletionState): Promise<DeletionState>;
  find(state: DeletionState): Promise<DeletionState>;
  rewrite(item: RewriteItem): Promise<RewriteOutcome>;
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
): Promise<DeletionState | { outcome: RewriteOutcome }> {
  // An object, not a bare string: the child execution's output (discarded by the map).
  if (event.step === "rewrite") return { outcome: await handlers.rewrite(event.state) };
  return handlers[event.step](event.state);
}

/** The delay before retry `n` (0-based) of a policy, in ms, before jitter. */
export function retryDelayMs(policy: RetryPolicy, n: number): number {
  return Math.min(policy.intervalSeconds * policy.backoffRate ** n, policy.maxDelaySeconds) * 1000;
}
