import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createUpstreamClient } from "../../lambda/adapters/undici/client";
import { createProxyApp } from "../../lambda/app/proxy/app";
import type { ProxyCall, ProxyHooks, ProxyOutcome } from "../../lambda/core/call";
import { errors } from "../../lambda/core/errors";
import { CachedKeyLookup } from "../../lambda/core/key-cache";
import { silentLogger } from "../../lambda/core/logger";
import type { UpstreamClient } from "../../lambda/core/upstream";
import { requireKey } from "../../lambda/local/host";
import { createHttpServer, type RunningServer } from "../../lambda/local/http-server";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { VENDOR_DEFINITIONS } from "../../lambda/vendors";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";

/**
 * The lifecycle metering and the warehouse plug into, seen through a recording ProxyHooks on the real
 * proxy app (real auth over the real store, real upstream client, the simulator as the vendor).
 */
let simulator: Simulator;
let stack: TestHost;
let upstream: UpstreamClient;
let server: RunningServer;
let url: string;
let key: string;

const befores: ProxyCall[] = [];
const afters: { call: ProxyCall; outcome: ProxyOutcome }[] = [];
let refuseNext: Error | undefined;
let waiter: (() => void) | undefined;

const hooks: ProxyHooks = {
  async before(call) {
    befores.push(call);
    call.responseHeaders["x-ratelimit-limit"] = "60";
    if (refuseNext) {
      const err = refuseNext;
      refuseNext = undefined;
      throw err;
    }
  },
  after(call, outcome) {
    afters.push({ call, outcome });
    waiter?.();
  },
};

/** The single `after` of the next call, once it came. */
async function nextOutcome(): Promise<{ call: ProxyCall; outcome: ProxyOutcome }> {
  if (afters.length === 0) await new Promise<void>((resolve) => (waiter = resolve));
  // Another `after` for the same call would arrive on the next turns: give it the chance to show up.
  await new Promise((resolve) => setTimeout(resolve, 20));
  expect(afters).toHaveLength(1);
  return afters[0] as { call: ProxyCall; outcome: ProxyOutcome };
}

beforeAll(async () => {
  simulator = await startSimulator();
  stack = await startTestHost(simulatorEnv(simulator.origins));
  key = (await stack.newKey()).key;
  upstream = createUpstreamClient({
    target: simulator.origins.openai,
    connectTimeoutMs: 1000,
    idleTimeoutMs: 5000,
  });
  const app = createProxyApp({
    vendor: VENDOR_DEFINITIONS.openai,
    upstream,
    managedKey: "sk-managed",
    upstreamState: "configured",
    auth: requireKey({ keys: new CachedKeyLookup(stack.store, 0), clock: Date.now }),
    logger: silentLogger,
    hooks,
    captureLimit: 100,
  });
  server = createHttpServer({ fetch: app.fetch, headersTimeoutMs: 20_000, maxConnectionsPerClient: 256 });
  url = `http://127.0.0.1:${await server.listen(0, "127.0.0.1")}`;
});
afterAll(async () => {
  await server.close(1000);
  await upstream.close();
  await stack.stop();
  await simulator.close();
});
beforeEach(() => {
  befores.length = 0;
  afters.length = 0;
  waiter = undefined;
  simulator.reset();
  simulator.setChunkDelay(0);
});

const call = (path: string, body?: unknown, init: RequestInit = {}) =>
  fetch(`${url}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "x-request-id": "r-1" },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
    ...init,
  });

const chat = {
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Say hello to the whole wide world" }],
};

describe("proxy hooks", () => {
  it("reports a completed call once, with usage, timings and capped bodies", async () => {
    const res = await call("/openai/v1/chat/completions", { ...chat, user: "u-7" });
    expect(res.headers.get("x-ratelimit-limit")).toBe("60");
    const answer = await res.json();
    const { call: seen, outcome } = await nextOutcome();
    expect(befores).toHaveLength(1);
    expect(seen).toMatchObject({
      vendor: "openai",
      endpoint: "openai:/v1/chat/completions",
      model: "gpt-4o-mini",
      stream: false,
      requestId: "r-1",
      body: { user: "u-7" },
    });
    expect(seen.route?.operation).toBe("chat");
    expect(outcome).toMatchObject({
      status: 200,
      streamed: false,
      usage: {
        inputTokens: answer.usage.prompt_tokens,
        outputTokens: answer.usage.completion_tokens,
        complete: true,
        estimated: false,
      },
      request: { truncated: true, contentType: "application/json" },
      response: { truncated: true, contentType: "application/json" },
      vendorRequestId: res.headers.get("x-request-id"),
    });
    expect(outcome.error).toBeUndefined();
    expect(outcome.request.text).toHaveLength(100);
    expect(outcome.ttftMs).toBeLessThanOrEqual(outcome.latencyMs);
  });

  it("reports a stream once it ended, with the assembled message and the vendor's usage", async () => {
    const res = await call("/openai/v1/chat/completions", { ...chat, stream: true });
    const text = await res.text();
    expect(text).not.toContain('"usage"');
    const { outcome } = await nextOutcome();
    expect(outcome).toMatchObject({ status: 200, streamed: true, usage: { complete: true } });
    expect(outcome.usage.outputTokens).toBeGreaterThan(0);
    expect(outcome.response.text?.startsWith('{"id":"chatcmpl-')).toBe(true);
  });

  it("reports a stream the client abandoned as incomplete", async () => {
    simulator.setChunkDelay(100);
    const abort = new AbortController();
    const res = await call(
      "/openai/v1/chat/completions",
      { ...chat, stream: true },
      { signal: abort.signal },
    );
    await res.body?.getReader().read();
    abort.abort();
    const { outcome } = await nextOutcome();
    expect(outcome).toMatchObject({
      status: 200,
      streamed: true,
      error: { type: "client_error", code: "client_closed_request" },
      usage: { complete: false },
    });
  });

  it("lets before refuse a call: nothing forwarded, its error and headers returned, after still called", async () => {
    refuseNext = errors.insufficientCredits();
    const res = await call("/openai/v1/chat/completions", chat);
    expect(res.status).toBe(402);
    expect(res.headers.get("x-ratelimit-limit")).toBe("60");
    expect((await res.json()).error.code).toBe("insufficient_credits");
    expect(simulator.requests).toEqual([]);
    const { outcome } = await nextOutcome();
    expect(outcome).toMatchObject({
      status: 402,
      error: { type: "billing_error", code: "insufficient_credits" },
    });
    expect(outcome.usage.inputTokens).toBe(0);
  });

  it("reports our own refusals after authentication, without calling before", async () => {
    for (const [path, body, status] of [
      ["/openai/v1/nope", chat, 404],
      ["/openai/v1/chat/completions", "{not json", 400],
    ] as const) {
      afters.length = 0;
      const res = await call(path, body);
      expect(res.status).toBe(status);
      const { call: seen, outcome } = await nextOutcome();
      expect(outcome.status).toBe(status);
      expect(outcome.response.text).toContain('"error"');
      expect(seen.route === undefined).toBe(status === 404);
    }
    expect(befores).toEqual([]);
  });

  it("reports a vendor error with its status", async () => {
    simulator.inject({ fault: { kind: "status", status: 429 } });
    expect((await call("/openai/v1/chat/completions", chat)).status).toBe(429);
    const { outcome } = await nextOutcome();
    expect(outcome).toMatchObject({ status: 429, error: { type: "vendor_error", code: "429" } });
  });

  it("reports health checks, which never reach the vendor", async () => {
    expect((await call("/openai/health")).status).toBe(200);
    const { outcome } = await nextOutcome();
    expect(outcome.status).toBe(200);
    expect(simulator.requests).toEqual([]);
  });

  it("does not report calls that failed authentication", async () => {
    const res = await fetch(`${url}/openai/v1/models`, { headers: { authorization: "Bearer dmt_nope" } });
    expect(res.status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(afters).toEqual([]);
  });
});

describe("a caller that leaves before the vendor answers", () => {
  let vendor: Server;
  let hanging: UpstreamClient;
  let proxy: RunningServer;
  let proxyUrl: string;
  /** When the vendor's side of each request it got (and never answers) closed. */
  const closes: Promise<void>[] = [];
  let arrived: () => void = () => {};

  beforeAll(async () => {
    vendor = createServer((_req, res) => {
      closes.push(new Promise((resolve) => res.on("close", () => resolve())));
      arrived();
    });
    await new Promise<void>((resolve) => vendor.listen(0, "127.0.0.1", resolve));
    hanging = createUpstreamClient({
      target: `http://127.0.0.1:${(vendor.address() as AddressInfo).port}`,
      connectTimeoutMs: 5000,
      idleTimeoutMs: 600_000,
    });
    const app = createProxyApp({
      vendor: VENDOR_DEFINITIONS.openai,
      upstream: hanging,
      managedKey: "sk-managed",
      upstreamState: "configured",
      auth: requireKey({ keys: new CachedKeyLookup(stack.store, 0), clock: Date.now }),
      logger: silentLogger,
      hooks,
    });
    proxy = createHttpServer({ fetch: app.fetch, headersTimeoutMs: 20_000, maxConnectionsPerClient: 256 });
    proxyUrl = `http://127.0.0.1:${await proxy.listen(0, "127.0.0.1")}`;
  });
  afterAll(async () => {
    await proxy.close(1000);
    await hanging.close();
    vendor.closeAllConnections();
    await new Promise((resolve) => vendor.close(resolve));
  });

  it("drops the vendor's request and reports the call as 499 client_closed_request", async () => {
    const arrival = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const abort = new AbortController();
    const response = fetch(`${proxyUrl}/openai/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(chat),
      signal: abort.signal,
    }).catch((err: unknown) => err);
    await arrival;
    abort.abort();
    expect(await response).toMatchObject({ name: "AbortError" });
    // The vendor's connection is closed, though it never answered and no timeout has passed.
    await closes[0];
    const { outcome } = await nextOutcome();
    expect(outcome).toMatchObject({
      status: 499,
      error: { type: "client_error", code: "client_closed_request" },
    });
  });
});
