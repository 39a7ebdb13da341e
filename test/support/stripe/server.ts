import { randomBytes } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import Stripe from "stripe";
import { Agent, fetch as undiciFetch } from "undici";
import { type FormObject, parseStripeForm } from "./form";
import { type StripeEvent, signedHeader } from "./webhooks";

/**
 * A local stand-in of Stripe's API for tests: a small HTTP server the official `stripe` SDK reaches
 * through its own `host`, `port` and `protocol` settings. It answers the calls dmt makes the way
 * Stripe's API reference says (objects, errors, idempotency keys), following API version
 * `STRIPE_API_VERSION` (the version stripe-node 23.2.0 pins) with objects shaped as in Stripe's
 * OpenAPI fixtures (github.com/stripe/openapi, openapi/fixtures3.json at f6c2a48, 2026-08-21).
 *
 * Routes come from modules (`checkout.ts`, `payments.ts`; others may add theirs beside them), each a
 * function given the router and the stand-in's state. Test controls (completing a Checkout, losing a
 * dispute, going unreachable) are plain methods; events are signed with the webhook secret as Stripe
 * signs them and posted to `webhookUrl`.
 */
export const STRIPE_API_VERSION = "2026-11-18.endive";

export interface StripeRequest {
  method: string;
  path: string;
  /** `:name` segments of the route's pattern. */
  params: Record<string, string>;
  query: URLSearchParams;
  /** The form body, parsed (empty for GET). */
  form: FormObject;
  headers: IncomingHttpHeaders;
}

export interface StripeReply {
  status: number;
  body: unknown;
  /** For pages (the hosted Checkout stand-in): raw text with its content type. */
  contentType?: string;
  headers?: Record<string, string>;
}

export type StripeHandler = (request: StripeRequest) => StripeReply | Promise<StripeReply>;

export interface StripeRouter {
  /** `pattern` like `/v1/checkout/sessions/:session`. API routes need the secret key; `public` pages do not. */
  add(method: string, pattern: string, handler: StripeHandler, options?: { public?: boolean }): void;
}

/** A route module: adds its routes, may keep state on the stand-in. */
export type StripeRouteModule = (router: StripeRouter, standIn: StripeStandIn) => void;

export interface StripeStandIn {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** For `new Stripe(key, { host, port, protocol })`. */
  sdkSettings: { host: string; port: number; protocol: "http" };
  secretKey: string;
  webhookSecret: string;
  /** Where events are posted (dmt's webhook route); unset: events are only kept. */
  webhookUrl?: string;
  /** Every event made, oldest first, and what posting it answered. */
  events: { event: StripeEvent; status?: number }[];
  /** Every API call: method, path and form, for assertions on what dmt sent. */
  calls: { method: string; path: string; form: FormObject }[];
  /** True: every connection is cut before an answer (Stripe unreachable). */
  unreachable: boolean;
  /** Objects by id, shared by the route modules. */
  objects: Map<string, Record<string, unknown>>;
  /** An SDK client on the stand-in, as dmt would make one (no retries, so faults show at once). */
  client(): Stripe;
  /** A fresh id with Stripe's prefix for the object kind (`cs_test_...`, `pi_...`). */
  newId(prefix: string): string;
  /** Makes an event of `type` about `object`, keeps it and posts it signed to `webhookUrl`. */
  emit(type: string, object: Record<string, unknown>): Promise<StripeEvent>;
  /** Posts an event (a new one or a kept one again: Stripe's retries) signed; answers the status. */
  deliver(event: StripeEvent, options?: { timestamp?: number; secret?: string }): Promise<number>;
  close(): Promise<void>;
}

export interface StandInOptions {
  modules: StripeRouteModule[];
  secretKey?: string;
  webhookSecret?: string;
  webhookUrl?: string;
}

interface Route {
  method: string;
  parts: string[];
  handler: StripeHandler;
  public: boolean;
}

/** Stripe's error object; `type` is one of its error types (invalid_request_error, card_error, ...). */
export function stripeError(
  status: number,
  type: string,
  message: string,
  extra: Record<string, unknown> = {},
): StripeReply {
  return { status, body: { error: { type, message, ...extra } } };
}

export function missing(kind: string, id: string, param = "id"): StripeReply {
  return stripeError(404, "invalid_request_error", `No such ${kind}: '${id}'`, {
    code: "resource_missing",
    param,
  });
}

export function requiredParam(param: string): StripeReply {
  return stripeError(400, "invalid_request_error", `Missing required param: ${param}.`, {
    code: "parameter_missing",
    param,
  });
}

export async function startStripeStandIn(options: StandInOptions): Promise<StripeStandIn> {
  const routes: Route[] = [];
  const router: StripeRouter = {
    add: (method, pattern, handler, opts) =>
      routes.push({ method, parts: pattern.split("/"), handler, public: opts?.public ?? false }),
  };
  // Stripe replays the first answer to a POST repeated with the same Idempotency-Key (for 24 hours).
  const idempotent = new Map<string, StripeReply>();
  const server = createServer((req, res) => {
    if (standIn.unreachable) {
      req.socket.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      void answer(req.method ?? "GET", req.url ?? "/", req.headers, Buffer.concat(chunks).toString("utf8"))
        .catch((err: unknown) => stripeError(500, "api_error", String(err)))
        .then((reply) => {
          const requestId = `req_${randomBytes(7).toString("hex")}`;
          const headers = { "request-id": requestId, ...reply.headers };
          if (reply.contentType !== undefined) {
            res.writeHead(reply.status, { ...headers, "content-type": reply.contentType });
            res.end(String(reply.body));
          } else {
            res.writeHead(reply.status, { ...headers, "content-type": "application/json" });
            res.end(JSON.stringify(reply.body));
          }
        });
    });
  });

  async function answer(
    method: string,
    target: string,
    headers: IncomingHttpHeaders,
    body: string,
  ): Promise<StripeReply> {
    const url = new URL(target, "http://stand-in");
    const parts = url.pathname.split("/");
    let pathKnown = false;
    for (const route of routes) {
      const params = match(route.parts, parts);
      if (!params) continue;
      pathKnown = true;
      if (route.method !== method) continue;
      if (!route.public && headers.authorization !== `Bearer ${standIn.secretKey}`) {
        return stripeError(401, "invalid_request_error", "Invalid API Key provided: sk_test_****");
      }
      const form = method === "GET" ? {} : parseStripeForm(body);
      if (!route.public) standIn.calls.push({ method, path: url.pathname, form });
      const key = headers["idempotency-key"];
      const remembered = typeof key === "string" ? `${method} ${url.pathname} ${key}` : undefined;
      const replay = remembered === undefined ? undefined : idempotent.get(remembered);
      if (replay) return { ...replay, headers: { ...replay.headers, "idempotent-replayed": "true" } };
      const reply = await route.handler({
        method,
        path: url.pathname,
        params,
        query: url.searchParams,
        form,
        headers,
      });
      if (remembered !== undefined && method === "POST") idempotent.set(remembered, reply);
      return reply;
    }
    return stripeError(
      404,
      "invalid_request_error",
      pathKnown
        ? `Unrecognized request URL (${method}: ${url.pathname}).`
        : `Unrecognized request URL (${method}: ${url.pathname}). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.`,
    );
  }

  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  // Stripe's sender keeps a bounded number of connections to an endpoint; so does this one (a burst of
  // a thousand new connections at once would overflow the receiver's listen backlog, not test it).
  const sender = new Agent({ connections: 128 });
  let counter = 0;
  const standIn: StripeStandIn = {
    url: `http://127.0.0.1:${port}`,
    sdkSettings: { host: "127.0.0.1", port, protocol: "http" },
    secretKey: options.secretKey ?? `sk_test_${randomBytes(12).toString("hex")}`,
    webhookSecret: options.webhookSecret ?? `whsec_${randomBytes(16).toString("hex")}`,
    ...(options.webhookUrl !== undefined ? { webhookUrl: options.webhookUrl } : {}),
    events: [],
    calls: [],
    unreachable: false,
    objects: new Map(),
    client: () =>
      new Stripe(standIn.secretKey, { ...standIn.sdkSettings, maxNetworkRetries: 0, telemetry: false }),
    newId: (prefix) =>
      `${prefix}_${(++counter).toString(36).padStart(4, "0")}${randomBytes(9).toString("hex")}`,
    emit: async (type, object) => {
      const event: StripeEvent = {
        id: standIn.newId("evt"),
        object: "event",
        api_version: STRIPE_API_VERSION,
        created: Math.floor(Date.now() / 1000),
        data: { object },
        livemode: false,
        pending_webhooks: standIn.webhookUrl === undefined ? 0 : 1,
        request: { id: null, idempotency_key: null },
        type,
      };
      standIn.events.push({ event });
      if (standIn.webhookUrl !== undefined) await standIn.deliver(event);
      return event;
    },
    deliver: async (event, opts) => {
      if (standIn.webhookUrl === undefined) throw new Error("The stand-in has no webhookUrl to post to.");
      const payload = JSON.stringify(event, null, 2);
      const url = standIn.webhookUrl;
      const post = () =>
        undiciFetch(url, {
          dispatcher: sender,
          method: "POST",
          headers: {
            "content-type": "application/json; charset=utf-8",
            "stripe-signature": signedHeader(payload, opts?.secret ?? standIn.webhookSecret, opts?.timestamp),
            "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
          },
          body: payload,
        });
      // A connection reset before any answer is a failed delivery, which Stripe sends again.
      let response: Awaited<ReturnType<typeof post>> | undefined;
      for (let attempt = 1; !response; attempt++) {
        try {
          response = await post();
        } catch (err) {
          if (attempt >= 5) throw err;
        }
      }
      await response.arrayBuffer();
      const kept = standIn.events.find((e) => e.event.id === event.id);
      if (kept) kept.status = response.status;
      return response.status;
    },
    close: async () => {
      await sender.close();
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
    },
  };
  for (const module of options.modules) module(router, standIn);
  return standIn;
}

function match(pattern: string[], parts: string[]): Record<string, string> | undefined {
  if (pattern.length !== parts.length) return undefined;
  const params: Record<string, string> = {};
  for (const [i, part] of pattern.entries()) {
    const actual = parts[i] ?? "";
    if (part.startsWith(":")) {
      if (actual === "") return undefined;
      params[part.slice(1)] = decodeURIComponent(actual);
    } else if (part !== actual) return undefined;
  }
  return params;
}

/** Seconds since the epoch, as Stripe's timestamps are. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
