import type { ProxyCall, ProxyOutcome } from "../core/call";
import type { Logger } from "../core/logger";
import type { Metrics } from "../core/metrics";

/**
 * What the telemetry hooks (hooks.ts) and the OpenTelemetry SDK they load on demand (otel-sdk.ts) share:
 * what the loaded SDK does, and how failed exports are counted and told.
 */

/** What the loaded SDK does (otel-sdk.ts). */
export interface TelemetryExport {
  record(call: ProxyCall, outcome: ProxyOutcome): void;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

/** How often at most a failing export is logged (the counts in between go into the next line). */
export const TROUBLE_WARNING_INTERVAL_MS = 60_000;

export interface TroubleCounts {
  droppedSpans: number;
  failedTraceExports: number;
  failedMetricExports: number;
}

/**
 * Exports that failed and spans dropped: counted on the host's metrics (CloudWatch in AWS) and on
 * OpenTelemetry counters of their own (which reach the receiver once it is back), and logged as one
 * warning a minute at most, not one per call.
 */
export class ExportTrouble {
  private since: TroubleCounts = { droppedSpans: 0, failedTraceExports: 0, failedMetricExports: 0 };
  private warnedAt: number | undefined;
  private listener: ((counts: TroubleCounts) => void) | undefined;

  constructor(private readonly deps: { logger: Logger; metrics: Metrics; clock: () => number }) {}

  /** The SDK's own counters, fed with each change. */
  onCounted(listener: (counts: TroubleCounts) => void): void {
    this.listener = listener;
  }

  /** Spans dropped before any export was tried: the queue was full. */
  dropped(spans: number): void {
    this.count({ droppedSpans: spans, failedTraceExports: 0, failedMetricExports: 0 }, "queue full");
  }

  failed(signal: "traces" | "metrics", spans: number, error: Error | undefined): void {
    const traces = signal === "traces";
    this.count(
      { droppedSpans: spans, failedTraceExports: traces ? 1 : 0, failedMetricExports: traces ? 0 : 1 },
      // The exporters' messages name the status or the network error, never the headers.
      (error?.message ?? "export failed").slice(0, 200),
    );
  }

  private count(delta: TroubleCounts, reason: string): void {
    const { logger, metrics, clock } = this.deps;
    if (delta.droppedSpans > 0) metrics.add("TelemetrySpansDropped", "Count", delta.droppedSpans);
    const failed = delta.failedTraceExports + delta.failedMetricExports;
    if (failed > 0) metrics.add("TelemetryExportsFailed", "Count", failed);
    try {
      this.listener?.(delta);
    } catch {
      // The counters are the SDK's; they never throw, and if they did a call would not care.
    }
    this.since.droppedSpans += delta.droppedSpans;
    this.since.failedTraceExports += delta.failedTraceExports;
    this.since.failedMetricExports += delta.failedMetricExports;
    const now = clock();
    if (this.warnedAt !== undefined && now - this.warnedAt < TROUBLE_WARNING_INTERVAL_MS) return;
    logger.warn("OpenTelemetry export failing: spans and metrics are being dropped", {
      ...this.since,
      reason,
      ...(this.warnedAt !== undefined && { sinceMs: now - this.warnedAt }),
    });
    this.warnedAt = now;
    this.since = { droppedSpans: 0, failedTraceExports: 0, failedMetricExports: 0 };
  }
}
