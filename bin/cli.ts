import { parseArgs } from "node:util";
import { ApiError } from "../lambda/core/errors";
import { parseLocalConfig } from "../lambda/local/config";
import { alertCommands } from "./cli/alerts";
import { budgetCommands } from "./cli/budgets";
import type { Command } from "./cli/command";
import { compactionCommands } from "./cli/compaction";
import { creditCommands } from "./cli/credits";
import { keyCommands } from "./cli/keys";
import { memberCommands } from "./cli/members";
import { UsageError } from "./cli/options";
import { priceCommands } from "./cli/prices";
import { projectCommands } from "./cli/projects";
import { reconcileCommands } from "./cli/reconcile";
import { retentionCommands } from "./cli/retention";
import { serveCommands } from "./cli/serve";
import { servicesOpener } from "./cli/services";
import { settingsCommands } from "./cli/settings";
import { vendorKeyCommands } from "./cli/vendor-keys";
import { webhookCommands } from "./cli/webhooks";

/**
 * `dmt`: the local server and the operator commands, one module per group under bin/cli/. Every
 * command works whether or not the server runs (it shares the running server's store), takes `--json`
 * and `--help`, and fails with one line and exit 1 (2 for a usage error).
 *
 * Start time: the command modules import only light modules; a command loads what it needs when it
 * runs (the store's adapters, the price catalogue, the server), so `--help` loads almost nothing.
 * `--version` is answered before this module loads (cli-entry.ts).
 */

/** Every command, in the order `dmt --help` lists them. */
const COMMANDS: Command[] = [
  ...serveCommands,
  ...projectCommands,
  ...keyCommands,
  ...budgetCommands,
  ...creditCommands,
  ...memberCommands,
  ...vendorKeyCommands,
  ...settingsCommands,
  ...retentionCommands,
  ...compactionCommands,
  ...priceCommands,
  ...reconcileCommands,
  ...alertCommands,
  ...webhookCommands,
];
const byName = new Map(COMMANDS.map((c) => [c.name, c]));

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => `dmt ${c.name}`.length));
  return [
    "dmt: metering gateway for language-model vendors",
    "",
    ...COMMANDS.map((c) => `  ${`dmt ${c.name}`.padEnd(width)}  ${c.summary}`),
    "",
    "'dmt <command> --help' shows a command's options. Every command takes --json, and --stack <name>",
    "(or DMT_STACK) to work on a deployed AWS stack instead of the local data dir.",
    "",
    "Environment: DMT_DATA_DIR (default ./.dmt), PORT (default 8787); see README.",
  ].join("\n");
}

/** One line for what `parseArgs` refused, in our words: its own messages run to three lines. */
function argumentProblem(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const code = err instanceof Error && "code" in err ? err.code : undefined;
  const option = /'(-{1,2}[^' =]+)/.exec(message)?.[1];
  if (option !== undefined && code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") return `unknown option ${option}`;
  if (option !== undefined && code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    // `--usd -5`: parseArgs will not take a value that looks like an option.
    if (message.includes("ambiguous")) return `a value starting with '-' goes after '=': ${option}=<value>`;
    if (message.includes("argument missing")) return `${option} needs a value`;
    if (message.includes("does not take an argument")) return `${option} takes no value`;
  }
  return (message.split("\n")[0] ?? "").replace(/\.$/, "");
}

const HELP = new Set(["--help", "-h", "help"]);

/** Runs a command line; resolves with the exit status, or -1 for a service that keeps running. */
async function main(argv: string[]): Promise<number> {
  const [first, second] = argv;
  if (first === undefined || HELP.has(first)) {
    process.stdout.write(`${help()}\n`);
    return first === undefined ? 2 : 0;
  }
  // One-word commands (`reconcile`) before two-word ones (`keys create`).
  const single = byName.get(first);
  const name = single ? first : `${first} ${second ?? ""}`.trim();
  const command = single ?? byName.get(name);
  const wantsHelp = argv.slice(1).some((a) => HELP.has(a));
  if (!command) {
    // `dmt keys --help`: the group's commands.
    const group = COMMANDS.filter((c) => c.name.startsWith(`${first} `));
    if (group.length > 0 && (second === undefined || wantsHelp)) {
      const lines = group.map((c) => `  ${c.usage}\n      ${c.summary}`);
      process.stdout.write(`dmt ${first} commands:\n${lines.join("\n")}\n`);
      return wantsHelp ? 0 : 2;
    }
    throw new UsageError(`unknown command '${name}'; run 'dmt --help'`);
  }
  if (wantsHelp) {
    process.stdout.write(command.help());
    return 0;
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv.slice(single ? 1 : 2),
      options: command.options,
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${argumentProblem(err)}; usage: ${command.usage}`);
  }
  if (parsed.positionals.length !== command.argCount) throw new UsageError(command.usage);

  const { stack, json } = parsed.values;
  const stackName = (typeof stack === "string" ? stack : undefined) ?? (process.env.DMT_STACK || undefined);
  const services = servicesOpener(stackName, parseLocalConfig());
  try {
    const out = await command.execute(
      parsed.values,
      parsed.positionals,
      { open: services.open, stackName },
      json === true,
    );
    if (out === undefined) return -1; // a service: it keeps running
    process.stdout.write(`${out}\n`);
    return 0;
  } finally {
    await services.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    const usage = err instanceof UsageError;
    const message = err instanceof ApiError || err instanceof Error ? err.message : String(err);
    process.stderr.write(`dmt: ${usage ? "usage: " : ""}${message}\n`);
    process.exitCode = usage ? 2 : 1;
  },
);
