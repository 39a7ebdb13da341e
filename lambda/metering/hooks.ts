import type { BillingMode } from "../core/billing-mode";
import { modelAllowed, modelNotAllowedError } from "../core/budgets";
import type { BeforeDecision, ProxyCall, ProxyHooks, ProxyOutcome } from "../core/call";
import { type CreditStore, insufficientCreditsError } from "../core/credits";
import { errors } from "../core/errors";
import {
  type IdempotencyStore,
  idempotencyError,
  MAX_REPLAY_BYTES,
  REPLAY_HEADER,
  requestFingerprint,
  type StoredResponse,
  validateRequestId,
} from "../core/idempotency";
import { errorFields, type Logger } from "../core/logger";
import { abandonedStreamUsage, type CallBounds, holdMicros, imageVariant } from "../core/metering";
import type { CachedVendorKeys } from "../core/metering-vendor-keys";
import { defaultPlanLookup, type PlanLookup } from "../core/plan-cache";
import type { AppliedPlan } from "../core/plans";
import { type CostBreakdown, costBreakdown, type ModelPrice, type PriceCatalogue } from "../core/pricing";
import { recordLevel } from "../core/privacy";
import { type RateLimiter, rateLimitError, rateLimitHeaders } from "../core/rate-limit";
import { resolveUserId } from "../core/record";
import { estimateTokens } from "../core/token-estimate";
import type { Usage } from "../core/usage";
import type { Operation } from "../core/vendor-model";
import { callBounds } from "../vendors/bounds";
import type { BudgetAdmission, BudgetGuard, BudgetHolds, BudgetWindowOf } from "./budgets";
import { CreditLeases, DEFAULT_LEASES, type LeaseTimes, type Reservation } from "./credit-leases";
import { checkRateLimit } from "./rate-limit";

export interface MeteringDeps {
  credits: Pick<CreditStore, "hold" | "recordCharges" | "settleCharges">;
  limiter: RateLimiter;
  idempotency: IdempotencyStore;
  vendorKeys: CachedVendorKeys;
  prices: PriceCatalogue;
  logger: Logger;
  clock: () => number;
  /** How long a hold stays valid before the sweeper may release it: longer than any call lasts. */
  holdTtlMs: number;
  /** How soon finished calls' charges are noted on the store (0: before `after` ends, for Lambda). */
  noteChargesMs: number;
  /** How long a lease takes new calls, and stays unused before it settles (DEFAULT_LEASES unless set). */
  leases?: LeaseTimes;
  /** Budgets and tokens-per-minute limits; without it, none apply. */
  budgets?: BudgetGuard;
  /** Each project's price plan, cached (core/plan-cache.ts); without it, the deployment's markup. */
  plans?: PlanLookup;
}

/** Metering's hooks, and what settles the credit leases it keeps across calls. */
export interface Metering extends ProxyHooks {
  /** Settles every credit lease (once its calls ended): a clean shutdown, or a test reading balances. */
  settle(): Promise<void>;
}

/** What `before` took for a call, for `after` to settle or give back. */
interface CallState {
  /** The rate limit refused the call (known before `before` ran: then it takes nothing). */
  denied: boolean;
  price?: ModelPrice;
  /** The plan that priced a managed call (its markup is in `price`). */
  plan?: AppliedPlan;
  reservation?: Reservation;
  budgetHolds?: BudgetHolds;
  /** The hard budget that refused the call, for the alerts. */
  budgetRefusal?: BudgetWindowOf;
  userId?: string | null;
  idempotency?: { requestId: string; token: string };
  /** What `quote` priced, for `after` to reuse when the usage is the same. */
  quoted?: { usage: Usage; priced: Priced };
}

const MAX_NAMED_MODEL = 256;
const decoder = new TextDecoder();
/** How the call is paid (`managed`, `byok`, `dual`), on every response once it is known. */
export const BILLING_MODE_HEADER = "x-dmt-billing-mode";

/**
 * Metering as proxy hooks: the per-key rate limit (`admit`); the billing mode, the credit hold and the
 * idempotency record (`before`); the charge, the record's cost and the stored response (`after`).
 * Once warm, a call without X-Request-ID reaches the vendor without waiting for the store: rate-limit
 * tokens and credits are leased ahead of demand; otherwise the rate limit, the lease and the
 * idempotency record are written side by side. Protocol and reasoning: docs/metering.md.
 */
export function createMetering(deps: MeteringDeps): Metering {
  const leases = new CreditLeases(deps.credits, deps.clock, deps.logger, {
    ...DEFAULT_LEASES,
    holdTtlMs: deps.holdTtlMs,
    noteMs: deps.noteChargesMs,
    ...deps.leases,
  });
  const states = new WeakMap<ProxyCall, CallState>();
  const plans = deps.plans ?? defaultPlanLookup(deps.prices.markup);
  const loggedUnpriced = new Set<string>();
  const stateOf = (call: ProxyCall) => {
    let state = states.get(call);
    if (!state) {
      state = { denied: false };
      states.set(call, state);
    }
    return state;
  };

  return {
    async admit(call) {
      const state = stateOf(call);
      call.billing = { mode: call.auth.vendorKey === undefined ? "managed" : "dual", costMicros: 0 };
      const decision = await checkRateLimit(deps.limiter, call.auth);
      Object.assign(call.responseHeaders, rateLimitHeaders(decision));
      if (!decision.allowed) {
        state.denied = true;
        throw rateLimitError(decision);
      }
    },

    async before(call) {
      const state = stateOf(call);
      // A refusal already known (a bucket this process saw exhausted answers at once) spares the store.
      if (state.denied || !call.route) return undefined;
      if (call.model !== undefined && !modelAllowed(call.auth.models, call.model)) {
        throw modelNotAllowedError(call.model);
      }
      const requestId = call.requestId === undefined ? undefined : validateRequestId(call.requestId);
      // A project's plan is read (when not cached) beside its vendor keys, not after them.
      plans.warm?.(call.auth.projectId);
      const { mode, storedKey } = await billingMode(call, deps.vendorKeys);
      const listed = call.route.billing === "billable" ? priceOf(call, mode, deps.prices) : undefined;
      // Credits pay at the project's plan: its markup replaces the deployment's on the price.
      if (listed && mode === "managed") {
        const models =
          call.model === undefined || call.model === listed.model
            ? [listed.model]
            : [listed.model, call.model];
        state.plan = await plans.applied(call.auth.projectId, call.vendor, models, call.startedAt);
        const markup = state.plan.ratio;
        state.price = markup === listed.markup ? listed : { ...listed, markup };
      } else {
        state.price = listed;
      }
      call.billing = {
        mode,
        ...(state.price ? { priceVersion: state.price.priceVersion } : {}),
        costMicros: 0,
      };
      call.responseHeaders[BILLING_MODE_HEADER] = mode;
      const operation = call.route.operation;
      const micros =
        mode === "managed" && state.price ? holdMicros(state.price, boundsOf(call, operation)) : 0;

      const { projectId, keyId, keyName } = call.auth;
      const price = state.price;
      state.userId = resolveUserId(call.userHeader, call.body);
      const budgeted: Promise<BudgetAdmission> | null =
        deps.budgets && call.route.billing === "billable"
          ? deps.budgets.admit({
              projectId,
              keyId,
              ...(keyName === undefined ? {} : { keyName }),
              userId: state.userId,
              managed: mode === "managed",
              // A BYOK call counts at list price; its hold is the same bound as a managed one's.
              maxCostMicros: () =>
                micros > 0 || !price ? micros : holdMicros(price, boundsOf(call, operation)),
              ...(call.auth.tpm
                ? { tpm: { limit: call.auth.tpm, estimate: () => estimatedTokens(call) } }
                : {}),
            })
          : null;
      const [held, begun, budget] = await Promise.allSettled([
        micros > 0 ? leases.reserve(projectId, micros) : null,
        requestId === undefined
          ? null
          : deps.idempotency.begin(
              keyId,
              requestId,
              requestFingerprint(call.method, call.target ?? call.endpoint, call.rawBody ?? new Uint8Array()),
            ),
        budgeted,
      ]);
      // Whatever was taken is noted first: `after` gives it back whatever is decided here.
      if (held.status === "fulfilled" && held.value?.ok) state.reservation = held.value.reservation;
      if (begun.status === "fulfilled" && begun.value?.kind === "new" && requestId !== undefined) {
        state.idempotency = { requestId, token: begun.value.token };
      }
      if (budget.status === "fulfilled" && budget.value?.ok) {
        state.budgetHolds = budget.value.holds;
        Object.assign(call.responseHeaders, budget.value.headers);
      } else if (budget.status === "fulfilled" && budget.value && !budget.value.ok) {
        state.budgetRefusal = budget.value.refusedBy;
      }
      if (held.status === "rejected") throw held.reason;
      if (begun.status === "rejected") throw begun.reason;
      const started = begun.value;
      if (started?.kind === "completed" && started.response) return { replay: marked(started.response) };
      if (started && started.kind !== "new") throw idempotencyError(started);
      if (budget.status === "rejected") throw budget.reason;
      if (budget.value && !budget.value.ok) throw budget.value.error;
      if (held.value && !held.value.ok) throw insufficientCreditsError(micros, held.value.availableMicros);
      const decision: BeforeDecision = {};
      if (storedKey !== undefined) decision.vendorKey = storedKey;
      if (state.idempotency) decision.keepResponseBytes = MAX_REPLAY_BYTES;
      return decision;
    },

    async after(call, outcome) {
      const state = states.get(call);
      if (!state) return;
      const { cost, breakdown, usage } = costOf(call, state, outcome, deps.logger);
      noteUnpriced(call, usage, breakdown);
      // A managed call's record says what the credits paid: a call is charged at most its hold (the
      // ledger keeps any excess as uncollected), so the records' costs sum to the balance's change.
      const reservation = state.reservation;
      const charged = reservation && cost !== undefined ? Math.min(cost, reservation.micros) : cost;
      if (breakdown && charged !== undefined && charged !== breakdown.micros)
        breakdown.charged_micros = charged;
      if (call.billing) {
        call.billing.costMicros = charged;
        if (breakdown) call.billing.breakdown = breakdown;
        if (usage !== outcome.usage) call.billing.usage = usage;
      }
      const { inputTokens, outputTokens } = usage;
      await Promise.all([
        reservation ? leases.finish(reservation, cost ?? 0) : undefined,
        // A budget counts what the record says the call cost; the TPM limit the tokens it used.
        state.budgetHolds
          ? deps.budgets?.finish(state.budgetHolds, charged ?? 0, inputTokens + outputTokens)
          : undefined,
        finishIdempotency(call, state, outcome),
      ]);
      // Once the charge counts: the windows' spend (or the refusal) for the alert rules.
      if (deps.budgets && (state.budgetHolds?.budgets.length || state.budgetRefusal)) {
        const caller = { userId: state.userId ?? null, hideUserId: recordLevel(call) === "none" };
        await deps.budgets.report(
          caller,
          state.budgetRefusal ? [state.budgetRefusal] : (state.budgetHolds?.budgets ?? []),
        );
      }
    },

    quote(call, usage) {
      const state = states.get(call);
      if (!state || state.denied) return undefined;
      const result = priced(call, state, usage, deps.logger);
      state.quoted = { usage, priced: result };
      const { cost } = result;
      // What the credits will be charged: at most the hold (as `after` records it).
      return state.reservation && cost !== undefined ? Math.min(cost, state.reservation.micros) : cost;
    },

    settle: async () => {
      await Promise.all([leases.settleAll(), deps.budgets?.settle()]);
    },
  };

  /**
   * Usage the vendor reported that nothing prices (an unknown field, or a dimension the model's row
   * has no rate for) is logged once per model and field, so a new billed figure is noticed, never
   * silently priced at zero; the record keeps it too.
   */
  function noteUnpriced(call: ProxyCall, usage: Usage, breakdown: CostBreakdown | undefined): void {
    const fields = [...Object.keys(usage.unpriced ?? {}), ...(breakdown?.unpriced ?? [])];
    const fresh = fields.filter((field) => {
      const key = `${call.vendor}/${call.model ?? ""}/${field}`;
      if (loggedUnpriced.has(key)) return false;
      loggedUnpriced.add(key);
      return true;
    });
    if (fresh.length > 0) {
      deps.logger.warn("usage not priced", {
        vendor: call.vendor,
        model: (call.model ?? "").slice(0, MAX_NAMED_MODEL),
        fields: fresh,
      });
    }
  }

  /** A complete 2xx answer is stored for replay; anything else is forgotten, so a retry runs again. */
  async function finishIdempotency(call: ProxyCall, state: CallState, outcome: ProxyOutcome): Promise<void> {
    const record = state.idempotency;
    if (!record) return;
    const { keyId } = call.auth;
    try {
      const succeeded = outcome.status >= 200 && outcome.status < 300 && !outcome.error;
      if (succeeded && outcome.sent) {
        const stored = { status: outcome.status, headers: outcome.sent.headers, chunks: outcome.sent.chunks };
        if (!(await deps.idempotency.complete(keyId, record.requestId, record.token, stored))) {
          deps.logger.warn("idempotency record was taken over before completion", {
            endpoint: call.endpoint,
          });
        }
      } else {
        await deps.idempotency.abandon(keyId, record.requestId, record.token);
      }
    } catch (err) {
      // A record left running lets retries through once its lease ends.
      deps.logger.error("idempotency record update failed", { ...errorFields(err), endpoint: call.endpoint });
    }
  }
}

/**
 * Who pays: a dual key's vendor half wins (it was chosen for this request), then the project's stored
 * key for the vendor (BYOK), else the credits.
 */
async function billingMode(
  call: ProxyCall,
  vendorKeys: CachedVendorKeys,
): Promise<{ mode: BillingMode; storedKey?: string }> {
  const dualKey = call.auth.vendorKey;
  if (dualKey !== undefined) {
    // Printable ASCII without spaces, as vendor keys are (a header cannot carry most others anyway).
    if (!/^[\x21-\x7e]+$/.test(dualKey)) {
      throw errors.invalidApiKey("The vendor key of a dual key must be printable ASCII without whitespace.");
    }
    return { mode: "dual" };
  }
  const storedKey = await vendorKeys.lookup(call.auth.projectId, call.vendor);
  return storedKey === undefined ? { mode: "managed" } : { mode: "byok", storedKey };
}

/**
 * The tokens a call is admitted with under a TPM limit: its request at four characters a token, plus
 * the output it asked for at most (nothing when it set no limit); settled to the real usage after.
 */
function estimatedTokens(call: ProxyCall): number {
  const input = estimateTokens(call.rawBody ? decoder.decode(call.rawBody) : "");
  try {
    const bounds = boundsOf(call, call.route?.operation ?? "chat");
    return input + (bounds.maxOutputTokens ?? 0) * bounds.outputs;
  } catch {
    return input;
  }
}

function boundsOf(call: ProxyCall, operation: Operation): CallBounds {
  return callBounds({
    operation,
    json: call.body,
    form: call.form,
    uploadBytes: call.rawBody?.byteLength ?? 0,
  });
}

/**
 * The price of a billable call's model. Managed calls need one: a missing model is a 400 and an
 * unpriced one a 404 naming it (never metered at zero by accident). BYOK and dual-key calls go ahead
 * without one, their cost unknown.
 */
function priceOf(call: ProxyCall, mode: BillingMode, prices: PriceCatalogue): ModelPrice | undefined {
  const model = call.model;
  if (model === undefined) {
    if (mode !== "managed") return undefined;
    if (call.body?.model !== undefined) throw errors.invalidField("model", "must be a string");
    throw errors.missingField("model");
  }
  const price = prices.priceFor(call.vendor, model, new Date(call.startedAt));
  if (!price && mode === "managed") throw errors.modelNotFound(model.slice(0, MAX_NAMED_MODEL));
  return price;
}

/**
 * What a call cost, for the settlement and the record: the usage the vendor reported at the price (with
 * the markup when the credits pay, at list price otherwise); nothing for a call the vendor did not
 * answer, whose stream broke, or that was replayed; estimated for a stream the client abandoned (then
 * `usage` is the estimate charged). `cost` is undefined when there is no price.
 */
function costOf(call: ProxyCall, state: CallState, outcome: ProxyOutcome, logger: Logger): Priced {
  const answered = outcome.status >= 200 && outcome.status < 300 && !outcome.replayed;
  if (!answered || outcome.error?.type === "upstream_error") return { cost: 0, usage: outcome.usage };
  const usage =
    outcome.error?.type === "client_error"
      ? abandonedStreamUsage(outcome.usage, call.body, outcome.deliveredText ?? "")
      : outcome.usage;
  return state.quoted?.usage === usage ? state.quoted.priced : priced(call, state, usage, logger);
}

/** A cost, its line items, and the usage it is the cost of. */
type Priced = { cost: number | undefined; breakdown?: CostBreakdown; usage: Usage };

/**
 * The usage at the call's price (with the markup when the credits pay), with its line items; 0 when
 * the route is not billable, undefined when there is no price.
 */
function priced(call: ProxyCall, state: CallState, usage: Usage, logger: Logger): Priced {
  if (call.route?.billing !== "billable") return { cost: 0, usage };
  const price = state.price;
  if (!price) return { cost: undefined, usage };
  const quality = field(call, "quality");
  const size = field(call, "size");
  const variant = call.route?.operation === "image" ? imageVariant(price, quality, size) : undefined;
  try {
    const breakdown = costBreakdown(usage, price, {
      applyMarkup: call.billing?.mode === "managed",
      ...(variant !== undefined ? { imageVariant: variant } : {}),
    });
    if (state.plan && call.billing?.mode === "managed") {
      breakdown.plan = { id: state.plan.id, version: state.plan.version, percent: state.plan.percent };
    }
    return { cost: breakdown.micros, breakdown, usage };
  } catch (err) {
    logger.error("usage could not be priced", { ...errorFields(err), endpoint: call.endpoint });
    return { cost: undefined, usage };
  }
}

function field(call: ProxyCall, name: string): string | undefined {
  const value = call.body?.[name] ?? call.form?.get(name);
  return typeof value === "string" ? value : undefined;
}

function marked(response: StoredResponse): StoredResponse {
  return { ...response, headers: [...response.headers, [REPLAY_HEADER, "true"]] };
}
