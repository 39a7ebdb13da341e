import { createHash, randomBytes } from "node:crypto";
import {
  formatUsd,
  type Hold,
  type HoldCharges,
  type HoldResult,
  MAX_GRANT_MICROS,
  MICROS_PER_USD,
  type Settlement,
} from "./credits";
import { globToRegExp } from "./endpoints";
import { ApiError, errors } from "./errors";
import { dayOf } from "./interactions";
import { PROJECT_ID_PATTERN } from "./model";
import type { Store } from "./ports";
import type { UsageRollups } from "./usage-rollups";

/**
 * Spend controls: budgets (a USD limit per project, key or end user, per UTC day, month or in total)
 * and a key's policies (a model allowlist, a tokens-per-minute limit). Pure: the windows, which
 * budgets apply to a call, validation and the refusals. The counting is a hold per budget, like the
 * credit hold (adapters/dynamodb/budgets.ts, metering/budgets.ts, docs/metering.md "Budgets").
 */

export const BUDGET_SCOPES = ["project", "key", "user"] as const;
export type BudgetScope = (typeof BUDGET_SCOPES)[number];
export const BUDGET_WINDOWS = ["day", "month", "total"] as const;
export type BudgetWindow = (typeof BUDGET_WINDOWS)[number];

/** A user budget with this subject applies to every end user apart: each has a counter of its own. */
export const EVERY_USER = "*";

export interface Budget {
  /** `<projectId>.<8 characters>`: the project is part of the id, so the id alone finds the budget. */
  budgetId: string;
  projectId: string;
  scope: BudgetScope;
  /** The key id (scope key) or the end user's id, or `*` for each user (scope user); absent for a project. */
  subject?: string;
  window: BudgetWindow;
  limitMicros: number;
  /** Reports only: never refuses a call. */
  soft: boolean;
  /** Counts BYOK and dual-key calls too, at list price; by default only managed spend counts. */
  includeByok: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface BudgetInput {
  projectId: string;
  keyId?: string;
  userId?: string;
  usd: string;
  window: string;
  soft?: boolean;
  includeByok?: boolean;
}

/** What a call is, as far as budgets care. */
export interface BudgetSubject {
  keyId: string;
  /** The record's user_id: X-User-ID, else the body's `user` or `metadata.user_id`. */
  userId: string | null;
  /** The call is paid by the credits (managed), else by the caller's own vendor key. */
  managed: boolean;
}

/** A window instance: part of the key of what is counted, so nothing has to reset it. */
export interface WindowSpan {
  /** `d2026-11-26`, `m2026-11`, `total`. */
  id: string;
  /** Epoch milliseconds when the next window starts; undefined for `total`. */
  resetsAt: number | undefined;
}

export function windowSpan(window: BudgetWindow, now: number): WindowSpan {
  const at = new Date(now);
  const y = at.getUTCFullYear();
  const m = at.getUTCMonth();
  const pad = (n: number) => String(n).padStart(2, "0");
  if (window === "day") {
    return {
      id: `d${y}-${pad(m + 1)}-${pad(at.getUTCDate())}`,
      resetsAt: Date.UTC(y, m, at.getUTCDate() + 1),
    };
  }
  if (window === "month") return { id: `m${y}-${pad(m + 1)}`, resetsAt: Date.UTC(y, m + 1, 1) };
  return { id: "total", resetsAt: undefined };
}

/**
 * The counter a call adds to under a budget in a window: `<budgetId>#<window>`, and for a budget of
 * each user `#<hash of the user id>` (user ids are the caller's text: hashed, they are short and safe
 * as a key, and the store keeps no user id in the clear).
 */
export function counterId(budget: Budget, span: WindowSpan, userId: string | null): string {
  const base = `${budget.budgetId}#${span.id}`;
  if (budget.scope !== "user" || budget.subject !== EVERY_USER) return base;
  return `${base}#${createHash("sha256")
    .update(`${budget.projectId}\n${userId ?? ""}`)
    .digest("base64url")
    .slice(0, 22)}`;
}

/** The budgets of a project that count a call. */
export function budgetsFor(budgets: readonly Budget[], call: BudgetSubject): Budget[] {
  return budgets.filter((budget) => {
    if (!call.managed && !budget.includeByok) return false;
    if (budget.scope === "project") return true;
    if (budget.scope === "key") return budget.subject === call.keyId;
    if (call.userId === null) return false;
    return budget.subject === EVERY_USER || budget.subject === call.userId;
  });
}

const USER_ID_MAX = 256;
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;
const KEY_ID_PATTERN = /^[a-z0-9]{16}$/;

/**
 * A budget from what a person typed; 400 naming the field for each bad input. Whether the key belongs
 * to the project is the caller's check (it needs the store).
 */
export function newBudget(input: BudgetInput, now: number, budgetId?: string): Budget {
  if (!PROJECT_ID_PATTERN.test(input.projectId)) throw errors.invalidField("project", "is not a project id");
  if (input.keyId !== undefined && input.userId !== undefined) {
    throw errors.invalidField("user", "give a key or a user, not both: a budget has one scope");
  }
  if (input.keyId !== undefined && !KEY_ID_PATTERN.test(input.keyId)) {
    throw errors.invalidField("key", "is not a key id (16 characters of a-z and 0-9, as `keys list` shows)");
  }
  if (input.userId !== undefined) {
    if (input.userId.length === 0 || input.userId.length > USER_ID_MAX || CONTROL.test(input.userId)) {
      throw errors.invalidField(
        "user",
        `must be 1 to ${USER_ID_MAX} printable characters, or '*' for each user`,
      );
    }
  }
  if (!(BUDGET_WINDOWS as readonly string[]).includes(input.window)) {
    throw errors.invalidField("window", `must be one of ${BUDGET_WINDOWS.join(", ")}`);
  }
  const limitMicros = parseLimit(input.usd);
  const scope: BudgetScope =
    input.keyId !== undefined ? "key" : input.userId !== undefined ? "user" : "project";
  const subject = input.keyId ?? input.userId;
  return {
    budgetId:
      budgetId ??
      `${input.projectId}.${randomBytes(6)
        .toString("base64url")
        .toLowerCase()
        .replace(/[^a-z0-9]/g, "0")}`,
    projectId: input.projectId,
    scope,
    ...(subject !== undefined ? { subject } : {}),
    window: input.window as BudgetWindow,
    limitMicros,
    soft: input.soft ?? false,
    includeByok: input.includeByok ?? false,
    createdAt: now,
    updatedAt: now,
  };
}

/** A limit in USD: more than $0, at most $1,000,000, at most 6 decimals. */
export function parseLimit(text: string): number {
  const match = /^(-)?(\d+)(?:\.(\d{1,6}))?$/.exec(text.trim() === text ? text : "");
  if (!match?.[2]) {
    throw errors.invalidField(
      "usd",
      "must be an amount in US dollars with at most 6 decimals, like 20 or 0.50",
    );
  }
  const micros = Number(match[2]) * MICROS_PER_USD + Number((match[3] ?? "").padEnd(6, "0"));
  if (match[1] || micros === 0) throw errors.invalidField("usd", "a budget's limit must be more than $0");
  if (micros > MAX_GRANT_MICROS)
    throw errors.invalidField("usd", `must be at most ${formatUsd(MAX_GRANT_MICROS)}`);
  return micros;
}

/** The project a budget id names (`demo.ab12cd34` -> `demo`), or undefined for a malformed id. */
export function projectOfBudget(budgetId: string): string | undefined {
  const match = /^([a-z0-9][a-z0-9-]{1,62})\.[a-z0-9]{8}$/.exec(budgetId);
  return match?.[1];
}

/**
 * `key abc... ("batch-job")'s daily budget` (the name when the key's is known), `user alice's monthly
 * budget`, `the project's total budget`.
 */
export function describeBudget(
  budget: Pick<Budget, "scope" | "subject" | "window">,
  keyName?: string,
): string {
  const window = budget.window === "day" ? "daily" : budget.window === "month" ? "monthly" : "total";
  if (budget.scope === "project") return `the project's ${window} budget`;
  if (budget.scope === "key") {
    const named = keyName === undefined ? "" : ` (${JSON.stringify(keyName)})`;
    return `key ${budget.subject}${named}'s ${window} budget`;
  }
  if (budget.subject === EVERY_USER) return `the ${window} budget of each end user`;
  return `end user ${JSON.stringify(budget.subject)}'s ${window} budget`;
}

/**
 * The 402 for a hard budget that cannot cover a call: which budget (a key's by its id and, when known,
 * its name: the calling key's), what is left, when it resets.
 */
export function budgetExceededError(
  budget: Budget,
  span: WindowSpan,
  neededMicros: number,
  remainingMicros: number,
  keyName?: string,
): ApiError {
  const resets =
    span.resetsAt === undefined
      ? "It does not reset."
      : `It resets at ${new Date(span.resetsAt).toISOString()}.`;
  const headers = budgetHeaders(Math.max(0, remainingMicros), span);
  return new ApiError(
    402,
    "billing_error",
    "budget_exceeded",
    `Budget exceeded: this request may cost up to ${formatUsd(neededMicros)} and ${describeBudget(budget, keyName)} ` +
      `of ${formatUsd(budget.limitMicros)} has ${formatUsd(Math.max(0, remainingMicros))} left. ${resets}`,
    headers,
  );
}

/** `X-Budget-Remaining-USD` (decimal USD) and `X-Budget-Reset` (Unix seconds; absent for `total`). */
export function budgetHeaders(remainingMicros: number, span: WindowSpan): Record<string, string> {
  return {
    "X-Budget-Remaining-USD": formatUsd(Math.max(0, remainingMicros)).slice(1),
    ...(span.resetsAt === undefined ? {} : { "X-Budget-Reset": String(Math.floor(span.resetsAt / 1000)) }),
  };
}

/** What `budgets list` and `GET /api/v1/budgets` show of a budget. */
export interface BudgetView {
  id: string;
  project: string;
  scope: BudgetScope;
  key?: string;
  user?: string;
  window: BudgetWindow;
  limit_usd: string;
  soft: boolean;
  include_byok: boolean;
  /** The current window: its spend (settled and noted charges) and what open holds reserve. */
  window_id: string;
  spent_usd?: string;
  held_usd?: string;
  resets_at?: string;
}

export function budgetView(
  budget: Budget,
  now: number,
  spend?: { spentMicros: number; heldMicros: number },
): BudgetView {
  const span = windowSpan(budget.window, now);
  const usd = (micros: number) => formatUsd(micros).slice(1);
  return {
    id: budget.budgetId,
    project: budget.projectId,
    scope: budget.scope,
    ...(budget.scope === "key" ? { key: budget.subject } : {}),
    ...(budget.scope === "user" ? { user: budget.subject } : {}),
    window: budget.window,
    limit_usd: usd(budget.limitMicros),
    soft: budget.soft,
    include_byok: budget.includeByok,
    window_id: span.id,
    ...(spend ? { spent_usd: usd(spend.spentMicros), held_usd: usd(spend.heldMicros) } : {}),
    ...(span.resetsAt === undefined ? {} : { resets_at: new Date(span.resetsAt).toISOString() }),
  };
}

/**
 * Budgets as shown, each with its current window's spend: for a budget of each user, the spend of
 * `userId` (none without one: each user has a window of their own).
 */
export function budgetViews(
  store: Pick<BudgetStore, "spend">,
  budgets: readonly Budget[],
  now: number,
  userId: string | null = null,
): Promise<BudgetView[]> {
  return Promise.all(
    budgets.map(async (budget) => {
      const countable = budget.subject !== EVERY_USER || userId !== null;
      const spend = countable
        ? await store.spend(counterId(budget, windowSpan(budget.window, now), userId))
        : undefined;
      return budgetView(budget, now, spend);
    }),
  );
}

/** The budgets port: definitions, and the spend of a window's counter. */
export interface BudgetStore {
  put(budget: Budget): Promise<void>;
  get(budgetId: string): Promise<Budget | undefined>;
  list(projectId: string): Promise<Budget[]>;
  /** True when there was one to delete. */
  delete(budgetId: string): Promise<boolean>;
  spend(counterId: string): Promise<{ spentMicros: number; heldMicros: number }>;
  /**
   * The counter counts at least `micros` as spent (settled and noted): what its window recorded
   * before the budget counted it. Raises its spend, never lowers it.
   */
  startFrom(counterId: string, micros: number): Promise<void>;
}

/** A counter with holds under a limit: adapters/dynamodb/budgets.ts. */
export interface BudgetCounters extends BudgetStore {
  hold(
    counterId: string,
    holdId: string,
    micros: number,
    expiresAt: number,
    limitMicros: number,
  ): Promise<HoldResult>;
  recordCharges(hold: Hold, charges: HoldCharges): Promise<boolean>;
  settleCharges(hold: Hold, charges: HoldCharges): Promise<Settlement>;
  /** A counter's settled spend, and the charges noted on each of its open holds (by hold id). */
  charges(counterId: string): Promise<{ settledMicros: number; noted: Map<string, number> }>;
  /** The sweeper's: settles every expired hold at the charges noted on it. */
  releaseExpired(now: number): Promise<{ holdsSettled: number }>;
}

/**
 * What a call did to a budget's window, for the alerts (events/budget-alerts.ts): reported after the
 * call's charge, or after a hard budget refused it.
 */
export interface BudgetReport {
  budget: Budget;
  windowId: string;
  counterId: string;
  /** The window's spend, this call's charge included (settled and noted charges of every process). */
  usedMicros: number;
  /** The call's end user, or null. */
  userId: string | null;
  /** The call's store level is `none`: a user id may leave only as its keyed hash. */
  hideUserId: boolean;
  /** A hard budget refused the call, whose maximum cost was this: its window could not cover it. */
  refusedMicros?: number;
}

/** Who watches budgets' windows (the alert rules); metering/budgets.ts reports to it. */
export interface BudgetWatcher {
  /** Whether a report on this counter could fire anything: false spares the spend read. */
  watching(budget: Budget, counterId: string): Promise<boolean>;
  report(report: BudgetReport): Promise<void>;
}

/** The first day the rollups know of: a `total` window's recorded spend is summed from it. */
const FIRST_DAY = "2000-01-01";

/**
 * What the budget's scope spent in its current window, as recorded (the daily rollups by key or by end
 * user): the credits' charges, or with `includeByok` every call at list price. A budget of each user
 * has no one scope: 0.
 */
export async function recordedSpend(
  usage: Pick<UsageRollups, "breakdown">,
  budget: Budget,
  now: number,
): Promise<number> {
  if (budget.subject === EVERY_USER) return 0;
  const to = dayOf(now);
  const from = budget.window === "day" ? to : budget.window === "month" ? `${to.slice(0, 8)}01` : FIRST_DAY;
  const rows = await usage.breakdown(budget.projectId, budget.scope === "user" ? "user" : "key", from, to);
  return rows
    .filter((row) => budget.scope === "project" || row.id === budget.subject)
    .reduce((sum, row) => sum + (budget.includeByok ? row.cost_micros : row.charged_micros), 0);
}

/**
 * Sets a budget: a new one, or a new limit and flags for the budget of the same scope, subject and
 * window (so `set` twice changes one budget, keeping its id). A key must be one of the project's.
 * With the rollups, the current window starts from what its scope spent in it already: a budget set
 * mid-window counts the window from its start.
 */
export async function setBudget(
  store: Pick<Store, "getProject" | "getKey">,
  budgets: BudgetStore,
  input: BudgetInput,
  now: number,
  usage?: Pick<UsageRollups, "breakdown">,
): Promise<Budget> {
  const budget = newBudget(input, now);
  if (!(await store.getProject(budget.projectId))) {
    throw errors.notFound(`Project '${budget.projectId}' does not exist.`);
  }
  if (budget.scope === "key") {
    const key = await store.getKey(budget.subject ?? "");
    if (!key) throw errors.notFound(`Key '${budget.subject}' does not exist.`);
    if (key.projectId !== budget.projectId) {
      throw errors.invalidField(
        "key",
        `key ${key.keyId} belongs to another project, not '${budget.projectId}'`,
      );
    }
  }
  const same = (await budgets.list(budget.projectId)).find(
    (b) => b.scope === budget.scope && b.subject === budget.subject && b.window === budget.window,
  );
  const saved = same ? { ...budget, budgetId: same.budgetId, createdAt: same.createdAt } : budget;
  await budgets.put(saved);
  if (usage && saved.subject !== EVERY_USER) {
    const counter = counterId(saved, windowSpan(saved.window, now), null);
    await budgets.startFrom(counter, await recordedSpend(usage, saved, now));
  }
  return saved;
}

// --- Key policies -------------------------------------------------------------------------------

/** The highest tokens-per-minute limit a key may have. */
export const MAX_TPM = 100_000_000;
const MAX_MODEL_PATTERNS = 50;
const MODEL_PATTERN = /^[A-Za-z0-9._:/@*-]{1,200}$/;

/** A `--models` list: comma-separated model names with `*` globs. */
export function parseModels(text: string): string[] {
  const patterns = [...new Set(text.split(",").map((part) => part.trim()))];
  if (patterns.length === 0 || patterns.length > MAX_MODEL_PATTERNS || patterns.some((p) => p === "")) {
    throw errors.invalidField(
      "models",
      `give 1 to ${MAX_MODEL_PATTERNS} comma-separated model names or globs`,
    );
  }
  for (const pattern of patterns) {
    if (!MODEL_PATTERN.test(pattern)) {
      throw errors.invalidField(
        "models",
        `'${pattern.slice(0, 50)}' is not a model name or glob (letters, digits, . _ : / @ - and *)`,
      );
    }
  }
  return patterns;
}

export function validateTpm(tpm: number): void {
  if (!Number.isSafeInteger(tpm) || tpm < 1 || tpm > MAX_TPM) {
    throw errors.invalidField("tpm", `must be a whole number from 1 to ${MAX_TPM}`);
  }
}

/** Gemini names models `models/<name>` in paths: the allowlist matches the bare name too. */
export function modelAllowed(patterns: readonly string[] | undefined, model: string): boolean {
  if (!patterns) return true;
  const bare = model.startsWith("models/") ? model.slice("models/".length) : model;
  return patterns.some((pattern) => globToRegExp(pattern).test(model) || globToRegExp(pattern).test(bare));
}

/** The patterns that match no model of the catalogue: a warning (the key may be for a newer model). */
export function unmatchedModelPatterns(patterns: readonly string[], catalogue: readonly string[]): string[] {
  return patterns.filter((pattern) => !catalogue.some((model) => modelAllowed([pattern], model)));
}

export function modelNotAllowedError(model: string): ApiError {
  return new ApiError(
    403,
    "permission_error",
    "model_not_allowed",
    `This API key is not allowed to use the model '${model.slice(0, 256)}'.`,
  );
}

/** The minute a tokens-per-minute counter counts: a fixed UTC minute, part of its key. */
export function tpmSpan(now: number): WindowSpan {
  const minute = Math.floor(now / 60_000);
  return { id: `t${minute}`, resetsAt: (minute + 1) * 60_000 };
}

/**
 * A key's tokens-per-minute counter in a minute (`tpm#<keyId>#t<minute>`), or one shard of it
 * (`...#s<k>`) when the minute is split over several counters (`tpmShardCount`).
 */
export function tpmCounterId(keyId: string, span: WindowSpan, shard?: number): string {
  return shard === undefined ? `tpm#${keyId}#${span.id}` : `tpm#${keyId}#${span.id}#s${shard}`;
}

/** A key's minute is split in one counter per this many tokens of its limit (up to the host's most). */
export const TPM_TOKENS_PER_SHARD = 1_000_000;

/**
 * How many counters a key's minute is split over when the host allows `maxShards`: one per
 * TPM_TOKENS_PER_SHARD of the limit, so a small limit stays one counter (and a lease of it is not cut
 * into slivers). Thousands of Lambda containers each take a lease of the new minute within seconds of
 * its start: on one item that is past DynamoDB's 1,000 writes a second (docs/metering.md "TPM counters").
 */
export function tpmShardCount(limit: number, maxShards: number): number {
  return Math.max(1, Math.min(Math.floor(maxShards), Math.floor(limit / TPM_TOKENS_PER_SHARD)));
}

/** Shard k's part of the limit; the parts sum to the limit exactly, so no minute passes it. */
export function tpmShardLimit(limit: number, shards: number, k: number): number {
  return Math.floor(limit / shards) + (k < limit % shards ? 1 : 0);
}

/** How long a past minute's counter is kept: well past any hold on it (a lease lives minutes). */
const TPM_COUNTER_KEPT_MS = 60 * 60_000;
/** A closed day or month window's counter: kept 90 days after the window closed (DynamoDB TTL). */
export const CLOSED_WINDOW_KEPT_MS = 90 * 86_400_000;

/**
 * When the store may drop a counter (epoch ms), or undefined to keep it (a `total` window). A
 * tokens-per-minute counter means nothing once its minute has passed: it goes an hour later; a day or
 * month window's counter 90 days after the window closed (DynamoDB TTL), so the table does not keep
 * every past window for good.
 */
export function counterExpiry(counterId: string): number | undefined {
  const minute = /^tpm#.+#t(\d+)(?:#s\d+)?$/.exec(counterId)?.[1];
  if (minute !== undefined) return (Number(minute) + 1) * 60_000 + TPM_COUNTER_KEPT_MS;
  // A day or month window: kept a while after it closed (its spend is history), then dropped.
  const window = /#(d\d{4}-\d{2}-\d{2}|m\d{4}-\d{2})(?:#|$)/.exec(counterId)?.[1];
  if (window === undefined) return undefined;
  const [y, m, d] = window.slice(1).split("-").map(Number) as [number, number, number | undefined];
  const closes = d === undefined ? Date.UTC(y, m, 1) : Date.UTC(y, m - 1, d + 1);
  return closes + CLOSED_WINDOW_KEPT_MS;
}

export function tpmExceededError(tpm: number, span: WindowSpan, now: number): ApiError {
  const retryAfter = Math.max(1, Math.ceil(((span.resetsAt ?? now) - now) / 1000));
  return new ApiError(
    429,
    "rate_limit_error",
    "rate_limit_exceeded",
    `Tokens-per-minute limit of ${tpm} reached for this key; retry after ${retryAfter} s.`,
    { "Retry-After": String(retryAfter) },
  );
}
