import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Logger } from "../../lambda/core/logger";
import { secretOtlpHeaders } from "../../lambda/handlers/runtime/otlp-headers";
import type { OtlpSettings } from "../../lambda/telemetry/config";
import { openTelemetry } from "../../lambda/telemetry/hooks";
import { OtlpReceiver } from "../support/otlp-receiver";
import { chatCall, outcomeOf } from "../support/proxy-calls";
import { type SecretsEndpoint, startSecretsEndpoint } from "./lambda-runtime";

/**
 * The proxy functions' OTLP headers from a secret (`dmt:otlpHeadersSecret`): read through the AWS SDK
 * from a local Secrets Manager endpoint, sent on each export; a secret that cannot be read or parsed
 * sends none, logged without its value, and the call's after-work still ends.
 */

const ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:otlp-headers-AbCdEf";
let secrets: SecretsEndpoint;
let receiver: OtlpReceiver;
beforeAll(async () => {
  secrets = await startSecretsEndpoint();
  receiver = await OtlpReceiver.start();
});
afterAll(async () => {
  await receiver?.close();
  await secrets?.close();
});

function settings(): OtlpSettings {
  return {
    tracesUrl: `${receiver.url}/v1/traces`,
    metricsUrl: `${receiver.url}/v1/metrics`,
    protocol: "http/protobuf",
    headers: { "x-fixed": "1" },
    timeoutMs: 30_000,
    serviceName: "dmt",
    metricIntervalMs: 3_600_000,
    batchDelayMs: 1,
    maxQueuedSpans: 2048,
    flushTimeoutMs: 60_000,
  };
}

/** One call through the hook as a Lambda runs it (flushed before its after-work ends); the export's headers. */
async function exportedHeaders(lines: string[]) {
  const logger: Logger = {
    debug() {},
    info() {},
    warn: (message, fields) => lines.push(`${message} ${JSON.stringify(fields)}`),
    error: (message, fields) => lines.push(`${message} ${JSON.stringify(fields)}`),
  };
  const otlp = secretOtlpHeaders(
    settings(),
    { DMT_OTLP_HEADERS_SECRET_ARN: ARN, DMT_SECRETS_ENDPOINT: secrets.url },
    logger,
  );
  const telemetry = openTelemetry(
    { otlp, flushEachCall: true },
    { logger, metrics: { add() {} }, clock: Date.now },
  );
  const call = chatCall();
  await telemetry.hooks.after?.(call, outcomeOf({ inputTokens: 3, outputTokens: 1 }));
  await telemetry.shutdown();
  const index = receiver.spans.findIndex((s) => s.attributes["dmt.transaction_id"] === call.id);
  expect(index).toBeGreaterThanOrEqual(0);
  return receiver.requests.filter((r) => r.path === "/v1/traces").at(-1)?.headers ?? {};
}

describe("OTLP headers from a secret", () => {
  it("sends the secret's headers, percent-decoded, beside the fixed ones", async () => {
    secrets.secrets.set(ARN, { AWSCURRENT: "x-honeycomb-team=team%20key,x-dataset=dmt" });
    const headers = await exportedHeaders([]);
    expect(headers["x-honeycomb-team"]).toBe("team key");
    expect(headers["x-dataset"]).toBe("dmt");
    expect(headers["x-fixed"]).toBe("1");
    expect(secrets.reads.some((r) => r.secretId === ARN)).toBe(true);
  });

  it("a malformed secret sends none of it, and is logged without its value", async () => {
    secrets.secrets.set(ARN, { AWSCURRENT: "not a header pair with-a-secret-value" });
    const lines: string[] = [];
    const headers = await exportedHeaders(lines);
    expect(headers["x-fixed"]).toBe("1");
    expect(lines.join("\n")).toMatch(/OTLP headers secret could not be used/);
    expect(lines.join("\n")).not.toContain("with-a-secret-value");
  });

  it("a secret that cannot be read sends none of it, and the call's after-work still ends", async () => {
    secrets.failing = true;
    const lines: string[] = [];
    try {
      const headers = await exportedHeaders(lines);
      expect(headers["x-honeycomb-team"]).toBeUndefined();
      expect(lines.join("\n")).toMatch(/OTLP headers secret could not be used/);
    } finally {
      secrets.failing = false;
    }
  });
});
