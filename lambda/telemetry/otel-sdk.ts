import {
  type Attributes,
  type Context,
  defaultTextMapGetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
} from "@opentelemetry/api";
import { type ExportResult, ExportResultCode, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPMetricExporter as JsonMetricExporter } from "@opentelemetry/exporter-metrics-otlp-http";
import { OTLPMetricExporter as ProtoMetricExporter } from "@opentelemetry/exporter-metrics-otlp-proto";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
  type ResourceMetrics,
} from "@opentelemetry/sdk-metrics";
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type Span,
  type SpanExporter,
  type SpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import type { ProxyCall, ProxyOutcome } from "../core/call";
import type { OtlpSettings } from "./config";
import type { ExportTrouble, TelemetryExport } from "./export";
import { DURATION_BUCKETS, genAiCall, TOKEN_BUCKETS } from "./gen-ai";

/**
 * The OpenTelemetry SDK, loaded only when an endpoint is set (`hooks.ts` imports this module
 * dynamically). Providers of our own, never registered globally: nothing else in the process is traced
 * through them, and nothing else's tracing changes ours.
 */
export function startExport(settings: OtlpSettings, trouble: ExportTrouble): TelemetryExport {
  const resource = resourceFromAttributes({
    "service.name": settings.serviceName,
    ...(process.env.AWS_LAMBDA_FUNCTION_NAME && {
      "cloud.provider": "aws",
      "faas.name": process.env.AWS_LAMBDA_FUNCTION_NAME,
      ...(process.env.AWS_REGION && { "cloud.region": process.env.AWS_REGION }),
    }),
  });
  const exporterOptions = {
    headers: settings.headers,
    timeoutMillis: settings.timeoutMs,
  };
  const json = settings.protocol === "http/json";
  const spanExporter = json
    ? new JsonTraceExporter({ ...exporterOptions, url: settings.tracesUrl })
    : new ProtoTraceExporter({ ...exporterOptions, url: settings.tracesUrl });
  const metricExporter = json
    ? new JsonMetricExporter({ ...exporterOptions, url: settings.metricsUrl })
    : new ProtoMetricExporter({ ...exporterOptions, url: settings.metricsUrl });

  const queue = new BoundedQueue(settings.maxQueuedSpans, trouble);
  const spans = new BatchSpanProcessor({
    exporter: queue.exporter(spanExporter),
    // The bounded queue in front of it decides what is dropped; this one never fills before it.
    maxQueueSize: settings.maxQueuedSpans,
    maxExportBatchSize: Math.min(512, settings.maxQueuedSpans),
    scheduledDelayMillis: settings.batchDelayMs,
    exportTimeoutMillis: settings.timeoutMs,
  });
  const tracerProvider = new TracerProvider({ resource, spanProcessors: [queue.processor(spans)] });
  const tracer = tracerProvider.getTracer("dmt");

  const reader = new PeriodicExportingMetricReader({
    exporter: failuresCounted(metricExporter, trouble),
    exportIntervalMillis: settings.metricIntervalMs,
    exportTimeoutMillis: Math.min(settings.timeoutMs, settings.metricIntervalMs),
  });
  const meterProvider = new MeterProvider({ resource, readers: [reader] });
  const meter = meterProvider.getMeter("dmt");
  const tokenUsage = meter.createHistogram("gen_ai.client.token.usage", {
    unit: "{token}",
    description: "Number of input and output tokens used.",
    advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
  });
  const duration = meter.createHistogram("gen_ai.client.operation.duration", {
    unit: "s",
    description: "GenAI operation duration.",
    advice: { explicitBucketBoundaries: DURATION_BUCKETS },
  });
  const dropped = meter.createCounter("dmt.telemetry.dropped_spans", {
    unit: "{span}",
    description: "Spans not sent: the queue was full, or their export failed.",
  });
  const failedExports = meter.createCounter("dmt.telemetry.failed_exports", {
    unit: "{export}",
    description: "OTLP exports that failed, by signal.",
  });
  // Cumulative counters: what was dropped while the receiver was away arrives once it is back.
  trouble.onCounted((counts) => {
    if (counts.droppedSpans > 0) dropped.add(counts.droppedSpans);
    if (counts.failedTraceExports > 0) failedExports.add(counts.failedTraceExports, { signal: "traces" });
    if (counts.failedMetricExports > 0) failedExports.add(counts.failedMetricExports, { signal: "metrics" });
  });

  const propagator = new W3CTraceContextPropagator();
  const parentOf = (call: ProxyCall): Context =>
    call.traceparent === undefined
      ? ROOT_CONTEXT
      : propagator.extract(
          ROOT_CONTEXT,
          {
            traceparent: call.traceparent,
            ...(call.tracestate !== undefined && { tracestate: call.tracestate }),
          },
          defaultTextMapGetter,
        );

  return {
    record(call: ProxyCall, outcome: ProxyOutcome) {
      const gen = genAiCall(call, outcome);
      const span = tracer.startSpan(
        gen.spanName,
        { kind: SpanKind.CLIENT, startTime: call.startedAt, attributes: gen.span },
        parentOf(call),
      );
      if (gen.failed) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end(call.startedAt + outcome.latencyMs);
      const metric: Attributes = gen.metric;
      if (gen.tokens) {
        tokenUsage.record(gen.tokens.input, { ...metric, "gen_ai.token.type": "input" });
        tokenUsage.record(gen.tokens.output, { ...metric, "gen_ai.token.type": "output" });
      }
      duration.record(gen.durationS, metric);
    },
    async flush() {
      await Promise.allSettled([tracerProvider.forceFlush(), meterProvider.forceFlush()]);
    },
    async shutdown() {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}

/**
 * At most `capacity` spans waiting for an export: past it, a span is dropped at once (counted), so a
 * receiver down or slow costs a bounded memory and never a wait. In flight besides: the batch being
 * sent (one at a time; in Lambda, each invocation's flush, up to the exporter's limit on concurrent
 * exports, past which they fail at once). A failed export's spans are dropped too, counted (the
 * exporter already retried what may be retried).
 */
class BoundedQueue {
  private waiting = 0;

  constructor(
    private readonly capacity: number,
    private readonly trouble: ExportTrouble,
  ) {}

  processor(inner: SpanProcessor): SpanProcessor {
    return {
      onStart: (span: Span, context: Context) => inner.onStart(span, context),
      onEnd: (span: ReadableSpan) => {
        if (this.waiting >= this.capacity) {
          this.trouble.dropped(1);
          return;
        }
        this.waiting++;
        inner.onEnd(span);
      },
      forceFlush: () => inner.forceFlush(),
      shutdown: () => inner.shutdown(),
    };
  }

  exporter(inner: SpanExporter): SpanExporter {
    return {
      export: (spans: ReadableSpan[], done: (result: ExportResult) => void) => {
        this.waiting = Math.max(0, this.waiting - spans.length);
        inner.export(spans, (result) => {
          if (result.code !== ExportResultCode.SUCCESS)
            this.trouble.failed("traces", spans.length, result.error);
          done(result);
        });
      },
      shutdown: () => inner.shutdown(),
      forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
    };
  }
}

/** The metric exporter, its failures counted. */
function failuresCounted(inner: PushMetricExporter, trouble: ExportTrouble): PushMetricExporter {
  return {
    export: (metrics: ResourceMetrics, done: (result: ExportResult) => void) => {
      inner.export(metrics, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) trouble.failed("metrics", 0, result.error);
        done(result);
      });
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
    ...(inner.selectAggregationTemporality && {
      selectAggregationTemporality: inner.selectAggregationTemporality.bind(inner),
    }),
    ...(inner.selectAggregation && { selectAggregation: inner.selectAggregation.bind(inner) }),
  };
}
