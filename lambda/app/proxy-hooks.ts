import type { AuthContext } from "../core/auth";
import type { CapturedBody } from "../core/capture";
import type { Usage } from "../core/usage";
import type { VendorName, VendorRoute } from "../vendors/types";

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
  /** The caller. `auth.vendorKey` (a dual key's vendor half) is a secret: never store or log it. */
  readonly auth: AuthContext;
  /** Epoch milliseconds when the call arrived. */
  readonly startedAt: number;
  /** The client's `X-Request-ID` (idempotency), `X-User-ID` and `User-Agent`, as sent. */
  readonly requestId: string | undefined;
  readonly userHeader: string | undefined;
  readonly userAgent: string | undefined;
  /** The matched route; undefined when the path matched none (404, 405, bad model segment). */
  route: VendorRoute | undefined;
  /** The model, from the JSON body's `model` or the path's model segment. */
  model: string | undefined;
  /** The client asked for a stream. */
  stream: boolean;
  /** The parsed JSON request body, on JSON routes once validated. */
  body: Record<string, unknown> | undefined;
  /** Headers added to whatever the client gets, success or error (rate-limit headers, say). */
  readonly responseHeaders: Record<string, string>;
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
  /** The vendor's request id (`x-request-id` / `request-id`), when it sent one. */
  vendorRequestId?: string;
}

/**
 * The per-call lifecycle that metering and the warehouse plug into.
 * - `before` runs once a call passed routing and validation, just before anything is forwarded (it does
 *   not run for health checks or our own refusals). Throwing an ApiError refuses the call (402, 429...);
 *   nothing is forwarded and the error is the response.
 * - `after` runs exactly once for every authenticated call (refusals, upstream failures and aborted
 *   streams included), after the response finished, off the client's path. It must not throw.
 * Both are optional as a whole: a proxy without hooks relays and computes no outcomes.
 */
export interface ProxyHooks {
  before(call: ProxyCall): Promise<void>;
  after(call: ProxyCall, outcome: ProxyOutcome): void | Promise<void>;
}
