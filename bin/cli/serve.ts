import { relative } from "node:path";
import { parseLocalConfig } from "../../lambda/local/config";
import { command } from "./command";
import { otherDataDir } from "./services";

/** A path as a POSIX shell word. */
function shellQuote(text: string): string {
  return /^[\w./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

/** Starts the local service and prints how to use it; it runs until a signal stops it. */
async function serve(): Promise<void> {
  const config = parseLocalConfig();
  const [{ jsonLogger }, { startEmbeddedHost }] = await Promise.all([
    import("../../lambda/core/logger"),
    import("../../lambda/local/host"),
  ]);
  const logger = jsonLogger(config.DMT_LOG_LEVEL);
  const stack = await startEmbeddedHost(config, logger);
  // The commands to copy run this same CLI with node (npx costs seconds a command) on this data dir.
  const cli = `node ${shellQuote(relative(process.cwd(), process.argv[1] ?? "bin/dmt.mjs"))} `;
  const dmtPrefix = otherDataDir(config.dataDir) ? `DMT_DATA_DIR=${shellQuote(config.dataDir)} ${cli}` : cli;
  process.stdout.write(
    [
      `dmt is running at ${stack.url}`,
      `  data dir: ${config.dataDir}`,
      "",
      `Dashboard: ${stack.dashboard.url}`,
      `  sign in as ${stack.dashboard.email} with password ${stack.dashboard.password}`,
      "  (a local development user; the password is kept in the data dir)",
      "",
      ...(stack.simulatedVendors.length > 0
        ? [`Simulated vendors (no API key set): ${stack.simulatedVendors.join(", ")}`, ""]
        : []),
      "Next:",
      ...[
        "projects create demo",
        "keys create --project demo --name laptop",
        "credits grant --project demo --usd 10",
        `members add --project demo --email ${stack.dashboard.email} --role admin   # see demo in the dashboard`,
      ].map((command) => `  ${dmtPrefix}${command}`),
      `  curl -H "Authorization: Bearer <key>" ${stack.url}/api/v1/status`,
      `  OpenAI SDK: baseURL ${stack.url}/openai/v1 with the dmt_ key`,
      "",
      "Ctrl-C stops the service cleanly.",
      "",
    ].join("\n"),
  );
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(`\n${signal}: stopping (finishing requests in flight, flushing the store)...\n`);
    await stack.close();
    process.stdout.write("Stopped.\n");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
}

/** `dmt serve` (`npm start`): the service on this machine. */
export const serveCommands = [
  command({
    name: "serve",
    summary: "runs the service locally (embedded store, vendor simulator); npm start",
    details:
      "Settings come from the environment: DMT_DATA_DIR (default ./.dmt), PORT (default 8787), a vendor's\nAPI key to call it for real (else its simulator answers); see README.",
    options: {},
    examples: ["PORT=9000 dmt serve"],
    runsUntilStopped: true,
    run: serve,
  }),
];
