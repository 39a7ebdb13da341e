import { Logger as PowertoolsLogger } from "@aws-lambda-powertools/logger";
import { MetricUnit, Metrics as PowertoolsMetrics } from "@aws-lambda-powertools/metrics";
import type { Context } from "aws-lambda";
import { type Logger, loggerOver } from "../../core/logger";
import type { Metrics } from "../../core/metrics";
import type { BaseConfig } from "./config";

/**
 * Logs and metrics of one Lambda function through Powertools, behind our `Logger` interface: JSON log
 * lines with the function's name, cold start and request id; metrics buffered during an invocation and
 * written as EMF lines at its end, which CloudWatch turns into metrics (no API call, no extra latency).
 */
export interface LambdaTelemetry {
  logger: Logger;
  /** Counters and timings, published as CloudWatch Embedded Metric Format lines. */
  metrics: Metrics;
  /** Tags the invocation's log lines with its request id. */
  begin(context: Context): void;
  /** Publishes the metrics the invocation added, if any. */
  end(): void;
}

/** `function` names the handler in every log line and metric (`proxy`, `data-api`, `sweeper`...). */
export function lambdaTelemetry(config: BaseConfig, fn: string): LambdaTelemetry {
  const powertools = new PowertoolsLogger({
    serviceName: "dmt",
    logLevel: config.DMT_LOG_LEVEL === "silent" ? "SILENT" : config.DMT_LOG_LEVEL,
    persistentKeys: { function: fn },
  });
  // One buffer per set of a metric's own dimensions (an EMF line carries one set): a proxy serving
  // several vendors publishes a line per vendor its invocation's metrics name.
  const buffers = new Map<string, PowertoolsMetrics>();
  const buffer = (extra: Record<string, string> = {}): PowertoolsMetrics => {
    const key = JSON.stringify(extra);
    let metrics = buffers.get(key);
    if (!metrics) {
      metrics = new PowertoolsMetrics({
        namespace: config.DMT_METRICS_NAMESPACE,
        serviceName: "dmt",
        defaultDimensions: { function: fn, ...extra },
        // Its own warnings (no metrics to publish...) go through our logger.
        logger: powertools,
      });
      buffers.set(key, metrics);
    }
    return metrics;
  };
  const logger = loggerOver((level, message, fields) => powertools[level](message, fields ?? {}));
  return {
    logger,
    metrics: {
      add: (name, unit, value, extra) => buffer(extra).addMetric(name, MetricUnit[unit], value),
    },
    begin: (context) => powertools.addContext(context),
    end: () => {
      for (const metrics of buffers.values()) {
        if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
      }
    },
  };
}

/**
 * Every function's invocation: its log lines tagged with the request id, its metrics published at
 * its end. The context is optional, as in hono's own handler: Lambda always passes one.
 */
export function withTelemetry<E, R>(
  telemetry: Pick<LambdaTelemetry, "begin" | "end">,
  handler: (event: E, context?: Context) => Promise<R>,
): (event: E, context?: Context) => Promise<R> {
  return async (event, context) => {
    if (context) telemetry.begin(context);
    try {
      return await handler(event, context);
    } finally {
      telemetry.end();
    }
  };
}
