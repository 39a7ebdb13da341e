import { AsyncLocalStorage } from "node:async_hooks";
import type { AuthContext } from "./auth";
import type { BillingMode } from "./billing-mode";
import type { CapturedBody } from "./capture";
import type { StoredResponse } from "./idempotency";
import { errorFields, type Logger } from "./logger";
import type { CostBreakdown } from "./pricing";
import type { InteractionRecord } from "./record";
import type { Usage } from "./usage";
import type { VendorName, VendorRoute } from "./vendor-model";

/** What the record of a call says about its price; metering fills it in. */
export interface CallBilling {
  mode: BillingMode;
  /** The price list that priced the call; absent when nothing priced it. */
  priceVersion?: string;
  /**
   * Micro-USD: what a managed call cost (markup included), the list price of a BYOK or dual-key call;
   * 0 for free endpoints and failed calls; undefined when the model has no price (BYOK, dual).
   */
  costMicros?: number;
  /** How the cost was reached, line by line, when a price applied. */
  breakdown?: CostBreakdown;
  /** The usage charged, when metering estimated it (an abandoned stream); otherwise the vendor's. */
  usage?: Usage;
}

/**
 * One authenticated call to a proxy prefix, as metering and the warehouse see it. The proxy creates
 * it once authentication passed and fills it in as it learns more.
 */
export interface ProxyCall {
  /** Our id for the call: the interaction's transaction id. */
  readonly id: string;
  readonly vendor: VendorName;
  /** `openai:/v1/chat/completions`: what key restrictions and records name. */
  readonly endpoint: string;
  readonly method: string;
  /** The caller. `auth.vendorKey` (a dual key's vendor half) is a secret: never store or log it. */
  readonly auth: AuthContext;
  /** Epoch milliseconds when the call arrived. */
  readonly startedAt: number;
  /** The client's `X-Request-ID` (idempotency), `X-User-ID` and `User-Agent`, as sent. */
  readonly requestId: string | undefined;
  readonly userHeader: string | undefined;
  readonly userAgent: string | undefined;
  /** The client's `X-DMT-Store`: asks for a record that keeps less (core/privacy.ts). */
  readonly storeHeader: string | undefined;
  /** The client's W3C `traceparent` and `tracestate`: its trace, which the call's span joins. */
  readonly traceparent?: string | undefined;
  readonly tracestate?: string | undefined;
  /** The matched route; undefined when the path matched none (404, 405, bad model segment). */
  route: VendorRoute | undefined;
  /** The vendor path and query as forwarded (service keys removed), once routed. */
  target: string | undefined;
  /** The model: the JSON body's `model`, an upload's `model` field, or the path's model segment. */
  model: string | undefined;
  /** The client asked for a stream. */
  stream: boolean;
  /** The client's request body as it arrived, once read; `body` is its JSON, on JSON routes. */
  rawBody: Uint8Array | undefined;
  body: Record<string, unknown> | undefined;
  /** An upload's small text fields (`model`, `n`, `size`...), on multipart routes. */
  form: Map<string, string> | undefined;
  /** Headers added to whatever the client gets, success or error (rate-limit headers, say). */
  readonly responseHeaders: Record<string, string>;
  /** Set by metering (`admit` on, refined by `before` and `after`); read by the record. */
  billing: CallBilling | undefined;
  /**
   * The call's record at its store level, set by the warehouse's `after` (once metering's priced the
   * call) and read by the hooks after it (events); shared, never changed.
   */
  record?: InteractionRecord;
}

/** The bytes the client got, kept when `before` asked for them (see `keepResponseBytes`). */
export interface SentResponse {
  /** The vendor's headers as relayed; ours (rate limits, security) are not among them. */
  headers: [string, string][];
  /** The body as sent, chunk by chunk; collection stops after the chunk that passed the limit. */
  chunks: Uint8Array[];
}

/** How a call ended, handed to `after` once the response finished or was abandoned. */
export interface ProxyOutcome {
  /** The status the client got; 499 when it went away before any status was sent. */
  status: number;
  /**
   * Why the call failed, if it did: our own error (its type and code), a vendor's error status
   * (`vendor_error`, the status as code), or a stream that broke after its status was sent
   * (`upstream_error` / `upstream_reset` | `upstream_timeout`, `client_error` / `client_closed_request`).
   */
  error?: { type: string; code: string };
  /** Usage as the vendor reported it (zero figures when nothing reached the vendor). */
  usage: Usage;
  /** The response was relayed as a stream. */
  streamed: boolean;
  /** Milliseconds from arrival to the first response byte sent; absent when none was. */
  ttftMs?: number;
  /** Milliseconds from arrival to the end of the response, or to its abandonment. */
  latencyMs: number;
  request: CapturedBody;
  /** The response body; for a stream, the assembled final message. */
  response: CapturedBody;
  /** For a stream: its text as the client received it, without the wire format (content, tool arguments). */
  deliveredText?: string;
  /** The vendor's request id (`x-request-id` / `request-id`), when it sent one. */
  vendorRequestId?: string;
  /** The bytes sent, when `before` asked for them. */
  sent?: SentResponse;
  /** The response was a stored one replayed (idempotency): the vendor was not called. */
  replayed?: boolean;
}

/** What the relay reports when the response is done (computed lazily, off the client's path): the outcome but the request and the latency, which the proxy adds. */
export type RelayResult = Omit<ProxyOutcome, "latencyMs" | "request">;

/** What `before` decides beyond letting the call through. */
export interface BeforeDecision {
  /** The vendor key to forward instead of the service's own (BYOK); a dual key's vendor half still wins. */
  vendorKey?: string;
  /** Answer with this stored response instead of calling the vendor (an idempotent replay). */
  replay?: StoredResponse;
  /** Keep up to this many bytes of the response for `outcome.sent`. */
  keepResponseBytes?: number;
}

/**
 * The per-call lifecycle that metering and the warehouse plug into. Every stage is optional.
 * - `admit` starts as soon as the call is authenticated, before routing (the rate limit). The proxy
 *   answers nothing and forwards nothing before it settled; its rejection (an ApiError) is the response,
 *   in preference to any other refusal.
 * - `before` runs once a call passed routing and validation, in parallel with `admit`'s wait, just before
 *   anything is forwarded (not for health checks or our own refusals). Throwing an ApiError refuses
 *   the call (402, 409...); nothing is forwarded and the error is the response.
 * - `after` runs exactly once for every authenticated call (refusals, upstream failures and aborted
 *   streams included), after the response finished, off the client's path. It must not throw.
 */
export interface ProxyHooks {
  admit?(call: ProxyCall): Promise<void>;
  // biome-ignore lint/suspicious/noConfusingVoidType: a `before` that decides nothing is `async before() {...}`
  before?(call: ProxyCall): Promise<BeforeDecision | undefined | void>;
  after?(call: ProxyCall, outcome: ProxyOutcome): void | Promise<void>;
  /**
   * What a call answered whole (not streamed) costs, for its `x-dmt-cost-usd` header: micro-USD as the
   * record will say, undefined when unpriced. Called before the answer is sent; must not throw.
   */
  quote?(call: ProxyCall, usage: Usage): number | undefined;
}

/**
 * Several hooks as one, in order: admits in parallel; befores one after another (a refusal or a replay
 * stops the rest; vendor keys and kept bytes merge); afters one after another, each awaited, so a later
 * one sees what an earlier one set on the call: metering sets `call.billing`, then the warehouse builds
 * `call.record` from it, then the events read that record. An after that fails is logged and does not
 * stop the next.
 */
export function combineHooks(list: readonly ProxyHooks[], logger: Logger): ProxyHooks {
  return {
    async admit(call) {
      await Promise.all(list.map((hooks) => hooks.admit?.(call)));
    },
    async before(call) {
      const merged: BeforeDecision = {};
      for (const hooks of list) {
        const decision = await hooks.before?.(call);
        if (!decision) continue;
        if (decision.replay) return decision;
        if (decision.vendorKey !== undefined) merged.vendorKey = decision.vendorKey;
        if (decision.keepResponseBytes !== undefined) {
          merged.keepResponseBytes = Math.max(merged.keepResponseBytes ?? 0, decision.keepResponseBytes);
        }
      }
      return merged;
    },
    quote(call, usage) {
      return list.find((hooks) => hooks.quote)?.quote?.(call, usage);
    },
    async after(call, outcome) {
      for (const hooks of list) {
        try {
          await hooks.after?.(call, outcome);
        } catch (err) {
          logger.error("proxy after hook failed", { ...errorFields(err), endpoint: call.endpoint });
        }
      }
    },
  };
}

/**
 * After-work still running. `after` runs off the client's path, so something must wait for it: a clean
 * shutdown locally (`drain`: all of it), and in Lambda each invocation before it ends (`run`: its own
 * only; a frozen container would never finish a settlement). With many invocations in one environment
 * (Lambda Managed Instances) no invocation waits for another's after-work.
 */
export class PendingWork {
  private readonly running = new Set<Promise<void>>();
  /** The work of the invocation whose async context this is (node:async_hooks follows it through awaits). */
  private readonly invocation = new AsyncLocalStorage<Set<Promise<void>>>();
  /** Work added outside any invocation: every invocation waits for it, since none can tell whose it is. */
  private readonly unowned = new Set<Promise<void>>();

  /** Tracks `work` until it settles; it must not reject. */
  add(work: Promise<void>): void {
    const owner = this.invocation.getStore() ?? this.unowned;
    this.running.add(work);
    owner.add(work);
    void work.finally(() => {
      this.running.delete(work);
      owner.delete(work);
    });
  }

  /** Runs `invocation`, then waits for the work it added (and unowned work), never for another's. */
  async run<T>(invocation: () => Promise<T>): Promise<T> {
    const own = new Set<Promise<void>>();
    try {
      return await this.invocation.run(own, invocation);
    } finally {
      while (own.size > 0 || this.unowned.size > 0) {
        await Promise.allSettled([...own, ...this.unowned]);
      }
    }
  }

  /** Resolves once nothing is running, work added meanwhile included. */
  async drain(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }
}
