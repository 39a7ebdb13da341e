import { unmatchedModelPatterns } from "./budgets";
import { globToRegExp } from "./endpoints";
import { ApiError, errors } from "./errors";
import { PROJECT_ID_PATTERN } from "./model";
import { ConflictError } from "./ports";
import type { Ratio } from "./pricing/decimal";
import { VENDOR_NAMES, type VendorName } from "./vendor-names";

/**
 * Price plans: what a project pays over the vendors' list prices. A plan is a percentage over list
 * price for every call, with optional percentages per vendor or per model glob (the most specific
 * wins: a model glob, then the vendor, then the plan's own); a negative percentage is a discount, down
 * to -100 (free). Plans and a project's choice of plan change only from a stated moment on (now by
 * default, never in the past), so a recorded call is never repriced: the record's cost breakdown keeps
 * the plan id and version that priced it. A project on no plan is on the default plan, the deployment's
 * `DMT_PRICE_MARKUP`. Design: docs/plans.md.
 */

/** The plan of every project that was given none: the deployment's markup (not stored). */
export const DEFAULT_PLAN_ID = "default";
/** Ids: 2-63 characters of a-z, 0-9 and '-' (like project ids), never `default`. */
export const PLAN_ID_PATTERN = PROJECT_ID_PATTERN;
/** A percentage: up to 3 digits and 4 decimals, optional sign; from -100 (free) to +900 (10 × list). */
const PERCENT = /^([+-]?)(\d{1,3})(?:\.(\d{1,4}))?%?$/;
const MIN_PERCENT = -100;
const MAX_PERCENT = 900;
/** Percent text scaled by 10^4: the ratio's denominator is 100 × 10^4. */
const PERCENT_SCALE = 10_000n;
const RATIO_DEN = 100n * PERCENT_SCALE;
const MAX_MODEL_RULES = 100;
const MAX_NAME = 120;

/** What a plan charges, as percentages over list price (decimal text, e.g. "10", "-5", "12.5"). */
export interface PlanRules {
  /** Over list price for every call no rule below names. */
  percent: string;
  /** Per vendor: over `percent`'s place for that vendor's models. */
  vendors: Partial<Record<VendorName, string>>;
  /** Per model glob (`gpt-4o*`, `claude-*`): the most specific matching glob wins over the vendor's. */
  models: Record<string, string>;
}

/** One version of a plan: its rules, in force from `effectiveFrom` until the next version's. */
export interface PlanVersion extends PlanRules {
  version: number;
  effectiveFrom: number;
  createdAt: number;
}

export interface Plan {
  planId: string;
  name: string;
  createdAt: number;
  /** Oldest first; versions superseded before they took effect are dropped. */
  versions: PlanVersion[];
}

/** A project's plan from `from` on (until the next entry's `from`). */
export interface PlanEntry {
  planId: string;
  from: number;
}

/** Which plan a project is on, and any change scheduled. */
export interface ProjectPlan {
  projectId: string;
  /** Oldest first: the entry in force now, then any scheduled. Entries already over are dropped. */
  entries: PlanEntry[];
  /** Kept by the store: one more at each write, for the next write's condition. */
  revision?: number;
}

/** The plan store: DynamoDB (adapters/dynamodb/plans.ts) and memory (adapters/memory/plans.ts). */
export interface PlanStore {
  /** Creates a plan; throws ConflictError if the id is taken. */
  createPlan(plan: Plan): Promise<void>;
  /**
   * Replaces a plan's versions when it still has `expectedVersions` of them (the caller's read); throws
   * ConflictError when another write came first, or the plan is gone.
   */
  updatePlan(plan: Plan, expectedVersions: number): Promise<void>;
  getPlan(planId: string): Promise<Plan | undefined>;
  listPlans(): Promise<Plan[]>;
  /**
   * Deletes a plan no project is on at `now` or later (its entry in force, or one scheduled); else
   * `in_use` with those projects, and nothing deleted. A project that moved away from it stops counting
   * once the move took effect.
   */
  deletePlan(
    planId: string,
    now: number,
  ): Promise<{ outcome: "deleted" | "missing" } | { outcome: "in_use"; projects: string[] }>;
  getProjectPlan(projectId: string): Promise<ProjectPlan | undefined>;
  /**
   * Writes a project's entries when its stored ones are still `previous` (by its revision); every
   * plan named must exist, and each plan keeps the set of projects whose entries name it. Throws ConflictError when another write came first or a plan is missing.
   */
  setProjectPlan(next: ProjectPlan, previous: ProjectPlan | undefined): Promise<void>;
}

/** The plan and version that price a call, and its percentage for that call's model. */
export interface AppliedPlan {
  id: string;
  version: number;
  /** The percentage that applied, as the plan states it. */
  percent: string;
  /** (100 + percent) / 100, exactly. */
  ratio: Ratio;
}

/** "12.5" -> 12.5% as a checked decimal text; throws a 400 naming `field`. */
export function parsePercent(field: string, raw: unknown): string {
  const text = typeof raw === "number" && Number.isFinite(raw) ? String(raw) : raw;
  const match = typeof text === "string" ? PERCENT.exec(text.trim()) : null;
  if (!match) {
    throw errors.invalidField(field, "must be a percentage such as 10, -5 or 12.5 (at most 4 decimals)");
  }
  const [, sign = "", whole = "0", fraction = ""] = match;
  const scaled = BigInt(whole) * PERCENT_SCALE + BigInt(fraction.padEnd(4, "0"));
  const value = sign === "-" ? -scaled : scaled;
  if (value < BigInt(MIN_PERCENT) * PERCENT_SCALE || value > BigInt(MAX_PERCENT) * PERCENT_SCALE) {
    throw errors.invalidField(
      field,
      `must be from ${MIN_PERCENT} (free) to ${MAX_PERCENT}; a discount is negative, and no discount goes below -100`,
    );
  }
  return canonical(value);
}

function canonical(scaled: bigint): string {
  const negative = scaled < 0n;
  const abs = negative ? -scaled : scaled;
  const fraction = (abs % PERCENT_SCALE).toString().padStart(4, "0").replace(/0+$/, "");
  const text = `${abs / PERCENT_SCALE}${fraction ? `.${fraction}` : ""}`;
  return negative && text !== "0" ? `-${text}` : text;
}

/** (100 + percent) / 100 as an exact ratio: "10" -> 110/100, "-100" -> 0. */
export function ratioOfPercent(percent: string): Ratio {
  const match = PERCENT.exec(percent);
  if (!match) throw new RangeError(`not a percentage: ${percent}`);
  const [, sign = "", whole = "0", fraction = ""] = match;
  const scaled = BigInt(whole) * PERCENT_SCALE + BigInt(fraction.padEnd(4, "0"));
  return { num: RATIO_DEN + (sign === "-" ? -scaled : scaled), den: RATIO_DEN };
}

/** The deployment's markup factor (1.1) as the default plan's percentage ("10"). */
export function percentOfMarkup(markup: Ratio): string {
  return canonical(((markup.num - markup.den) * 100n * PERCENT_SCALE) / markup.den);
}

/** The default plan: the deployment's markup for everything, one version, in force since forever. */
export function defaultPlan(markup: Ratio): Plan {
  return {
    planId: DEFAULT_PLAN_ID,
    name: "Deployment default (DMT_PRICE_MARKUP)",
    createdAt: 0,
    versions: [
      {
        version: 1,
        effectiveFrom: 0,
        createdAt: 0,
        percent: percentOfMarkup(markup),
        vendors: {},
        models: {},
      },
    ],
  };
}

export interface PlanInput {
  name?: string;
  /** The percentage for everything; on update, absent keeps the current one. */
  percent?: unknown;
  /** `openai=5` pairs, or an object; on update, given ones replace the current set. */
  vendors?: Record<string, unknown>;
  models?: Record<string, unknown>;
  /** When the rules take effect; default now, never earlier. */
  at?: number;
}

/** Checked rules, with warnings for model globs no catalogue model matches (maybe a newer model). */
export function checkRules(
  input: Required<Pick<PlanInput, "percent">> & PlanInput,
  catalogueModels: readonly string[],
): { rules: PlanRules; warnings: string[] } {
  const percent = parsePercent("percent", input.percent);
  const vendors: Partial<Record<VendorName, string>> = {};
  for (const [vendor, value] of Object.entries(input.vendors ?? {})) {
    if (!(VENDOR_NAMES as readonly string[]).includes(vendor)) {
      throw errors.invalidField(
        "vendor",
        `'${vendor.slice(0, 40)}' is not one of ${VENDOR_NAMES.join(", ")}`,
      );
    }
    vendors[vendor as VendorName] = parsePercent(`vendor ${vendor}`, value);
  }
  const models: Record<string, string> = {};
  const entries = Object.entries(input.models ?? {});
  if (entries.length > MAX_MODEL_RULES)
    throw errors.invalidField("model", `at most ${MAX_MODEL_RULES} model rules`);
  for (const [glob, value] of entries) {
    if (!/^[\w.:/@*-]{1,128}$/.test(glob)) {
      throw errors.invalidField(
        "model",
        "a model glob is 1-128 characters of letters, digits, . : / @ - _ and *",
      );
    }
    models[glob] = parsePercent(`model ${glob}`, value);
  }
  const warnings = unmatchedModelPatterns(Object.keys(models), catalogueModels).map(
    (glob) =>
      `model glob '${glob}' matches no model of the price catalogue (kept: it may name a newer model)`,
  );
  return { rules: { percent, vendors, models }, warnings };
}

function checkId(planId: string): void {
  if (!PLAN_ID_PATTERN.test(planId) || planId === DEFAULT_PLAN_ID) {
    throw errors.invalidField(
      "plan",
      "use 2-63 characters of a-z, 0-9 and '-', starting with a letter or digit ('default' is the deployment's markup)",
    );
  }
}

function checkAt(at: number | undefined, now: number): number {
  if (at === undefined) return now;
  if (!Number.isFinite(at)) throw errors.invalidField("at", "must be a time");
  // A past start would reprice calls already recorded.
  if (at < now) throw errors.invalidField("at", "must be now or later: a recorded call is never repriced");
  return at;
}

/** The version in force at `at`: the newest whose start is not after it. */
export function versionAt<T extends { effectiveFrom: number }>(
  versions: readonly T[],
  at: number,
): T | undefined {
  let found: T | undefined;
  for (const version of versions) if (version.effectiveFrom <= at) found = version;
  return found;
}

/** The plan entry in force at `at`. */
export function entryAt(entries: readonly PlanEntry[], at: number): PlanEntry | undefined {
  let found: PlanEntry | undefined;
  for (const entry of entries) if (entry.from <= at) found = entry;
  return found;
}

/**
 * The percentage for one model under a plan version: the most specific matching model glob (the most
 * characters besides `*`; then the fewer `*`), else the vendor's, else the plan's own.
 */
export function percentFor(rules: PlanRules, vendor: VendorName, models: readonly string[]): string {
  let best: { glob: string; score: number; stars: number } | undefined;
  for (const glob of Object.keys(rules.models)) {
    if (!models.some((model) => globToRegExp(glob).test(model))) continue;
    const stars = glob.split("*").length - 1;
    const score = glob.length - stars;
    if (!best || score > best.score || (score === best.score && stars < best.stars))
      best = { glob, score, stars };
  }
  if (best) return rules.models[best.glob] as string;
  return rules.vendors[vendor] ?? rules.percent;
}

export interface PlanView extends Plan {
  /** The version in force now. */
  current: PlanVersion | undefined;
}

/** Creates a plan; the warnings name model globs no catalogue model matches. */
export async function createPlan(
  store: PlanStore,
  planId: string,
  input: PlanInput,
  catalogueModels: readonly string[],
  now: number,
): Promise<{ plan: Plan; warnings: string[] }> {
  checkId(planId);
  if (input.percent === undefined) throw errors.missingField("percent");
  const name = checkName(input.name ?? planId);
  const { rules, warnings } = checkRules({ ...input, percent: input.percent }, catalogueModels);
  const effectiveFrom = checkAt(input.at, now);
  const plan: Plan = {
    planId,
    name,
    createdAt: now,
    versions: [{ version: 1, effectiveFrom, createdAt: now, ...rules }],
  };
  try {
    await store.createPlan(plan);
  } catch (err) {
    if (err instanceof ConflictError)
      throw errors.badRequest("already_exists", `Plan '${planId}' already exists.`);
    throw err;
  }
  return { plan, warnings };
}

/**
 * A new version of a plan from `at` (default now): rules not given are kept from the newest version.
 * Versions scheduled at or after `at` are superseded (they never took effect, so nothing used them).
 */
export async function updatePlan(
  store: PlanStore,
  planId: string,
  input: PlanInput,
  catalogueModels: readonly string[],
  now: number,
): Promise<{ plan: Plan; warnings: string[] }> {
  if (planId === DEFAULT_PLAN_ID) {
    throw errors.badRequest(
      "read_only",
      "The default plan is the deployment's DMT_PRICE_MARKUP: change that setting.",
    );
  }
  for (let attempt = 0; ; attempt++) {
    const plan = await store.getPlan(planId);
    if (!plan) throw errors.notFound(`Plan '${planId}' does not exist.`);
    const latest = plan.versions[plan.versions.length - 1] as PlanVersion;
    const { rules, warnings } = checkRules(
      {
        percent: input.percent ?? latest.percent,
        vendors: input.vendors ?? latest.vendors,
        models: input.models ?? latest.models,
      },
      catalogueModels,
    );
    const effectiveFrom = checkAt(input.at, now);
    const kept = plan.versions.filter((v) => v.effectiveFrom < effectiveFrom);
    const next: Plan = {
      ...plan,
      name: input.name === undefined ? plan.name : checkName(input.name),
      versions: [...kept, { version: latest.version + 1, effectiveFrom, createdAt: now, ...rules }],
    };
    try {
      await store.updatePlan(next, plan.versions.length);
      return { plan: next, warnings };
    } catch (err) {
      if (!(err instanceof ConflictError) || attempt >= 3) throw err;
    }
  }
}

/** Deletes a plan no project is on (nor moving to or from); else a 409 naming the projects. */
export async function deletePlan(store: PlanStore, planId: string, now: number): Promise<void> {
  if (planId === DEFAULT_PLAN_ID) throw errors.badRequest("read_only", "The default plan cannot be deleted.");
  const result = await store.deletePlan(planId, now);
  if (result.outcome === "missing") throw errors.notFound(`Plan '${planId}' does not exist.`);
  if (result.outcome === "in_use") {
    const named = result.projects.slice(0, 5).join(", ");
    const more = result.projects.length > 5 ? ` and ${result.projects.length - 5} more` : "";
    throw new ApiError(
      409,
      "invalid_request_error",
      "plan_in_use",
      `Plan '${planId}' is in use by ${named}${more}: move those projects to another plan first.`,
    );
  }
}

/**
 * Puts a project on a plan from `at` (default now; never earlier). `default` moves it back to the
 * deployment's markup. Entries already over, and changes scheduled at or after `at`, are dropped.
 */
export async function setProjectPlan(
  store: PlanStore,
  projectId: string,
  planId: string,
  at: number | undefined,
  now: number,
): Promise<ProjectPlan> {
  if (planId !== DEFAULT_PLAN_ID && !(await store.getPlan(planId))) {
    throw errors.notFound(`Plan '${planId}' does not exist.`);
  }
  const from = checkAt(at, now);
  for (let attempt = 0; ; attempt++) {
    const previous = await store.getProjectPlan(projectId);
    const live = liveEntries(previous?.entries ?? [], now).filter((e) => e.from < from);
    const next: ProjectPlan = { projectId, entries: [...live, { planId, from }] };
    try {
      await store.setProjectPlan(next, previous);
      return next;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      if (attempt >= 3)
        throw errors.notFound(`Plan '${planId}' does not exist (or changed meanwhile): try again.`);
    }
  }
}

/** The entries still in force or to come: the one in force at `now` and every later one. */
export function liveEntries(entries: readonly PlanEntry[], now: number): PlanEntry[] {
  const current = entryAt(entries, now);
  return entries.filter((e) => e === current || e.from > now);
}

/** The plans every entry names (stored ones; `default` is not stored). */
export function namedPlans(entries: readonly PlanEntry[]): Set<string> {
  return new Set(entries.map((e) => e.planId).filter((id) => id !== DEFAULT_PLAN_ID));
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
const CONTROL = /[\u0000-\u001f\u007f]/;

function checkName(name: string): string {
  const trimmed = name.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_NAME || CONTROL.test(trimmed)) {
    throw errors.invalidField("name", `1-${MAX_NAME} printable characters`);
  }
  return trimmed;
}

/** A plan with the version in force at `now`. */
export function planView(plan: Plan, now: number): PlanView {
  return { ...plan, current: versionAt(plan.versions, now) };
}

/** `openai=5` words into { openai: "5" }; a word without `=` is a 400 naming the option. */
export function pairs(
  option: string,
  words: readonly string[] | undefined,
): Record<string, string> | undefined {
  if (words === undefined || words.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const word of words) {
    const at = word.lastIndexOf("=");
    if (at <= 0) throw errors.invalidField(option, `'${word.slice(0, 60)}' is not <name>=<percent>`);
    out[word.slice(0, at)] = word.slice(at + 1);
  }
  return out;
}

/** What a project's members see of its plan: the rules in force now, and what is scheduled. */
export interface ProjectPlanView {
  current: PlanSummary;
  /** Changes to come, soonest first: a move to another plan, or a new version of the plan. */
  scheduled: (PlanSummary & { from: number })[];
}

export interface PlanSummary extends PlanRules {
  planId: string;
  name: string;
  version: number;
}

/** A project's plan as the Credits page shows it (read-only). */
export async function projectPlanView(
  store: Pick<PlanStore, "getPlan" | "getProjectPlan">,
  projectId: string,
  markup: Ratio,
  now: number,
): Promise<ProjectPlanView> {
  const entries = (await store.getProjectPlan(projectId))?.entries ?? [];
  const fallback = defaultPlan(markup);
  const plans = new Map<string, Plan>([[DEFAULT_PLAN_ID, fallback]]);
  for (const planId of namedPlans(liveEntries(entries, now))) {
    const plan = await store.getPlan(planId);
    if (plan) plans.set(planId, plan);
  }
  const summary = (plan: Plan, version: PlanVersion): PlanSummary => ({
    planId: plan.planId,
    name: plan.name,
    version: version.version,
    percent: version.percent,
    vendors: version.vendors,
    models: version.models,
  });
  const planAt = (at: number) => plans.get(entryAt(entries, at)?.planId ?? DEFAULT_PLAN_ID) ?? fallback;
  const current = planAt(now);
  const currentVersion = versionAt(current.versions, now) ?? (current.versions[0] as PlanVersion);
  // Every moment something changes: a project entry's start, or a version's start of the plan then.
  const moments = [
    ...entries.filter((e) => e.from > now).map((e) => e.from),
    ...[...plans.values()].flatMap((p) =>
      p.versions.filter((v) => v.effectiveFrom > now).map((v) => v.effectiveFrom),
    ),
  ].sort((a, b) => a - b);
  const scheduled: ProjectPlanView["scheduled"] = [];
  let last = `${current.planId}@${currentVersion.version}`;
  for (const from of new Set(moments)) {
    const plan = planAt(from);
    const version = versionAt(plan.versions, from);
    if (!version || `${plan.planId}@${version.version}` === last) continue;
    last = `${plan.planId}@${version.version}`;
    scheduled.push({ ...summary(plan, version), from });
  }
  return { current: summary(current, currentVersion), scheduled };
}
