import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoCredits } from "../../lambda/adapters/dynamodb/credits";
import { tableNames } from "../../lambda/adapters/dynamodb/tables";
import { parseUsd } from "../../lambda/core/credits";
import { type Simulator, startSimulator } from "../../lambda/local/simulator";
import { simulatorEnv, startTestHost, type TestHost } from "../support/host";
import { OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver";

/**
 * OpenTelemetry through the official SDKs: each call through the embedded host reaches a local OTLP
 * receiver as a span with the GenAI conventions' attributes and as the two GenAI metrics, in both
 * OTLP/HTTP encodings; a client's `traceparent` makes it a child of the client's span; and a receiver
 * that is down or slow changes nothing for the calls.
 */

let simulator: Simulator;
beforeAll(async () => {
  simulator = await startSimulator();
});
afterAll(async () => {
  await simulator?.close();
});

interface Setup {
  receiver: OtlpReceiver;
  stack: TestHost;
  key: string;
  keyId: string;
  projectId: string;
}

async function setUp(env: Record<string, string>): Promise<Setup> {
  const receiver = await OtlpReceiver.start();
  const stack = await startTestHost({
    ...simulatorEnv(simulator.origins),
    DMT_METERING: "on",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_HEADERS: "x-team-token=s3cr%3Dt,x-other=1",
    OTEL_BSP_SCHEDULE_DELAY: "50",
    OTEL_METRIC_EXPORT_INTERVAL: "200",
    ...env,
  });
  const owner = await stack.newKey();
  await new DynamoCredits(stack.db, tableNames(process.env)).grant(owner.projectId, parseUsd("10"), "test");
  return { receiver, stack, ...owner };
}

async function tearDown(setup: Setup | undefined): Promise<void> {
  await setup?.stack.stop();
  await setup?.receiver.close();
}

const spanOf = (receiver: OtlpReceiver, transactionId: string | null): ReceivedSpan | undefined =>
  receiver.spans.find((span) => span.attributes["dmt.transaction_id"] === transactionId);

const SYSTEM = "You answer briefly. ".repeat(400);

for (const protocol of ["http/protobuf", "http/json"] as const) {
  describe(`spans and metrics over OTLP ${protocol}`, () => {
    let setup: Setup;
    beforeAll(async () => {
      setup = await setUp({ OTEL_EXPORTER_OTLP_PROTOCOL: protocol });
    });
    afterAll(() => tearDown(setup));

    it("an OpenAI chat completion becomes a span with the GenAI attributes, ours, and no body or key", async () => {
      const { receiver, stack, key, keyId, projectId } = setup;
      const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
      const { data, response } = await openai.chat.completions
        .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello, secretword" }] })
        .withResponse();
      const transactionId = response.headers.get("x-dmt-transaction-id");
      await stack.drain();
      await receiver.until((r) => spanOf(r, transactionId) !== undefined);
      const span = spanOf(receiver, transactionId) as ReceivedSpan;
      expect(span.name).toBe("chat gpt-4o-mini");
      expect(span.kind).toBe(3); // CLIENT
      expect(span.parentSpanId).toBeUndefined();
      expect(span.scope).toBe("dmt");
      expect(span.resource["service.name"]).toBe("dmt");
      expect(span.attributes).toMatchObject({
        "gen_ai.provider.name": "openai",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": data.model,
        "gen_ai.usage.input_tokens": data.usage?.prompt_tokens,
        "gen_ai.usage.output_tokens": data.usage?.completion_tokens,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "http.response.status_code": 200,
        "dmt.billing_mode": "managed",
        "dmt.project_id": projectId,
        "dmt.key_id": keyId,
      });
      expect(span.attributes["dmt.cost_usd"]).toBeGreaterThan(0);
      expect(span.endTimeUnixNano).toBeGreaterThanOrEqual(span.startTimeUnixNano);
      const sent = JSON.stringify(span, (_k, v) => (typeof v === "bigint" ? String(v) : v));
      expect(sent).not.toContain("secretword");
      expect(sent).not.toContain(key);
      expect(sent).not.toContain("Hello");
      // The standard headers variable, percent-decoded, on every export.
      const request = receiver.requests.find((r) => r.path === "/v1/traces");
      expect(request?.headers["x-team-token"]).toBe("s3cr=t");
      expect(request?.contentType).toBe(
        protocol === "http/json" ? "application/json" : "application/x-protobuf",
      );
    });

    it("counts Anthropic's cache reads and writes in the input tokens, and apart", async () => {
      const { receiver, stack, key } = setup;
      const anthropic = new Anthropic({ apiKey: key, baseURL: `${stack.url}/anthropic`, maxRetries: 0 });
      const ask = () =>
        anthropic.messages
          .create({
            model: "claude-sonnet-4-6",
            max_tokens: 32,
            system: [{ type: "text", text: `${protocol} ${SYSTEM}`, cache_control: { type: "ephemeral" } }],
            messages: [{ role: "user", content: `Say hello ${protocol}` }],
          })
          .withResponse();
      const written = await ask();
      const read = await ask();
      await stack.drain();
      const ids = [written, read].map((r) => r.response.headers.get("x-dmt-transaction-id"));
      await receiver.until((r) => ids.every((id) => spanOf(r, id) !== undefined));
      for (const [index, { data }] of [written, read].entries()) {
        const usage = data.usage;
        const span = spanOf(receiver, ids[index] ?? null) as ReceivedSpan;
        expect(span.attributes).toMatchObject({
          "gen_ai.provider.name": "anthropic",
          "gen_ai.operation.name": "chat",
          "gen_ai.usage.input_tokens":
            usage.input_tokens +
            (usage.cache_read_input_tokens ?? 0) +
            (usage.cache_creation_input_tokens ?? 0),
          "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens ?? 0,
          "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens ?? 0,
        });
      }
      expect(written.data.usage.cache_creation_input_tokens).toBeGreaterThan(0);
      expect(read.data.usage.cache_read_input_tokens).toBeGreaterThan(0);
    });

    it("makes the span a child of the client's traceparent, keeping its tracestate", async () => {
      const { receiver, stack, key } = setup;
      const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
      const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
      const parentId = "00f067aa0ba902b7";
      const { response } = await openai.chat.completions
        .create(
          { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
          { headers: { traceparent: `00-${traceId}-${parentId}-01`, tracestate: "vendor=abc" } },
        )
        .withResponse();
      const transactionId = response.headers.get("x-dmt-transaction-id");
      await stack.drain();
      await receiver.until((r) => spanOf(r, transactionId) !== undefined);
      const span = spanOf(receiver, transactionId) as ReceivedSpan;
      expect(span.traceId).toBe(traceId);
      expect(span.parentSpanId).toBe(parentId);
      expect(span.traceState).toBe("vendor=abc");
    });

    it("a malformed traceparent starts a trace of our own, and the call goes through", async () => {
      const { receiver, stack, key } = setup;
      const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
      const { response } = await openai.chat.completions
        .create(
          { model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] },
          { headers: { traceparent: "00-not-a-trace-01" } },
        )
        .withResponse();
      expect(response.status).toBe(200);
      const transactionId = response.headers.get("x-dmt-transaction-id");
      await stack.drain();
      await receiver.until((r) => spanOf(r, transactionId) !== undefined);
      expect(spanOf(receiver, transactionId)?.parentSpanId).toBeUndefined();
    });

    it("a vendor error is a span in error, with error.type", async () => {
      const { receiver, stack, key } = setup;
      simulator.inject({ vendor: "openai", fault: { kind: "status", status: 503 } });
      const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
      const error = (await openai.chat.completions
        .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
        .catch((err: unknown) => err)) as InstanceType<typeof OpenAI.APIError>;
      expect(error.status).toBe(503);
      const transactionId = error.headers?.get("x-dmt-transaction-id") ?? null;
      await stack.drain();
      await receiver.until((r) => spanOf(r, transactionId) !== undefined);
      const span = spanOf(receiver, transactionId) as ReceivedSpan;
      expect(span.statusCode).toBe(2); // ERROR
      expect(span.attributes["error.type"]).toBe("503");
      expect(span.attributes["http.response.status_code"]).toBe(503);
    });

    it("feeds gen_ai.client.token.usage and gen_ai.client.operation.duration, with the conventions' buckets", async () => {
      const { receiver } = setup;
      await receiver.until(
        (r) =>
          r.points("gen_ai.client.token.usage").length > 0 &&
          r.points("gen_ai.client.operation.duration").length > 0,
      );
      const tokens = receiver.metrics.find((m) => m.name === "gen_ai.client.token.usage");
      expect(tokens).toMatchObject({ type: "histogram", unit: "{token}" });
      const input = tokens?.points.find(
        (p) =>
          p.attributes["gen_ai.token.type"] === "input" && p.attributes["gen_ai.provider.name"] === "openai",
      );
      expect(input?.attributes).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
      });
      expect(input?.count).toBeGreaterThan(0);
      expect(input?.explicitBounds?.slice(0, 4)).toEqual([1, 4, 16, 64]);
      expect(input?.explicitBounds).toHaveLength(14);
      const duration = receiver.metrics.find((m) => m.name === "gen_ai.client.operation.duration");
      expect(duration).toMatchObject({ type: "histogram", unit: "s" });
      expect(duration?.points[0]?.explicitBounds?.slice(0, 3)).toEqual([0.01, 0.02, 0.04]);
      // A metric has no per-call ids: the project, not the key or the call.
      expect(input?.attributes["dmt.transaction_id"]).toBeUndefined();
      expect(input?.attributes["dmt.key_id"]).toBeUndefined();
    });
  });
}

describe("a receiver that is down or slow", () => {
  it("down: calls through the OpenAI SDK are answered as usual", async () => {
    const receiver = await OtlpReceiver.start();
    const url = receiver.url;
    await receiver.close();
    let setup: Setup | undefined;
    try {
      setup = await setUp({ OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_EXPORTER_OTLP_TIMEOUT: "2000" });
      const { stack, key } = setup;
      const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
      for (let i = 0; i < 5; i++) {
        const completion = await openai.chat.completions.create({
          model: "gpt-4o-mini",
          messages: [{ role: "user", content: "hi" }],
        });
        expect(completion.choices[0]?.message.content).toBeTruthy();
      }
      await stack.drain();
    } finally {
      await tearDown(setup);
    }
  });

  it("slow: calls are answered while every export hangs, and the spans arrive once it answers", async () => {
    let setup: Setup | undefined;
    try {
      setup = await setUp({ OTEL_EXPORTER_OTLP_TIMEOUT: "120000" });
      const { stack, key, receiver } = setup;
      receiver.mode = "slow";
      const openai = new OpenAI({ apiKey: key, baseURL: `${stack.url}/openai/v1`, maxRetries: 0 });
      const ids: (string | null)[] = [];
      for (let i = 0; i < 5; i++) {
        const { response } = await openai.chat.completions
          .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
          .withResponse();
        expect(response.status).toBe(200);
        ids.push(response.headers.get("x-dmt-transaction-id"));
      }
      // The exports are held, unanswered: the calls above did not wait for them.
      await receiver.until((r) => r.requests.some((req) => req.path === "/v1/traces"));
      expect(receiver.spans).toHaveLength(0);
      receiver.release();
      await receiver.until((r) => ids.every((id) => spanOf(r, id) !== undefined));
    } finally {
      await tearDown(setup);
    }
  });
});
