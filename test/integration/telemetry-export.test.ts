import { afterEach, describe, expect, it, vi } from "vitest";
import type { Logger } from "../../lambda/core/logger";
import type { Metrics } from "../../lambda/core/metrics";
import type { OtlpSettings } from "../../lambda/telemetry/config";
import { TROUBLE_WARNING_INTERVAL_MS } from "../../lambda/telemetry/export";
import { type OpenTelemetry, openTelemetry } from "../../lambda/telemetry/hooks";
import { OtlpReceiver } from "../support/otlp-receiver";
import { chatCall, outcomeOf } from "../support/proxy-calls";

/**
 * The export when its receiver misbehaves: the queue is bounded and what is dropped is counted (on the
 * host's metrics and on an OpenTelemetry counter that arrives once the receiver is back), failures are
 * logged once a minute, not once a call; in Lambda the after-work waits for the export, boundedly.
 */

function settings(url: string, changes: Partial<OtlpSettings> = {}): OtlpSettings {
  return {
    tracesUrl: `${url}/v1/traces`,
    metricsUrl: `${url}/v1/metrics`,
    protocol: "http/json",
    headers: {},
    timeoutMs: 30_000,
    serviceName: "dmt-test",
    // Metrics only when a test flushes: periodic exports would interleave with the counts asserted.
    metricIntervalMs: 3_600_000,
    batchDelayMs: 1,
    maxQueuedSpans: 2048,
    flushTimeoutMs: 30_000,
    ...changes,
  };
}

function observed() {
  const warnings: Record<string, unknown>[] = [];
  const counted: Record<string, number> = {};
  const logger: Logger = {
    debug() {},
    info() {},
    warn: (_message, fields) => warnings.push(fields ?? {}),
    error() {},
  };
  const metrics: Metrics = {
    add(name, _unit, value) {
      counted[name] = (counted[name] ?? 0) + value;
    },
  };
  return { warnings, counted, logger, metrics };
}

const opened: { receiver?: OtlpReceiver; telemetry?: OpenTelemetry }[] = [];
afterEach(async () => {
  for (const { receiver, telemetry } of opened.splice(0)) {
    await telemetry?.shutdown();
    await receiver?.close();
  }
});

/** Only catches a hang. */
const WAIT = { timeout: 60_000, interval: 20 };
const ok = outcomeOf({ inputTokens: 10, outputTokens: 2 });

describe("the OTLP export when the receiver misbehaves", () => {
  it("keeps at most the queue's size waiting, drops the rest, and counts them", async () => {
    const receiver = await OtlpReceiver.start();
    receiver.mode = "slow";
    const { counted, logger, metrics } = observed();
    const telemetry = openTelemetry(
      { otlp: settings(receiver.url, { maxQueuedSpans: 3 }), flushEachCall: false },
      { logger, metrics, clock: Date.now },
    );
    opened.push({ receiver, telemetry });
    // Ten calls ending together: a full batch (three) is sent at once and held by the receiver, three
    // wait for the next export, four are dropped there and then.
    await Promise.all(Array.from({ length: 10 }, () => telemetry.hooks.after?.(chatCall(), ok)));
    expect(counted.TelemetrySpansDropped).toBe(4);
    await receiver.until((r) => r.requests.some((req) => req.path === "/v1/traces"));
    // While the export hangs the queue stays full: more calls' spans are dropped, not kept.
    await Promise.all(Array.from({ length: 4 }, () => telemetry.hooks.after?.(chatCall(), ok)));
    expect(counted.TelemetrySpansDropped).toBe(8);
    expect(receiver.spans).toHaveLength(0);
    receiver.release();
    // Once it answers, the next batch follows; the dropped count reaches the receiver as a metric.
    await receiver.until((r) => r.spans.length === 6);
    await telemetry.flush();
    await receiver.until((r) => r.points("dmt.telemetry.dropped_spans").some((p) => p.value === 8));
    expect(counted.TelemetrySpansDropped).toBe(8);
    expect(counted.TelemetryExportsFailed).toBeUndefined();
  });

  it("warns once a minute while exports fail, with the counts since the last warning", async () => {
    const down = await OtlpReceiver.start();
    const url = down.url;
    await down.close();
    let now = Date.UTC(2026, 11, 7, 6);
    const { warnings, counted, logger, metrics } = observed();
    const telemetry = openTelemetry(
      { otlp: settings(url, { timeoutMs: 500 }), flushEachCall: false },
      { logger, metrics, clock: () => now },
    );
    opened.push({ telemetry });
    const failedAfter = async (exports: number) => {
      await telemetry.hooks.after?.(chatCall(), ok);
      await vi.waitFor(() => expect(counted.TelemetryExportsFailed).toBe(exports), WAIT);
    };
    await failedAfter(1);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ droppedSpans: 1, failedTraceExports: 1 });
    for (let i = 2; i <= 4; i++) await failedAfter(i);
    expect(warnings).toHaveLength(1);
    now += TROUBLE_WARNING_INTERVAL_MS;
    await failedAfter(5);
    expect(warnings).toHaveLength(2);
    expect(warnings[1]).toMatchObject({
      droppedSpans: 4,
      failedTraceExports: 4,
      sinceMs: TROUBLE_WARNING_INTERVAL_MS,
    });
    expect(counted.TelemetrySpansDropped).toBe(5);
  });

  it("in Lambda, sends each call's span before its after-work ends", async () => {
    const receiver = await OtlpReceiver.start();
    const { logger, metrics } = observed();
    const telemetry = openTelemetry(
      { otlp: settings(receiver.url), flushEachCall: true },
      { logger, metrics, clock: Date.now },
    );
    opened.push({ receiver, telemetry });
    const call = chatCall();
    await telemetry.hooks.after?.(call, ok);
    expect(receiver.spans.map((s) => s.attributes["dmt.transaction_id"])).toEqual([call.id]);
    expect(receiver.points("gen_ai.client.operation.duration")).toHaveLength(1);
    expect(receiver.spans[0]?.resource["service.name"]).toBe("dmt-test");
  });

  it("in Lambda, a receiver that hangs holds the after-work no longer than the flush timeout", async () => {
    const receiver = await OtlpReceiver.start();
    receiver.mode = "slow";
    const { logger, metrics } = observed();
    const telemetry = openTelemetry(
      { otlp: settings(receiver.url, { flushTimeoutMs: 50 }), flushEachCall: true },
      { logger, metrics, clock: Date.now },
    );
    opened.push({ receiver, telemetry });
    // Without the bound this would wait for the receiver, which answers only on release (a hang).
    await telemetry.hooks.after?.(chatCall(), ok);
    await telemetry.hooks.after?.(chatCall(), ok);
    expect(receiver.spans).toHaveLength(0);
  });
});
