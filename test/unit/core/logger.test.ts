import { describe, expect, it } from "vitest";
import { jsonLogger, loggerOver } from "../../../lambda/core/logger";

describe("logger", () => {
  it("hands every level, message and fields to the one writer", () => {
    const lines: unknown[] = [];
    const logger = loggerOver((level, message, fields) => lines.push([level, message, fields]));
    logger.debug("a");
    logger.error("b", { n: 1 });
    expect(lines).toEqual([
      ["debug", "a", undefined],
      ["error", "b", { n: 1 }],
    ]);
  });

  it("writes JSON lines at or above its level only", () => {
    const lines: string[] = [];
    const logger = jsonLogger("warn", (line) => lines.push(line));
    logger.info("dropped");
    logger.warn("kept", { vendor: "groq" });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? "")).toMatchObject({ level: "warn", message: "kept", vendor: "groq" });
  });
});
