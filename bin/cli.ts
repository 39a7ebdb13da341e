import { type ParseArgsConfig, parseArgs } from "node:util";
import { createKey, createProject, keyView, revokeKey } from "../lambda/core/accounts";
import { ApiError } from "../lambda/core/errors";
import { jsonLogger } from "../lambda/core/logger";
import type { Store } from "../lambda/core/ports";
import { parseLocalConfig } from "../lambda/local/config";
import { openLocalStore, startLocalStack } from "../lambda/local/stack";

/**
 * `dmt`: the local server and the operator commands. Every command works whether or not the server
 * runs (it shares the running server's store), takes `--json`, and fails with one line and exit 1
 * (2 for a usage error).
 */

class UsageError extends Error {}

interface Command {
  usage: string;
  options: ParseArgsConfig["options"];
  positionals?: number;
  run(args: {
    values: Record<string, unknown>;
    positionals: string[];
    store: () => Promise<Store>;
  }): Promise<unknown>;
  /** Human output; --json prints the returned value as JSON instead. */
  print?(result: unknown): string;
}

const json = { json: { type: "boolean" as const } };

function required(values: Record<string, unknown>, name: string): string {
  const value = values[name];
  if (typeof value !== "string" || value === "") throw new UsageError(`--${name} is required`);
  return value;
}

function wholeNumber(values: Record<string, unknown>, name: string): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== "string" || !/^\d+$/.test(raw)) throw new UsageError(`--${name} must be a whole number`);
  return Number(raw);
}

function parseExpiry(raw: unknown): number | undefined {
  if (raw === undefined) return undefined;
  const time =
    typeof raw === "string" && /^\d{4}-\d{2}-\d{2}(T.*)?$/.test(raw) ? Date.parse(raw) : Number.NaN;
  if (Number.isNaN(time))
    throw new UsageError("--expires must be a date like 2027-01-31 or 2027-01-31T12:00:00Z");
  return time;
}

function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return "(none)";
  const cells = rows.map((row) => columns.map((c) => (row[c] === undefined ? "-" : String(row[c]))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r
      .map((v, i) => v.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(columns), ...cells.map(line)].join("\n");
}

const iso = (ms: unknown) => (typeof ms === "number" ? new Date(ms).toISOString() : undefined);

const commands: Record<string, Command> = {
  "projects create": {
    usage: "dmt projects create <id> [--tier free|pro|enterprise] [--json]",
    options: { tier: { type: "string" }, ...json },
    positionals: 1,
    run: async ({ values, positionals, store }) =>
      createProject(
        await store(),
        positionals[0] ?? "",
        (values.tier as string | undefined) ?? "free",
        Date.now(),
      ),
    print: (p) => {
      const project = p as { projectId: string; tier: string };
      return `Created project ${project.projectId} (tier ${project.tier}).`;
    },
  },
  "projects list": {
    usage: "dmt projects list [--json]",
    options: json,
    run: async ({ store }) => (await store()).listProjects(),
    print: (rows) =>
      table(
        (rows as { projectId: string; tier: string; createdAt: number }[]).map((p) => ({
          ...p,
          created: iso(p.createdAt),
        })),
        ["projectId", "tier", "created"],
      ),
  },
  "keys create": {
    usage:
      "dmt keys create --project <id> --name <name> [--allow <endpoint>]... [--rpm N --burst N] [--expires <date>] [--json]",
    options: {
      project: { type: "string" },
      name: { type: "string" },
      allow: { type: "string", multiple: true },
      rpm: { type: "string" },
      burst: { type: "string" },
      expires: { type: "string" },
      ...json,
    },
    run: async ({ values, store }) => {
      const projectId = required(values, "project");
      const name = required(values, "name");
      const rpm = wholeNumber(values, "rpm");
      const burst = wholeNumber(values, "burst");
      if ((rpm === undefined) !== (burst === undefined))
        throw new UsageError("give --rpm and --burst together");
      const expiresAt = parseExpiry(values.expires);
      const { key, record } = await createKey(
        await store(),
        {
          projectId,
          name,
          ...(values.allow ? { allow: values.allow as string[] } : {}),
          ...(rpm !== undefined && burst !== undefined ? { rateLimit: { rpm, burst } } : {}),
          ...(expiresAt !== undefined ? { expiresAt } : {}),
        },
        Date.now(),
      );
      return { id: record.keyId, key, name: record.name, project: record.projectId };
    },
    print: (r) => {
      const created = r as { id: string; key: string; name: string; project: string };
      return [
        `Created key ${created.id} ("${created.name}") for project ${created.project}.`,
        "",
        `  ${created.key}`,
        "",
        "This is the only time the full key is shown. Store it now; only a hash is kept.",
      ].join("\n");
    },
  },
  "keys list": {
    usage: "dmt keys list --project <id> [--json]",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, store }) => {
      const now = Date.now();
      return (await (await store()).listKeys(required(values, "project"))).map((k) => keyView(k, now));
    },
    print: (rows) =>
      table(
        (rows as ReturnType<typeof keyView>[]).map((k) => ({
          id: k.keyId,
          name: k.name,
          prefix: k.prefix,
          status: k.status,
          created: iso(k.createdAt),
          lastUsed: iso(k.lastUsedAt),
          allow: k.allow?.join(","),
        })),
        ["id", "name", "prefix", "status", "created", "lastUsed", "allow"],
      ),
  },
  "keys revoke": {
    usage: "dmt keys revoke <key id> [--json]",
    options: json,
    positionals: 1,
    run: async ({ positionals, store }) =>
      keyView(await revokeKey(await store(), positionals[0] ?? "", Date.now()), Date.now()),
    print: (k) => `Revoked key ${(k as { keyId: string }).keyId}.`,
  },
};

function help(): string {
  return [
    "dmt: metering gateway for language-model vendors",
    "",
    "  dmt serve                 run the service locally (embedded store, vendor simulator)",
    ...Object.values(commands).map((c) => `  ${c.usage}`),
    "",
    "Environment: DMT_DATA_DIR (default ./.dmt), PORT (default 8787); see README.",
  ].join("\n");
}

async function serve(): Promise<void> {
  const config = parseLocalConfig();
  const logger = jsonLogger(config.DMT_LOG_LEVEL);
  const stack = await startLocalStack(config, logger);
  process.stdout.write(
    [
      `dmt is running at ${stack.url}`,
      `  data dir: ${config.dataDir}`,
      "",
      `Dashboard: ${stack.dashboard.url}`,
      `  sign in as ${stack.dashboard.email} with password ${stack.dashboard.password}`,
      "  (a local development user; the password is kept in the data dir)",
      "",
      "Next:",
      "  npx dmt projects create demo",
      "  npx dmt keys create --project demo --name laptop",
      `  curl -H "Authorization: Bearer <key>" ${stack.url}/api/v1/status`,
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

async function main(argv: string[]): Promise<number> {
  const [first, second] = argv;
  if (first === undefined || first === "help" || first === "--help" || first === "-h") {
    process.stdout.write(`${help()}\n`);
    return first === undefined ? 2 : 0;
  }
  if (first === "serve") {
    await serve();
    return -1; // keeps running
  }
  const name = `${first} ${second ?? ""}`.trim();
  const command = commands[name];
  if (!command) throw new UsageError(`unknown command '${name}'; run 'dmt help'`);
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv.slice(2),
      options: command.options ?? {},
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message.split("\n")[0]}; usage: ${command.usage}`);
  }
  if (parsed.positionals.length !== (command.positionals ?? 0)) throw new UsageError(command.usage);

  const config = parseLocalConfig();
  let opened: Awaited<ReturnType<typeof openLocalStore>> | undefined;
  try {
    const result = await command.run({
      values: parsed.values,
      positionals: parsed.positionals,
      store: async () => {
        opened ??= await openLocalStore(config.dataDir, config.DMT_DYNAMODB_ENDPOINT);
        return opened.store;
      },
    });
    const out =
      parsed.values.json || !command.print ? JSON.stringify(result, null, 2) : command.print(result);
    process.stdout.write(`${out}\n`);
    return 0;
  } finally {
    await opened?.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err: unknown) => {
    const usage = err instanceof UsageError;
    const message =
      err instanceof ApiError || usage || err instanceof Error ? (err as Error).message : String(err);
    process.stderr.write(`dmt: ${usage ? "usage: " : ""}${message}\n`);
    process.exitCode = usage ? 2 : 1;
  },
);
