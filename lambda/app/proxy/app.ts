import { randomUUID } from "node:crypto";
import type { Context, Hono, MiddlewareHandler } from "hono";
import { upstreamFailureError, upstreamFailureKind } from "../../adapters/undici/errors";
import {
  type BeforeDecision,
  PendingWork,
  type ProxyCall,
  type ProxyHooks,
  type ProxyOutcome,
  type RelayResult,
} from "../../core/call";
import { type CapturedBody, captureMetadata, captureText, redactCaptured } from "../../core/capture";
import { decimalUsd } from "../../core/credits";
import { endpointOf, vendorPath } from "../../core/endpoints";
import { ApiError, errors } from "../../core/errors";
import { errorFields, type Logger } from "../../core/logger";
import { STORE_HEADER } from "../../core/privacy";
import type { UpstreamClient } from "../../core/upstream";
import { emptyUsage, type Usage } from "../../core/usage";
import type { VendorDefinition } from "../../core/vendor-model";
import { requestHeaderFilter } from "../../vendors/headers";
import { RouteMatcher } from "../../vendors/routes";
import type { AppEnv } from "../env";
import { errorResponse } from "../errors";
import { appShell } from "../shell";
import { watchCaller } from "./caller";
import { relayResponse, replayResponse } from "./relay";
import { forwardedQuery, type PreparedRequest, prepareRequest } from "./request";

/** What health reports: a managed key is set, the built-in simulator answers, or only dual keys can call. */
export type UpstreamState = "configured" | "simulated" | "missing_key";

export interface ProxyDeps {
  vendor: VendorDefinition;
  upstream: UpstreamClient;
  /** The service's own key for this vendor; calls without a dual key use it. */
  managedKey?: string;
  upstreamState: UpstreamState;
  /** The caller's identity: key verification locally, the authorizer's context in AWS. */
  auth: MiddlewareHandler<AppEnv>;
  logger: Logger;
  /** Metering and recording; without them the proxy only relays. */
  hooks?: ProxyHooks;
  /** Where `after` work is tracked, for whoever must wait for it (a shutdown, the Lambda handler). */
  pending?: PendingWork;
  /** Largest body text an interaction record keeps, in bytes. */
  captureLimit?: number;
}

export const DEFAULT_CAPTURE_LIMIT = 64 * 1024;

/** The caller went away before we answered: nothing to send, only something to record. */
class ClientGone extends Error {}

/**
 * One vendor's proxy, served under `/<vendor>`: every path behind authentication, only the routes the
 * vendor's table declares (404 otherwise, 405 for another method), bodies checked, then relayed to the
 * vendor with its key and streamed back. Health is answered here and never reaches the vendor.
 */
export function createProxyApp(deps: ProxyDeps): Hono<AppEnv> {
  const { vendor, logger, hooks } = deps;
  const pending = deps.pending ?? new PendingWork();
  const captureLimit = deps.captureLimit ?? DEFAULT_CAPTURE_LIMIT;
  const prefix = `/${vendor.name}`;
  const matcher = new RouteMatcher(vendor.routes);
  const upstreamHeaders = requestHeaderFilter(vendor);

  const app = appShell(logger);
  app.use(`${prefix}/*`, refuseBrowserPreflight);
  app.use(`${prefix}/*`, deps.auth);
  app.all(`${prefix}/*`, async (c) => {
    const arrived = performance.now();
    const call = newCall(c, vendor);
    let prepared: PreparedRequest | undefined;
    /** The vendor key the call was sent with: what a vendor's echo of its request would reveal. */
    let vendorKey: string | undefined;

    /** Hands the outcome to `after` once, off the client's path (the heavy parts are computed there). */
    const finish = (result: () => RelayResult) => {
      // Without hooks nobody reads outcomes: parsing and capturing bodies would be wasted work.
      if (!hooks?.after) return;
      const latencyMs = performance.now() - arrived;
      const work = new Promise<void>((resolve) => setImmediate(resolve)).then(async () => {
        let outcome: ProxyOutcome;
        try {
          const secrets = [vendorKey, call.auth.vendorKey, deps.managedKey];
          const relayed = result();
          // Object.assign, not a spread: on Node 20 a spread with more properties after it costs ~1 µs+.
          outcome = Object.assign({}, relayed, {
            latencyMs,
            request: redactCaptured(capturedRequest(prepared, captureLimit), secrets),
            response: redactCaptured(relayed.response, secrets),
          });
        } catch (err) {
          logger.error("proxy outcome failed", { ...errorFields(err), endpoint: call.endpoint });
          return;
        }
        await hooks.after?.(call, outcome);
      });
      pending.add(
        work.catch((err) =>
          logger.error("proxy after hook failed", { ...errorFields(err), endpoint: call.endpoint }),
        ),
      );
    };
    // Started at once so that it runs while the body is read; awaited before anything is answered.
    const admission = settle(hooks?.admit?.(call));

    try {
      const match = matcher.match(c.req.method, vendorPath(vendor.name, c.req.path.slice(prefix.length)));
      call.route = match.route;
      call.model = match.model;
      if (match.route.operation === "health") {
        await admitted(admission);
        finish(() => ({
          status: 200,
          usage: emptyUsage(),
          streamed: false,
          response: captureMetadata(0, undefined),
        }));
        return c.json(
          { status: "ok", vendor: vendor.name, upstream: deps.upstreamState },
          200,
          call.responseHeaders,
        );
      }
      const query = forwardedQuery(c.req.url, vendor);
      call.target = match.upstreamPath + query;
      prepared = await prepareRequest(c, match.route);
      call.rawBody = prepared.clientBody;
      call.body = prepared.json;
      call.form = prepared.form;
      call.stream = prepared.stream;
      call.model ??= prepared.model;
      const decision = await beforeForwarding(hooks, call, admission);
      if (decision?.replay) {
        const replay = decision.replay;
        finish(() => ({
          status: replay.status,
          usage: emptyUsage(),
          streamed: replay.chunks.length > 1,
          response: captureMetadata(
            replay.chunks.reduce((sum, chunk) => sum + chunk.byteLength, 0),
            undefined,
          ),
          replayed: true,
        }));
        return replayResponse(replay, call.responseHeaders);
      }

      const caller = watchCaller(c);
      vendorKey = call.auth.vendorKey ?? decision?.vendorKey ?? deps.managedKey;
      try {
        const upstream = await deps.upstream.request({
          method: match.route.method,
          path: call.target,
          headers: upstreamHeaders(c.req.raw.headers, vendorKey),
          ...(prepared.upstreamBody ? { body: prepared.upstreamBody } : {}),
          caller,
        });
        return await relayResponse(upstream, {
          route: match.route,
          usage: vendor.usage,
          usageContext: { operation: match.route.operation, request: prepared.json },
          stripUsage: prepared.stripUsage,
          captureLimit,
          arrived,
          extraHeaders: call.responseHeaders,
          keepBytes: decision?.keepResponseBytes,
          ...(prepared.render && { render: prepared.render }),
          ...(hooks?.quote
            ? { answerHeaders: (usage: Usage) => costHeaders(hooks.quote?.(call, usage)) }
            : {}),
          ...(hooks?.quote && c.req.header(INCLUDE_COST_HEADER) === "1"
            ? { streamCost: (usage: Usage) => costUsd(hooks.quote?.(call, usage)) }
            : {}),
          done: finish,
        });
      } catch (err) {
        throw upstreamFailure(err, caller.gone, vendor.name);
      }
    } catch (err) {
      if (err instanceof ClientGone || watchCaller(c).gone) {
        finish(() => ({
          status: 499,
          error: { type: "client_error", code: "client_closed_request" },
          usage: emptyUsage(),
          streamed: false,
          response: captureMetadata(0, undefined),
        }));
        return new Response(null, { status: 499 });
      }
      return refusal(await admissionFirst(err, admission), c, call, logger, finish);
    }
  });
  return app;
}

/**
 * A CORS preflight (OPTIONS with `Origin` and `Access-Control-Request-Method`) carries no key, so it
 * is answered before authentication: no origin is ever allowed (docs/proxy.md, "Browsers"), and the
 * browser is told why rather than given a 401 or a 405 it would report as a network error.
 */
const refuseBrowserPreflight: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.req.method === "OPTIONS" && c.req.header("origin") && c.req.header("access-control-request-method")) {
    throw errors.browserCallRefused();
  }
  await next();
};

type Settled = Promise<PromiseSettledResult<void>> | undefined;

/** A promise that never rejects (so it may wait unobserved), telling how the original settled. */
function settle(promise: Promise<void> | undefined): Settled {
  return promise?.then(
    () => ({ status: "fulfilled", value: undefined }),
    (reason: unknown) => ({ status: "rejected", reason }),
  );
}

/** Throws the admission's refusal, once it is known. */
async function admitted(admission: Settled): Promise<void> {
  const result = await admission;
  if (result?.status === "rejected") throw result.reason;
}

/** A refused admission wins over another refusal: it is what the client must act on first. */
async function admissionFirst(err: unknown, admission: Settled): Promise<unknown> {
  const result = await admission;
  return result?.status === "rejected" ? result.reason : err;
}

/** `before` and the admission's wait, side by side: the store work of both overlaps. */
async function beforeForwarding(
  hooks: ProxyHooks | undefined,
  call: ProxyCall,
  admission: Settled,
): Promise<BeforeDecision | undefined> {
  const [decision] = await Promise.allSettled([hooks?.before?.(call), admission]);
  await admitted(admission); // settled by now: its refusal comes first
  if (decision.status === "rejected") throw decision.reason;
  return decision.value ?? undefined;
}

/** Our id of the call on every response it gets: the `transaction_id` that finds its record. */
export const TRANSACTION_ID_HEADER = "x-dmt-transaction-id";
/** What an answer sent whole cost (a decimal USD string; a managed call's includes the markup). */
export const COST_HEADER = "x-dmt-cost-usd";

/** `1` asks for a stream's cost in its last usage event, as `dmt_cost_usd`; any other value is ignored. */
export const INCLUDE_COST_HEADER = "x-dmt-include-cost";

function costUsd(micros: number | undefined): string | undefined {
  return micros === undefined ? undefined : decimalUsd(micros);
}

function costHeaders(micros: number | undefined): Record<string, string> {
  const usd = costUsd(micros);
  return usd === undefined ? {} : { [COST_HEADER]: usd };
}

function newCall(c: Context<AppEnv>, vendor: VendorDefinition): ProxyCall {
  const id = randomUUID();
  return {
    id,
    vendor: vendor.name,
    endpoint: endpointOf(c.req.path) ?? `${vendor.name}:/`,
    method: c.req.method,
    auth: c.get("auth"),
    startedAt: Date.now(),
    requestId: c.req.header("x-request-id"),
    userHeader: c.req.header("x-user-id"),
    userAgent: c.req.header("user-agent"),
    storeHeader: c.req.header(STORE_HEADER),
    traceparent: c.req.header("traceparent"),
    tracestate: c.req.header("tracestate"),
    route: undefined,
    target: undefined,
    model: undefined,
    stream: false,
    rawBody: undefined,
    body: undefined,
    form: undefined,
    responseHeaders: { [TRANSACTION_ID_HEADER]: id },
    billing: undefined,
  };
}

/** Maps what the upstream client threw to our error; anything that is not about the upstream stays as is. */
function upstreamFailure(err: unknown, clientGone: boolean, vendor: string): unknown {
  const kind = upstreamFailureKind(err, clientGone);
  if (kind === undefined) return err;
  if (kind === "client_aborted") return new ClientGone();
  return upstreamFailureError(kind, vendor);
}

/** Our own error response, with the call's extra headers, recorded like any other outcome. */
function refusal(
  err: unknown,
  c: Context<AppEnv>,
  call: ProxyCall,
  logger: Logger,
  finish: (result: () => RelayResult) => void,
): Response {
  const response = errorResponse(err, c, logger);
  for (const [name, value] of Object.entries(call.responseHeaders)) response.headers.set(name, value);
  const known = err instanceof ApiError ? err : undefined;
  finish(() => ({
    status: response.status,
    error: { type: known?.type ?? "api_error", code: known?.code ?? "internal_error" },
    usage: emptyUsage(),
    streamed: false,
    response: known
      ? captureText(Buffer.from(JSON.stringify(known.toBody())), "application/json", Number.POSITIVE_INFINITY)
      : captureMetadata(0, undefined),
  }));
  return response;
}

/** The client's request body for the record: JSON as text (capped), uploads as metadata only. */
function capturedRequest(prepared: PreparedRequest | undefined, limit: number): CapturedBody {
  const body = prepared?.clientBody;
  if (!prepared || !body) return captureMetadata(0, prepared?.contentType);
  return prepared.json
    ? captureText(body, prepared.contentType, limit)
    : captureMetadata(body.byteLength, prepared.contentType);
}
