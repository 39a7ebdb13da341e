/**
 * One structured JSON logger. Libraries take the `Logger` interface. Callers pass only fields they
 * chose: keys, vendor keys and bodies are never handed to a logger.
 */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

const LEVELS = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 } as const;
export const LOG_LEVELS = ["debug", "info", "warn", "error", "silent"] as const;
export type LogLevel = keyof typeof LEVELS;
export type LineLevel = Exclude<LogLevel, "silent">;

/**
 * A `Logger` over one writer of lines: the single way a logger is made. Two writers exist: JSON lines
 * (`jsonLogger`, the local host and the CLI) and Powertools (`handlers/runtime/telemetry.ts`, every
 * Lambda function); the local warehouse worker's forwards its lines to the server's JSON one.
 */
export function loggerOver(
  line: (level: LineLevel, message: string, fields?: Record<string, unknown>) => void,
): Logger {
  const at = (level: LineLevel) => (message: string, fields?: Record<string, unknown>) =>
    line(level, message, fields);
  return { debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}

export function jsonLogger(
  level: LogLevel = "info",
  write: (line: string) => void = (l) => process.stderr.write(l),
): Logger {
  const threshold = LEVELS[level];
  return loggerOver((lvl, message, fields) => {
    if (LEVELS[lvl] < threshold) return;
    write(`${JSON.stringify({ time: new Date().toISOString(), level: lvl, message, ...fields })}\n`);
  });
}

export const silentLogger: Logger = jsonLogger("silent");

/** Error details safe to log: name and message, never the request that caused them. */
export function errorFields(err: unknown): Record<string, unknown> {
  return err instanceof Error ? { error: err.name, detail: err.message } : { error: String(err) };
}
