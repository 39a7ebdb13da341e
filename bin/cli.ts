import { parseArgs } from "node:util";
import { parseLocalConfig } from "../lambda/local/config";
import { COMMANDS } from "./cli/commands";
import { UsageError } from "./cli/options";
import { servicesOpener } from "./cli/services";

/**
 * `dmt`: the local server and the operator commands, one module per group under bin/cli/. Every
 * command works whether or not the server runs (it shares the running server's store), takes `--json`
 * and `--help`, and fails with one line and exit 1 (2 for a usage error).
 *
 * Start time: the command modules import only light modules; a command loads what it needs when it
 * runs (the store's adapters, the price catalogue, the server), so `--help` loads almost nothing.
 * `--version` is answered before this module loads (cli-entry.ts).
 */

const byName = new Map(COMMANDS.map((c) => [c.name, c]));

function help(): string {
  const width = Math.max(...COMMANDS.map((c) => `dmt ${c.name}`.length));
  return [
    "dmt: metering gateway for language-model vendors",
    "",
    ...COMMANDS.map((c) => `  ${`dmt ${c.name}`.padEnd(width)}  ${c.summary}`),
    "",
    "'dmt <command> --help' shows a command's options and examples. Every command takes --json, and",
    "--stack <name> (or DMT_STACK) to work on a deployed AWS stack instead of the local data dir.",
    "",
    "One argument style: --project <id> names the project a command works in, and the item it acts on",
    "(a key, budget, webhook, alert rule) comes after the command: dmt keys revoke --project demo laptop.",
    "Keys and budgets, whose ids are unique, may leave --project out; a key may be named by its name",
    "where no other key of its project has it.",
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

/**
 * `dmt --stack Dmt keys list` as `dmt keys list --stack Dmt`: the options every command takes may come
 * before the command's words, as the README's AWS examples write them.
 */
function commandFirst(argv: string[]): string[] {
  let i = 0;
  for (;;) {
    const word = argv[i];
    if (word === "--json" || word?.startsWith("--stack=")) i += 1;
    else if (word === "--stack" && argv[i + 1] !== undefined) i += 2;
    else return [...argv.slice(i), ...argv.slice(0, i)];
  }
}

async function main(words: string[]): Promise<number> {
  const argv = commandFirst(words);
  const [first, second] = argv;
  if (first === undefined || HELP.has(first)) {
    process.stdout.write(`${help()}\n`);
    return first === undefined ? 2 : 0;
  }
  // One-word commands (`reconcile`) before two-word ones (`keys create`), then three (`billing stripe connect`).
  const single = byName.get(first);
  const third = single ? undefined : byName.get(argv.slice(0, 3).join(" "));
  const commandWords = single ? 1 : third ? 3 : 2;
  const name = single ? first : third ? argv.slice(0, 3).join(" ") : `${first} ${second ?? ""}`.trim();
  const command = single ?? third ?? byName.get(name);
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
      args: argv.slice(commandWords),
      options: command.options,
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(argumentProblem(err), command.usage);
  }
  const { positionals } = parsed;
  const missing = command.args[positionals.length];
  if (missing !== undefined) throw new UsageError(`missing ${missing}`, command.usage);
  if (positionals.length > command.args.length) {
    throw new UsageError(`unexpected argument '${positionals[command.args.length]}'`, command.usage);
  }

  const { stack, json } = parsed.values;
  const stackName = (typeof stack === "string" ? stack : undefined) ?? (process.env.DMT_STACK || undefined);
  const services = servicesOpener(stackName, parseLocalConfig());
  try {
    const out = await command.execute(
      parsed.values,
      positionals,
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
    // One line, "usage" said once: before the problem, or before the usage line that follows it.
    if (err instanceof UsageError) {
      const line = err.usage === undefined ? `usage: ${err.message}` : `${err.message}; usage: ${err.usage}`;
      process.stderr.write(`dmt: ${line}\n`);
      process.exitCode = 2;
      return;
    }
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`dmt: ${message}\n`);
    process.exitCode = 1;
  },
);
