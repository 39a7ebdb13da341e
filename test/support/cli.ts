import { type ChildProcess, execFile, spawn } from "node:child_process";
import { join } from "node:path";

const DMT = join(import.meta.dirname, "../../bin/dmt.mjs");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `dmt <args>` as a child process on a data dir, with optional stdin and extra environment.
 * Asynchronous: a server in this process must keep answering.
 */
export function runDmt(
  args: string[],
  dataDir: string,
  options: { input?: string; env?: Record<string, string> } = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [DMT, ...args],
      { env: { ...process.env, DMT_DATA_DIR: dataDir, DMT_LOG_LEVEL: "warn", ...options.env } },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    child.stdin?.end(options.input ?? "");
  });
}

/** `dmt <args> --json`, parsed; throws with the CLI's stderr if it failed. */
export async function dmtJson<T>(args: string[], dataDir: string): Promise<T> {
  const result = await runDmt([...args, "--json"], dataDir);
  if (result.code !== 0) throw new Error(`dmt ${args.join(" ")} failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

export interface ServeProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Sends a signal and resolves with the exit code. */
  stop(signal: NodeJS.Signals): Promise<number | null>;
}

/**
 * `dmt serve` on port 0 as a child process (with node's `execArgv`, and from another checkout's `bin`
 * for a benchmark's baseline); resolves once it prints its URL.
 */
export function startDmtServe(dataDir: string, execArgv: string[] = [], bin = DMT): Promise<ServeProcess> {
  const child = spawn(process.execPath, [...execArgv, bin, "serve"], {
    env: { ...process.env, DMT_DATA_DIR: dataDir, PORT: "0", DMT_LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /dmt is running at (\S+)/.exec(output)?.[1];
      if (url) {
        child.stdout?.off("data", onData);
        child.stdout?.on("data", (more: Buffer) => {
          output += more.toString();
        });
        resolve({
          url,
          child,
          output: () => output,
          stop(signal) {
            child.kill(signal);
            return exited;
          },
        });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    void exited.then((code) => reject(new Error(`dmt serve exited (${code}) before starting:\n${output}`)));
  });
}
