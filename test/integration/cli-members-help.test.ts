import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDmt } from "../support/cli";

/** `dmt members`, `--help` on every command, `--version`, and the data-dir notice, as whole processes. */

/** Whole CLI processes, some opening a store: generous for a busy machine. */
const CLI_STEP_MS = 180_000;

let dataDir: string;
const dmt = (args: string[]) => runDmt(args, dataDir);

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "dmt-cli-members-"));
  expect((await dmt(["projects", "create", "demo"])).code).toBe(0);
}, CLI_STEP_MS);
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe("dmt --help", { timeout: CLI_STEP_MS }, () => {
  const commands = [
    ["serve"],
    ["projects", "create"],
    ["keys", "list"],
    ["credits", "grant"],
    ["credits", "ledger"],
    ["members", "add"],
    ["members", "list"],
    ["members", "remove"],
    ["prices", "list"],
  ];

  it.concurrent.each(commands)(
    "dmt %s %s --help prints its usage on stdout and exits 0",
    async (...words) => {
      const command = words.filter((w) => typeof w === "string") as string[];
      const res = await dmt([...command, "--help"]);
      expect(res).toMatchObject({ code: 0, stderr: "" });
      expect(res.stdout).toMatch(new RegExp(`^usage: dmt ${command.join(" ")}`));
    },
  );

  it("answers -h after other options too, without needing them", async () => {
    const res = await dmt(["credits", "grant", "--usd", "5", "-h"]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout).toContain("usage: dmt credits grant --project <id> --usd <amount>");
  });

  it("lists a group's commands", async () => {
    const res = await dmt(["members", "--help"]);
    expect(res).toMatchObject({ code: 0, stderr: "" });
    expect(res.stdout).toContain("dmt members add --project <id> --email <email>");
    expect(res.stdout).toContain("dmt members remove");
  });

  it("lists every command with one line each at the top", async () => {
    const res = await dmt(["--help"]);
    expect(res.code).toBe(0);
    for (const name of [
      "serve",
      "members add",
      "credits ledger",
      "keys list",
      "alerts set",
      "webhooks test",
    ]) {
      expect(res.stdout).toMatch(new RegExp(`^  dmt ${name} +\\S`, "m"));
    }
    // Every command's line says what it does (the event commands once printed "undefined").
    const lines = res.stdout.split("\n").filter((line) => line.startsWith("  dmt "));
    expect(lines.length).toBeGreaterThan(30);
    for (const line of lines) expect(line, line).toMatch(/^ {2}dmt [a-z -]+? {2,}[a-z].{8,}$/);
    expect(res.stdout).not.toContain("undefined");
  });

  it("explains a group of event commands and each of them", async () => {
    const group = await dmt(["webhooks", "--help"]);
    expect(group).toMatchObject({ code: 0, stderr: "" });
    expect(group.stdout).toContain("dmt webhooks deliveries --project <id> <webhook id>");
    expect(group.stdout).toContain("a webhook's latest deliveries");
    expect(group.stdout).not.toContain("undefined");
    const one = await dmt(["alerts", "set", "--help"]);
    expect(one).toMatchObject({ code: 0, stderr: "" });
    expect(one.stdout).toMatch(/^usage: dmt alerts set --project <id>/);
    expect(one.stdout).toContain("An alert when the balance falls below an amount");
  });

  it.concurrent.each([
    [
      ["credits", "grant", "--project", "demo", "--usd", "-5"],
      "a value starting with '-' goes after '=': --usd=<value>",
    ],
    [["credits", "ledger", "--project", "demo", "--since", "yesterday"], "unknown option --since;"],
    [["credits", "grant", "--project", "demo", "--usd"], "--usd needs a value;"],
    [["keys", "list", "--project", "demo", "--json=yes"], "--json takes no value;"],
  ])("explains refused options %j in one line, with the usage", async (args, message) => {
    const res = await dmt(args);
    expect(res).toMatchObject({ code: 2, stdout: "" });
    expect(res.stderr).toContain(message);
    expect(res.stderr).toContain(`usage: dmt ${args[0]} ${args[1]} --project <id>`);
    expect(res.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("prints the version", async () => {
    const res = await dmt(["--version"]);
    expect(res).toMatchObject({ code: 0, stdout: "dmt 0.1.0\n", stderr: "" });
  });
});

describe("dmt members", { timeout: CLI_STEP_MS }, () => {
  it("adds the development user, lists and removes them; adding twice changes nothing", async () => {
    const added = await dmt(["members", "add", "--project", "demo", "--email", "Dev@dmt.local", "--json"]);
    expect(added.code).toBe(0);
    const { membership } = JSON.parse(added.stdout);
    expect(membership).toMatchObject({ projectId: "demo", role: "viewer", email: "dev@dmt.local" });
    expect(membership.userId).toMatch(/^[0-9a-f-]{36}$/);

    const again = await dmt([
      "members",
      "add",
      "--project",
      "demo",
      "--email",
      "dev@dmt.local",
      "--role",
      "admin",
    ]);
    expect(again.stdout).toBe("dev@dmt.local is already a member of demo (viewer); nothing changed.\n");

    const listed = await dmt(["members", "list", "--project", "demo"]);
    expect(listed.stdout).toMatch(
      /^email\s+user\s+role\s+added\ndev@dmt\.local\s+[0-9a-f-]{36}\s+viewer\s+\d{4}-/,
    );

    const removed = await dmt(["members", "remove", "--project", "demo", "--email", "dev@dmt.local"]);
    expect(removed.stdout).toBe("dev@dmt.local no longer sees project demo.\n");
    expect((await dmt(["members", "list", "--project", "demo"])).stdout).toBe("(none)\n");
  });

  it.each([
    [
      ["add", "--project", "demo", "--email", "dev@dmt.local", "--role", "owner"],
      2,
      "dmt: usage: --role must be one of viewer, admin",
    ],
    [
      ["add", "--project", "demo", "--email", "not-an-email"],
      1,
      "dmt: Invalid field 'email': must be an email address",
    ],
    [
      ["add", "--project", "demo", "--email", "ghost@example.com"],
      1,
      "dmt: No dashboard user has the email ghost@example.com; create the user in the identity provider first.",
    ],
    [["add", "--project", "nope", "--email", "dev@dmt.local"], 1, "dmt: Project 'nope' does not exist."],
    [
      ["remove", "--project", "demo", "--email", "dev@dmt.local"],
      1,
      "dmt: dev@dmt.local is not a member of 'demo'.",
    ],
    [["add", "--project", "demo"], 2, "dmt: usage: --email is required"],
  ])("refuses members %j: exit %i, one line on stderr", async (args, code, message) => {
    const res = await dmt(["members", ...args]);
    expect(res).toMatchObject({ code, stdout: "", stderr: `${message}\n` });
  });
});

describe("the data dir notice", { timeout: CLI_STEP_MS }, () => {
  // `script` gives the command a terminal, as a person running it has.
  const inTerminal = (command: string, env: Record<string, string>) =>
    new Promise<string>((resolve, reject) => {
      execFile(
        "script",
        ["-qec", command, "/dev/null"],
        { env: { ...process.env, ...env } },
        (err, stdout) => (err ? reject(err) : resolve(stdout)),
      );
    });
  const dmtPath = join(import.meta.dirname, "../../bin/dmt.mjs");

  it("names another data dir than the default to a person at a terminal", async () => {
    const out = await inTerminal(`${process.execPath} ${dmtPath} projects list`, { DMT_DATA_DIR: dataDir });
    expect(out).toContain(`dmt: data dir ${dataDir}`);
  });

  it("stays out of output that a script reads", async () => {
    const res = await dmt(["projects", "list"]);
    expect(res.stderr).toBe("");
  });
});
