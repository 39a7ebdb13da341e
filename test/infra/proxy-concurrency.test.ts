import type { Context } from "aws-lambda";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { vendorApps } from "../../lambda/compose/proxy";
import { PendingWork, type ProxyHooks } from "../../lambda/core/call";
import { silentLogger } from "../../lambda/core/logger";
import { grantedContext } from "../../lambda/handlers/runtime/authorizer-context";
import { parseProxyConfig } from "../../lambda/handlers/runtime/config";
import { createProxyHandler } from "../../lambda/handlers/runtime/proxy-stream";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import {
  CollectedResponse,
  gatewayProxyEvent,
  installStreamingRuntime,
  type SecretsEndpoint,
  type StreamingHandler,
  startSecretsEndpoint,
} from "./lambda-runtime";

/**
 * Lambda Managed Instances run many invocations at once in one execution environment: one handler, one
 * `PendingWork`, many calls in flight. Each invocation must end once its own call's after-work is done.
 */
const KEY_ARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:VendorKeyOpenai-abc123";
const SERVICE_KEY = `dmt_${"a".repeat(16)}_${"B".repeat(43)}`;
const CALLS = 24;

let simulator: Simulator;
let secrets: SecretsEndpoint;

beforeAll(async () => {
  simulator = await startSimulator();
  secrets = await startSecretsEndpoint();
  secrets.secrets.set(KEY_ARN, { AWSCURRENT: "sk-managed-openai" });
  installStreamingRuntime();
});

afterAll(async () => {
  await simulator?.close();
  await secrets?.close();
});

/** A gate per call, opened by the test: the call's after-work waits on it. */
function gates(count: number) {
  const open: (() => void)[] = [];
  const closed = Array.from(
    { length: count },
    (_, i) =>
      new Promise<void>((resolve) => {
        open[i] = resolve;
      }),
  );
  return { closed, open: (i: number) => open[i]?.() };
}

describe("proxy handler: many invocations at once in one execution environment", () => {
  it("ends each invocation when its own after-work is done, not another's", async () => {
    const { closed, open } = gates(CALLS);
    const started = new Set<number>();
    const finished: number[] = [];
    let allStarted = () => {};
    const everyAfterStarted = new Promise<void>((resolve) => {
      allStarted = resolve;
    });
    const hooks: ProxyHooks = {
      async after(call, outcome) {
        const index = Number(call.requestId);
        started.add(index);
        if (started.size === CALLS) allStarted();
        await closed[index];
        finished.push(index);
        expect(outcome.status).toBe(200);
      },
    };
    // One environment: one handler and one PendingWork for every invocation, as in the deployed function.
    const pending = new PendingWork();
    const handler = createProxyHandler({
      config: parseProxyConfig({
        DMT_VENDORS: "openai",
        DMT_VENDOR_KEY_SECRET_ARN_OPENAI: KEY_ARN,
        DMT_SECRETS_ENDPOINT: secrets.url,
        DMT_UPSTREAM_URL_OPENAI: simulator.origins.openai,
        DMT_LOG_LEVEL: "silent",
      }),
      logger: silentLogger,
      proxy: { pending, app: vendorApps({ hooks, pending, logger: silentLogger }) },
    }) as unknown as StreamingHandler;

    const ended = new Set<number>();
    const responses = Array.from({ length: CALLS }, () => new CollectedResponse());
    const invocations = responses.map((stream, index) =>
      handler(
        gatewayProxyEvent(
          {
            method: "POST",
            path: "/openai/v1/chat/completions",
            headers: {
              authorization: `Bearer ${SERVICE_KEY}`,
              "content-type": "application/json",
              "x-request-id": String(index),
            },
            // Half streamed, half answered whole: both paths hand their after-work over.
            body: JSON.stringify({
              model: "gpt-4o-mini",
              messages: [{ role: "user", content: "Say hello" }],
              stream: index % 2 === 0,
            }),
          },
          grantedContext({
            projectId: "acme",
            keyId: "a".repeat(16),
            tier: "pro",
            rateLimit: { rpm: 6000, burst: 1000 },
            store: "full",
          }),
        ),
        stream,
        { awsRequestId: `request-${index}` } as Context,
      ).then(() => {
        ended.add(index);
      }),
    );
    // Every call answered and its after-work begun, while every gate is still shut.
    await everyAfterStarted;
    expect(ended.size).toBe(0);

    // Opened from the last to the first: each invocation ends as soon as its own gate opens, with the
    // gates of the calls before it still shut (were it waiting for them, this would never resolve).
    for (let index = CALLS - 1; index >= 0; index--) {
      open(index);
      await invocations[index];
      expect(ended.has(index)).toBe(true);
      for (let earlier = 0; earlier < index; earlier++) expect(ended.has(earlier)).toBe(false);
    }
    expect(finished).toEqual(Array.from({ length: CALLS }, (_, i) => CALLS - 1 - i));
    for (const response of responses) expect(response.prelude?.statusCode).toBe(200);
  });

  it("still waits for its own after-work before the invocation ends", async () => {
    const { closed, open } = gates(1);
    let afterBegun = () => {};
    const begun = new Promise<void>((resolve) => {
      afterBegun = resolve;
    });
    const pending = new PendingWork();
    const hooks: ProxyHooks = {
      async after() {
        afterBegun();
        await closed[0];
      },
    };
    const handler = createProxyHandler({
      config: parseProxyConfig({
        DMT_VENDORS: "openai",
        DMT_VENDOR_KEY_SECRET_ARN_OPENAI: KEY_ARN,
        DMT_SECRETS_ENDPOINT: secrets.url,
        DMT_UPSTREAM_URL_OPENAI: simulator.origins.openai,
        DMT_LOG_LEVEL: "silent",
      }),
      logger: silentLogger,
      proxy: { pending, app: vendorApps({ hooks, pending, logger: silentLogger }) },
    }) as unknown as StreamingHandler;
    let ended = false;
    const stream = new CollectedResponse();
    const invocation = handler(
      gatewayProxyEvent(
        {
          method: "POST",
          path: "/openai/v1/chat/completions",
          headers: { authorization: `Bearer ${SERVICE_KEY}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] }),
        },
        grantedContext({
          projectId: "acme",
          keyId: "a".repeat(16),
          tier: "pro",
          rateLimit: { rpm: 600, burst: 1000 },
          store: "full",
        }),
      ),
      stream,
      {} as Context,
    ).then(() => {
      ended = true;
    });
    await begun;
    await new Promise((resolve) => setImmediate(resolve));
    expect(ended).toBe(false);
    open(0);
    await invocation;
    expect(ended).toBe(true);
  });
});
