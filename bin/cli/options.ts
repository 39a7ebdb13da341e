/**
 * The options of `dmt` commands: each is defined once, with what `parseArgs` needs to read it, the words
 * its help shows, and how its value is checked and typed. A command's `run` receives the typed values.
 */

/**
 * A mistake in how a command was called: one line on stderr and exit status 2, with the command's usage
 * line when the mistake is in its shape (an unknown option, a missing argument).
 */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly usage?: string,
  ) {
    super(message);
  }
}

/** What `parseArgs` gives for one option. */
export type RawValue = string | boolean | (string | boolean)[] | undefined;

export interface Option<T> {
  type: "string" | "boolean";
  multiple?: boolean;
  /** The value's placeholder in usage and help (`<id>`, `N`, `day|month`); none for a flag. */
  value?: string;
  /** Shown without brackets in the usage line. */
  required?: boolean;
  /** What the option does, for the command's help. */
  help: string;
  /** The checked value from what `parseArgs` read; throws a UsageError naming `--<name>`. */
  read(raw: RawValue, name: string): T;
}

export type Options = Record<string, Option<unknown>>;

/** The typed values of a command's options. */
export type Values<O extends Options> = { [K in keyof O]: O[K] extends Option<infer T> ? T : never };

/** Reads every option in the order they are defined, so the first problem is the one reported. */
export function readValues<O extends Options>(options: O, raw: Record<string, RawValue>): Values<O> {
  const values: Record<string, unknown> = {};
  for (const [name, option] of Object.entries(options)) values[name] = option.read(raw[name], name);
  // Each entry is its own option's read(): the mapped type says exactly that.
  return values as Values<O>;
}

/** `--name <value>`, optional. */
export function text(value: string, help: string): Option<string | undefined> {
  return { type: "string", value, help, read: (raw) => (typeof raw === "string" ? raw : undefined) };
}

/** `--name <value>` that the command cannot do without. */
export function required(value: string, help: string): Option<string> {
  return {
    type: "string",
    value,
    help,
    required: true,
    read(raw, name) {
      if (typeof raw !== "string" || raw === "") throw new UsageError(`--${name} is required`);
      return raw;
    },
  };
}

/** `--name`, a switch. */
export function flag(help: string): Option<boolean> {
  return { type: "boolean", help, read: (raw) => raw === true };
}

/** `--name <value>`, given any number of times. */
export function repeated(value: string, help: string): Option<string[] | undefined> {
  return {
    type: "string",
    multiple: true,
    value,
    help,
    read: (raw) => (Array.isArray(raw) ? raw.filter((v) => typeof v === "string") : undefined),
  };
}

/** `--name N`: digits only. */
export function wholeNumber(value: string, help: string): Option<number | undefined> {
  return {
    type: "string",
    value,
    help,
    read(raw, name) {
      if (raw === undefined) return undefined;
      if (typeof raw !== "string" || !/^\d+$/.test(raw))
        throw new UsageError(`--${name} must be a whole number`);
      return Number(raw);
    },
  };
}

/** `--name a|b|c`: one of a fixed list. */
export function oneOf<const V extends string>(choices: readonly V[], help: string): Option<V | undefined> {
  return {
    type: "string",
    value: choices.join("|"),
    help,
    read(raw, name) {
      if (raw === undefined) return undefined;
      const choice = choices.find((c) => c === raw);
      if (choice === undefined) throw new UsageError(`--${name} must be one of ${choices.join(", ")}`);
      return choice;
    },
  };
}

/** `--name <date>`: a day, or a day and time. */
export function date(value: string, help: string): Option<number | undefined> {
  return {
    type: "string",
    value,
    help,
    read(raw, name) {
      if (raw === undefined) return undefined;
      const time =
        typeof raw === "string" && /^\d{4}-\d{2}-\d{2}(T.*)?$/.test(raw) ? Date.parse(raw) : Number.NaN;
      if (Number.isNaN(time))
        throw new UsageError(`--${name} must be a date like 2027-01-31 or 2027-01-31T12:00:00Z`);
      return time;
    },
  };
}

/** `--json` and `--stack`, which every command takes. */
export const GLOBAL_OPTIONS = {
  json: flag("prints the result as JSON"),
  stack: text("<name>", "works on a deployed AWS stack instead of the local data dir (or DMT_STACK)"),
};

/** The option as the usage line and help show it: `--project <id>`, `--soft`. */
export function optionWords(name: string, option: Option<unknown>): string {
  return option.value === undefined ? `--${name}` : `--${name} ${option.value}`;
}
