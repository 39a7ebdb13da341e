import { describe, expect, it } from "vitest";
import { GATEWAY_STREAM_IDLE_MS, parseProxyConfig } from "../../../../lambda/handlers/runtime/config";

const PROXY_ENV = {
  DMT_VENDORS: "openai",
  DMT_VENDOR_KEY_SECRET_ARN_OPENAI: "arn:k",
  DMT_ORIGIN_SECRET_ARN: "arn:o",
};

describe("the Lambda proxy's upstream idle timeout", () => {
  it("gives up on a silent vendor before API Gateway ends the idle stream, by default", () => {
    const idle = parseProxyConfig(PROXY_ENV).DMT_UPSTREAM_IDLE_TIMEOUT_MS;
    expect(idle).toBe(270_000);
    expect(idle).toBeLessThan(GATEWAY_STREAM_IDLE_MS);
  });

  it("refuses a setting the gateway would cut first, naming the variable", () => {
    expect(
      parseProxyConfig({ ...PROXY_ENV, DMT_UPSTREAM_IDLE_TIMEOUT_MS: "290000" }).DMT_UPSTREAM_IDLE_TIMEOUT_MS,
    ).toBe(290_000);
    for (const late of ["290001", "300000", "600000"]) {
      expect(() => parseProxyConfig({ ...PROXY_ENV, DMT_UPSTREAM_IDLE_TIMEOUT_MS: late }), late).toThrow(
        /DMT_UPSTREAM_IDLE_TIMEOUT_MS/,
      );
    }
  });
});

describe("the Lambda proxy's compute", () => {
  it("is standard unless the stack says managed instances, and an unknown value fails the start, naming it", () => {
    expect(parseProxyConfig(PROXY_ENV).DMT_PROXY_COMPUTE).toBe("standard");
    expect(parseProxyConfig({ ...PROXY_ENV, DMT_PROXY_COMPUTE: "managed-instances" }).DMT_PROXY_COMPUTE).toBe(
      "managed-instances",
    );
    expect(() => parseProxyConfig({ ...PROXY_ENV, DMT_PROXY_COMPUTE: "fargate" })).toThrow(
      /DMT_PROXY_COMPUTE/,
    );
  });
});
