import { describe, expect, it } from "vitest";
import { parseBaseConfig } from "../../../lambda/handlers/runtime/config";
import { parseLocalConfig } from "../../../lambda/local/config";

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

  it("names the local variable that is out of bounds, not whole or not a URL, and says what it must be", () => {
    const cases: [Record<string, string>, string][] = [
      [{ PORT: "70000" }, "PORT: must be a whole number from 0 to 65535"],
      [{ PORT: "abc" }, "PORT: must be a whole number from 0 to 65535"],
      [
        { DMT_SWEEP_INTERVAL_MS: "150.5" },
        "DMT_SWEEP_INTERVAL_MS: must be a whole number from 100 to 3600000",
      ],
      [{ DMT_UPSTREAM_GROQ: "ftp://x" }, "DMT_UPSTREAM_GROQ: must be an http or https URL"],
      [{ DMT_METERING: "maybe" }, "DMT_METERING: must be one of on, off"],
      [{ DMT_LOG_LEVEL: "loud" }, "DMT_LOG_LEVEL: must be one of debug, info, warn, error, silent"],
      [
        { DMT_PUBLIC_URL: "http://dmt.example" },
        "DMT_PUBLIC_URL: must be an https origin, with no path or query",
      ],
      [
        { DMT_PUBLIC_URL: "https://dmt.example/app" },
        "DMT_PUBLIC_URL: must be an https origin, with no path or query",
      ],
      [{ HOST: "" }, "HOST: must not be empty"],
    ];
    for (const [env, message] of cases) {
      expect(() => parseLocalConfig(env), JSON.stringify(env)).toThrow(`Invalid configuration: ${message}`);
    }
  });

  it("wants both TLS files locally, or neither", () => {
    expect(() => parseLocalConfig({ DMT_TLS_KEY: "k.pem" })).toThrow(
      "Invalid configuration: DMT_TLS_CERT: set both DMT_TLS_CERT and DMT_TLS_KEY, or neither",
    );
    expect(parseLocalConfig({ DMT_TLS_CERT: "c.pem", DMT_TLS_KEY: "k.pem" }).DMT_TLS_CERT).toBe("c.pem");
  });

  it("fails a Lambda function's configuration the same way", () => {
    expect(() => parseBaseConfig({ DMT_METRICS_NAMESPACE: "" })).toThrow(
      "Invalid configuration: DMT_METRICS_NAMESPACE: must not be empty",
    );
    expect(() => parseBaseConfig({ DMT_LOG_LEVEL: "loud" })).toThrow(
      "Invalid configuration: DMT_LOG_LEVEL: must be one of debug, info, warn, error, silent",
    );
    expect(parseBaseConfig({}).DMT_LOG_LEVEL).toBe("info");
  });
});
