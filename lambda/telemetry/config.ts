// zod/mini, and nothing of the OpenTelemetry SDK: this module is loaded whether or not telemetry is on.
import * as z from "zod/mini";
import { httpUrl, oneOf, wholeNumberIn } from "../core/config";

/**
 * The OpenTelemetry export's variables: the standard `OTEL_*` ones (as the OpenTelemetry SDK
 * environment specification names them) and two of ours. Both hosts' schemas include them.
 */
export const OTLP_VARIABLES = {
  /** Base URL of an OTLP/HTTP receiver (`/v1/traces` and `/v1/metrics` are added); unset: telemetry off. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.optional(httpUrl),
  /** Full URLs per signal, used as they are (the specification's precedence over the base URL). */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.optional(httpUrl),
  OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: z.optional(httpUrl),
  /** `grpc` is not offered: it would bring an HTTP/2 client into every bundle. */
  OTEL_EXPORTER_OTLP_PROTOCOL: z._default(oneOf(["http/protobuf", "http/json"]), "http/protobuf"),
  /** `key=value` pairs, comma-separated, values percent-encoded (an API key, say: never logged). */
  OTEL_EXPORTER_OTLP_HEADERS: z.optional(z.string()),
  /** Longest wait for one export. */
  OTEL_EXPORTER_OTLP_TIMEOUT: wholeNumberIn(1, 120_000, 10_000),
  OTEL_SERVICE_NAME: z._default(z.string(), "dmt"),
  /** `true` turns telemetry off whatever the endpoint. */
  OTEL_SDK_DISABLED: z._default(oneOf(["true", "false"]), "false"),
  /** How often metrics are exported, and how long finished spans wait to be sent in a batch. */
  OTEL_METRIC_EXPORT_INTERVAL: wholeNumberIn(100, 3_600_000, 60_000),
  OTEL_BSP_SCHEDULE_DELAY: wholeNumberIn(1, 600_000, 5000),
  /** Most spans waiting to be sent; past it (a receiver down or slow) new ones are dropped and counted. */
  DMT_OTEL_QUEUE_SIZE: wholeNumberIn(1, 100_000, 2048),
  /** Lambda: longest an invocation waits, after its answer, for its spans and metrics to be sent. */
  DMT_OTEL_FLUSH_TIMEOUT_MS: wholeNumberIn(0, 30_000, 1000),
};

type OtlpVariables = z.infer<ReturnType<typeof z.object<typeof OTLP_VARIABLES>>>;

/** What the export needs, once the variables are checked. */
export interface OtlpSettings {
  tracesUrl: string;
  metricsUrl: string;
  protocol: "http/protobuf" | "http/json";
  /** Fixed, or read for each export (Lambda: from a secret, handlers/runtime/otlp-headers.ts). */
  headers: Record<string, string> | (() => Promise<Record<string, string>>);
  timeoutMs: number;
  serviceName: string;
  metricIntervalMs: number;
  batchDelayMs: number;
  maxQueuedSpans: number;
  flushTimeoutMs: number;
}

/** The export's settings, or undefined when telemetry is off (no endpoint, or disabled). */
export function otlpSettings(env: OtlpVariables): OtlpSettings | undefined {
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const metrics = env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT;
  if (env.OTEL_SDK_DISABLED === "true" || (base ?? traces ?? metrics) === undefined) return undefined;
  const signal = (path: string) => (base === undefined ? undefined : `${base.replace(/\/+$/, "")}${path}`);
  // A signal without a URL of its own or a base goes to the other's receiver's host.
  const tracesUrl = traces ?? signal("/v1/traces") ?? new URL("/v1/traces", metrics).href;
  const metricsUrl = metrics ?? signal("/v1/metrics") ?? new URL("/v1/metrics", traces).href;
  return {
    tracesUrl,
    metricsUrl,
    protocol: env.OTEL_EXPORTER_OTLP_PROTOCOL,
    headers: parseOtlpHeaders(env.OTEL_EXPORTER_OTLP_HEADERS ?? ""),
    timeoutMs: env.OTEL_EXPORTER_OTLP_TIMEOUT,
    serviceName: env.OTEL_SERVICE_NAME || "dmt",
    metricIntervalMs: env.OTEL_METRIC_EXPORT_INTERVAL,
    batchDelayMs: env.OTEL_BSP_SCHEDULE_DELAY,
    maxQueuedSpans: env.DMT_OTEL_QUEUE_SIZE,
    flushTimeoutMs: env.DMT_OTEL_FLUSH_TIMEOUT_MS,
  };
}

/**
 * `OTEL_EXPORTER_OTLP_HEADERS`: `api-key=abc,x-team=a%20b` (the W3C Baggage form the specification
 * uses). A malformed pair fails the start without echoing the value, which may be a secret.
 */
export function parseOtlpHeaders(text: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [index, pair] of text.split(",").entries()) {
    if (pair.trim() === "") continue;
    const equals = pair.indexOf("=");
    const name = equals > 0 ? pair.slice(0, equals).trim() : "";
    let value: string | undefined;
    try {
      value = equals > 0 ? decodeURIComponent(pair.slice(equals + 1).trim()) : undefined;
    } catch {
      value = undefined;
    }
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || value === undefined || /[\r\n]/.test(value)) {
      throw new Error(
        `Invalid configuration: OTEL_EXPORTER_OTLP_HEADERS: pair ${index + 1} must be name=value (value percent-encoded)`,
      );
    }
    headers[name.toLowerCase()] = value;
  }
  return headers;
}
