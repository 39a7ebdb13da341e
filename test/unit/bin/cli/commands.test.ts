import { parseArgs } from "node:util";
import { describe, expect, it } from "vitest";
import { COMMANDS } from "../../../../bin/cli/commands";
import { readValues } from "../../../../bin/cli/options";

/**
 * Every `dmt` command's help is made from its definitions: each option explained, and examples that the
 * command's own parser accepts (so an example cannot drift from the options it shows).
 */

/** An example's words after `dmt`, as a POSIX shell splits them: no `VAR=x` prefix, `< file`, `> file` or `# note`. */
function words(example: string): string[] {
  const all = [...example.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? "");
  const start = all.indexOf("dmt");
  const end = all.findIndex((word) => word === "<" || word === ">" || word.startsWith("#"));
  return all.slice(start + 1, end === -1 ? undefined : end);
}

describe.each(COMMANDS.map((c) => [c.name, c] as const))("dmt %s --help", (name, command) => {
  const help = command.help();

  it("starts with the usage line and explains every option", () => {
    expect(help.startsWith(`usage: ${command.usage}\n`)).toBe(true);
    expect(command.usage.startsWith(`dmt ${name}`)).toBe(true);
    const options = help.slice(help.indexOf("\nOptions:\n"), help.indexOf("\nExample"));
    for (const option of Object.keys(command.options)) {
      if (command.name === "serve") break; // a service takes no options of its own
      expect(options, option).toMatch(new RegExp(`^  --${option}\\b.*? {2,}[a-z(].{5,}$`, "m"));
    }
    expect(options).toContain("-h, --help");
  });

  it("gives examples that its parser accepts", () => {
    const examples = help
      .slice(help.search(/\nExamples?:\n/))
      .split("\n")
      .filter((line) => line.startsWith("  "));
    expect(examples.length).toBeGreaterThan(0);
    for (const example of examples) {
      const all = words(example);
      const commandWords = name.split(" ").length;
      expect(all.slice(0, commandWords).join(" "), example).toBe(name);
      const args = all.slice(commandWords);
      const parsed = parseArgs({ args, options: command.options, allowPositionals: true, strict: true });
      expect(parsed.positionals, example).toHaveLength(command.args.length);
      expect(() => readValues(command.options, parsed.values), example).not.toThrow();
    }
  });
});

it("lists each command once", () => {
  const names = COMMANDS.map((c) => c.name);
  expect(new Set(names).size).toBe(names.length);
});
