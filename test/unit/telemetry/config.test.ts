import { describe, expect, it } from "vitest";
import * as z from "zod/mini";
import { parseEnv } from "../../../lambda/core/config";
import { OTLP_VARIABLES, otlpSettings, parseOtlpHeaders } from "../../../lambda/telemetry/config";

/** The variables as both hosts check them at start. */
const settings = (env: Record<string, string>) => otlpSettings(parseEnv(z.object(OTLP_VARIABLES), env));

describe("OpenTelemetry configuration", () => {
  it("is off without an endpoint, and when OTEL_SDK_DISABLED says so", () => {
    expect(settings({})).toBeUndefined();
    expect(
      settings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_SDK_DISABLED: "true" }),
    ).toBeUndefined();
  });

  it("adds the signal paths to the base endpoint, defaulting to http/protobuf", () => {
    expect(settings({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://otlp.example.com/otlp/" })).toMatchObject({
      tracesUrl: "https://otlp.example.com/otlp/v1/traces",
      metricsUrl: "https://otlp.example.com/otlp/v1/metrics",
      protocol: "http/protobuf",
      headers: {},
      timeoutMs: 10_000,
      serviceName: "dmt",
      maxQueuedSpans: 2048,
    });
  });

  it("uses signal endpoints as they are, over the base", () => {
    expect(
      settings({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://traces:9999/custom",
      }),
    ).toMatchObject({
      tracesUrl: "http://traces:9999/custom",
      metricsUrl: "http://collector:4318/v1/metrics",
    });
    expect(settings({ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: "http://m:1/x" })).toMatchObject({
      metricsUrl: "http://m:1/x",
      tracesUrl: "http://m:1/v1/traces",
    });
  });

  it("takes http/json, and refuses grpc or another protocol naming the variable", () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    expect(settings({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })?.protocol).toBe("http/json");
    expect(() => settings({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(
      /OTEL_EXPORTER_OTLP_PROTOCOL: must be one of http\/protobuf, http\/json/,
    );
  });

  it("refuses an endpoint that is not an http URL, and a timeout out of bounds", () => {
    expect(() => settings({ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4317" })).toThrow(
      /OTEL_EXPORTER_OTLP_ENDPOINT/,
    );
    expect(() =>
      settings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_TIMEOUT: "0" }),
    ).toThrow(/OTEL_EXPORTER_OTLP_TIMEOUT/);
    expect(() =>
      settings({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", DMT_OTEL_QUEUE_SIZE: "-1" }),
    ).toThrow(/DMT_OTEL_QUEUE_SIZE/);
  });

  it("parses OTEL_EXPORTER_OTLP_HEADERS, percent-decoding values", () => {
    expect(parseOtlpHeaders("api-key=abc%3D%3D, X-Team = a%20b,,")).toEqual({
      "api-key": "abc==",
      "x-team": "a b",
    });
    expect(parseOtlpHeaders("")).toEqual({});
  });

  it("refuses a malformed header pair without echoing its value", () => {
    for (const bad of [
      "novalue",
      "=secret-value",
      "bad name=secret-value",
      "k=secret-value%E0%A4%A",
      "k=a%0Asecret-value",
    ]) {
      const error = (() => {
        try {
          parseOtlpHeaders(`ok=1,${bad}`);
        } catch (err) {
          return err as Error;
        }
        return undefined;
      })();
      expect(error?.message).toMatch(/OTEL_EXPORTER_OTLP_HEADERS: pair 2/);
      expect(error?.message).not.toContain("secret-value");
    }
  });
});
