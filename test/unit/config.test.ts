import { describe, expect, it } from "vitest";
import { parseBaseConfig } from "../../lambda/handlers/runtime/config";
import { parseLocalConfig } from "../../lambda/local/config";

// Both hosts parse through the one mechanism in core/config.ts: a bad value fails naming its variable.
describe("configuration", () => {
  it("gives the local host its defaults", () => {
    const config = parseLocalConfig({ DMT_DATA_DIR: "some/dir" });
    expect(config.PORT).toBe(8787);
    expect(config.HOST).toBe("127.0.0.1");
    expect(config.DMT_METERING).toBe("on");
    expect(config.DMT_WAREHOUSE_FLUSH_MS).toBe(2000);
    expect(config.dataDir.endsWith("some/dir")).toBe(true);
  });

  it("names the local variable that is out of bounds, not whole or not a URL", () => {
    expect(() => parseLocalConfig({ PORT: "70000" })).toThrow(/^Invalid configuration: PORT: /);
    expect(() => parseLocalConfig({ DMT_SWEEP_INTERVAL_MS: "150.5" })).toThrow(/DMT_SWEEP_INTERVAL_MS/);
    expect(() => parseLocalConfig({ DMT_UPSTREAM_GROQ: "ftp://x" })).toThrow(/DMT_UPSTREAM_GROQ/);
    expect(() => parseLocalConfig({ DMT_METERING: "maybe" })).toThrow(/DMT_METERING/);
  });

  it("wants both TLS files locally, or neither", () => {
    expect(() => parseLocalConfig({ DMT_TLS_KEY: "k.pem" })).toThrow(
      "Invalid configuration: DMT_TLS_CERT: set both DMT_TLS_CERT and DMT_TLS_KEY, or neither",
    );
    expect(parseLocalConfig({ DMT_TLS_CERT: "c.pem", DMT_TLS_KEY: "k.pem" }).DMT_TLS_CERT).toBe("c.pem");
  });

  it("fails a Lambda function's configuration the same way", () => {
    expect(() => parseBaseConfig({ DMT_METRICS_NAMESPACE: "" })).toThrow(
      /^Invalid configuration: DMT_METRICS_NAMESPACE: /,
    );
    expect(parseBaseConfig({}).DMT_LOG_LEVEL).toBe("info");
  });
});
