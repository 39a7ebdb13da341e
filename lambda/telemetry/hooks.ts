import type { ProxyHooks } from "../core/call";
import { errorFields, type Logger } from "../core/logger";
import type { Metrics } from "../core/metrics";
import type { OtlpSettings } from "./config";
import { ExportTrouble, type TelemetryExport } from "./export";

/**
 * Each proxied call as an OpenTelemetry span and GenAI metrics, sent over OTLP/HTTP (docs/telemetry.md).
 * Everything happens in `after`, once the client has its answer: the span is made then, with the
 * call's own start and end times, so telemetry adds nothing to a call's latency and nothing it does
 * can fail a call. The SDK is imported here only when an endpoint is set: with none, this module and
 * export.ts are all that loads.
 */

export interface TelemetrySettings {
  otlp: OtlpSettings;
  /**
   * Lambda: send each call's spans and metrics at the end of its after-work, since a frozen container
   * may never run again (bounded by `otlp.flushTimeoutMs`). The local host sends in batches.
   */
  flushEachCall: boolean;
}

export interface OpenTelemetry {
  hooks: ProxyHooks;
  /** Sends what waits, bounded by the flush timeout. */
  flush(): Promise<void>;
  /** Sends what waits and stops the exporters: a clean shutdown. */
  shutdown(): Promise<void>;
}

export function openTelemetry(
  settings: TelemetrySettings,
  deps: { logger: Logger; metrics: Metrics; clock: () => number },
): OpenTelemetry {
  const trouble = new ExportTrouble(deps);
  // Loaded at once (a Lambda's init, the host's start), so that the first call's after-work finds it.
  const loaded: Promise<TelemetryExport | undefined> = import("./otel-sdk").then(
    (sdk) => sdk.startExport(settings.otlp, trouble),
    (err: unknown) => {
      deps.logger.error("OpenTelemetry could not start: calls are not traced", errorFields(err));
      return undefined;
    },
  );
  const bounded = async (work: (sdk: TelemetryExport) => Promise<void>) => {
    const sdk = await loaded;
    if (!sdk) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      work(sdk),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, settings.otlp.flushTimeoutMs);
        timer.unref();
      }),
    ]);
    clearTimeout(timer);
  };
  return {
    hooks: {
      async after(call, outcome) {
        try {
          const sdk = await loaded;
          sdk?.record(call, outcome);
          if (settings.flushEachCall) await bounded((s) => s.flush());
        } catch (err) {
          deps.logger.warn("OpenTelemetry could not record a call", {
            ...errorFields(err),
            endpoint: call.endpoint,
          });
        }
      },
    },
    flush: () => bounded((sdk) => sdk.flush()),
    async shutdown() {
      await bounded((sdk) => sdk.shutdown());
    },
  };
}
