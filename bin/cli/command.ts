import { GLOBAL_OPTIONS, type Options, optionWords, type RawValue, readValues, type Values } from "./options";
import type { Services } from "./services";

/** What every command's `run` gets besides its own values. */
export interface Context {
  /** The store and the rest, opened on first use (commands like `prices list` need none). */
  open(): Promise<Services>;
  /** The AWS stack the command works on (`--stack`, DMT_STACK); undefined for the local data dir. */
  stackName: string | undefined;
}

/** A command as its module defines it. */
export interface CommandSpec<O extends Options, A extends readonly string[], R> {
  /** `keys create`; one word for `reconcile`. */
  name: string;
  /** One line for `dmt --help`, lower case, no full stop. */
  summary: string;
  /** What the command's help says beyond the summary (optional). */
  details?: string;
  /** The positional arguments' placeholders, in order: `["<key id>"]`. */
  args?: A;
  options: O;
  /** Command lines the help shows as examples. */
  examples: string[];
  /** A service (`serve`): it prints its own banner, takes neither --json nor --stack. */
  runsUntilStopped?: true;
  run(input: Context & { values: Values<O>; args: { [I in keyof A]: string } }): Promise<R>;
  /** Human output; --json prints the returned value as JSON instead. */
  print?(result: R): string | Promise<string>;
}

/** A command as the entry runs it: its types are settled inside. */
export interface Command {
  name: string;
  summary: string;
  /** `dmt keys create --project <id> ... [--json]`, made from the options. */
  usage: string;
  /** The options for `parseArgs`, the common ones included. */
  options: Options;
  /** The positional arguments' placeholders. */
  args: readonly string[];
  /** The whole `--help` text. */
  help(): string;
  /** Runs with what `parseArgs` read; resolves with the text to print (none for a service). */
  execute(
    raw: Record<string, RawValue>,
    positionals: string[],
    context: Context,
    json: boolean,
  ): Promise<string | undefined>;
}

/** The usage line: required options, then positional arguments, then the optional options. */
function usageOf(name: string, args: readonly string[], options: Options, json: boolean): string {
  const entries = Object.entries(options);
  const words = [
    ...entries.filter(([, o]) => o.required).map(([n, o]) => optionWords(n, o)),
    ...args,
    ...entries
      .filter(([, o]) => !o.required)
      .map(([n, o]) => `[${optionWords(n, o)}]${o.multiple ? "..." : ""}`),
    ...(json ? ["[--json]"] : []),
  ];
  return ["dmt", name, ...words].join(" ");
}

type HelpWords = Pick<
  CommandSpec<Options, [], unknown>,
  "summary" | "details" | "examples" | "runsUntilStopped"
>;

function helpOf(usage: string, spec: HelpWords, options: Options): string {
  const rows = Object.entries(spec.runsUntilStopped ? options : { ...options, ...GLOBAL_OPTIONS }).map(
    ([name, option]) => [
      optionWords(name, option),
      option.required ? `${option.help} (required)` : option.help,
    ],
  );
  rows.push(["-h, --help", "shows this help"]);
  const width = Math.max(...rows.map(([words]) => (words ?? "").length));
  return [
    `usage: ${usage}`,
    "",
    `${spec.summary[0]?.toUpperCase()}${spec.summary.slice(1)}.`,
    ...(spec.details ? ["", spec.details] : []),
    "",
    "Options:",
    ...rows.map(([words, help]) => `  ${(words ?? "").padEnd(width)}  ${help}`),
    "",
    spec.examples.length === 1 ? "Example:" : "Examples:",
    ...spec.examples.map((line) => `  ${line}`),
    "",
  ].join("\n");
}

/** A command from its definition: usage and help are made from the same options it parses. */
export function command<const O extends Options, const A extends readonly string[] = [], R = unknown>(
  spec: CommandSpec<O, A, R>,
): Command {
  const args: readonly string[] = spec.args ?? [];
  const usage = usageOf(spec.name, args, spec.options, !spec.runsUntilStopped);
  return {
    name: spec.name,
    summary: spec.summary,
    usage,
    options: { ...spec.options, ...GLOBAL_OPTIONS },
    args,
    help: () => helpOf(usage, spec, spec.options),
    async execute(raw, positionals, context, json) {
      const values = readValues(spec.options, raw);
      // The entry checked the count: one string per placeholder.
      const result = await spec.run({ ...context, values, args: positionals as { [I in keyof A]: string } });
      if (spec.runsUntilStopped) return undefined;
      return json || !spec.print ? JSON.stringify(result, null, 2) : spec.print(result);
    },
  };
}
