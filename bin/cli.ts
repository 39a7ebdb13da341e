import { type ParseArgsConfig, parseArgs } from "node:util";
import { DynamoBudgets } from "../lambda/adapters/dynamodb/budgets";
import { DynamoCredits } from "../lambda/adapters/dynamodb/credits";
import { tableNames } from "../lambda/adapters/dynamodb/tables";
import { DynamoVendorKeys } from "../lambda/adapters/dynamodb/vendor-keys";
import { LocalMasterKey } from "../lambda/adapters/fs/master-key";
import { activePriceCatalogue, catalogueModels } from "../lambda/adapters/fs/price-catalogue";
import {
  createKey,
  createProject,
  keyView,
  modelWarnings,
  revokeKey,
  updateKey,
} from "../lambda/core/accounts";
import { type BudgetView, budgetView, budgetViews, parseModels, setBudget } from "../lambda/core/budgets";
import { formatUsd, parseUsd } from "../lambda/core/credits";
import { ApiError, errors } from "../lambda/core/errors";
import { DestinationError, parseExportDestination } from "../lambda/core/export-destination";
import { jsonLogger } from "../lambda/core/logger";
import type { Store } from "../lambda/core/ports";
import { formatPriceTable, VENDORS as PRICED_VENDORS } from "../lambda/core/pricing";
import { parseLocalConfig } from "../lambda/local/config";
import { openLocalStore, startLocalStack } from "../lambda/local/stack";
import { localExportSettings } from "../lambda/local/warehouse";

/**
 * `dmt`: the local server and the operator commands. Every command works whether or not the server
 * runs (it shares the running server's store), takes `--json`, and fails with one line and exit 1
 * (2 for a usage error).
 */

class UsageError extends Error {}

/** What commands work with, opened on first use (commands like `prices list` need no store). */
interface Services {
  store: Store;
  credits: DynamoCredits;
  budgets: DynamoBudgets;
  vendorKeys: DynamoVendorKeys;
  /** A file in the data dir locally; the `projectSettings` table in AWS (s3:// destinations only). */
  exportSettings: { setExportDestination(projectId: string, url: string | undefined): Promise<void> };
  /** The project, or a not-found error naming it. */
  project(projectId: string): Promise<string>;
}

interface Command {
  usage: string;
  options: ParseArgsConfig["options"];
  positionals?: number;
  run(args: {
    values: Record<string, unknown>;
    positionals: string[];
    open: () => Promise<Services>;
    /** The AWS stack the command works on (`--stack`, DMT_STACK); undefined for the local data dir. */
    stackName: string | undefined;
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

const policyOptions = { models: { type: "string" as const }, tpm: { type: "string" as const } };

/** `--models a,b*` and `--tpm N` of `keys create` and `keys update`. */
function keyPolicy(values: Record<string, unknown>): { models?: string[]; tpm?: number } {
  const tpm = wholeNumber(values, "tpm");
  return {
    ...(typeof values.models === "string" ? { models: parseModels(values.models) } : {}),
    ...(tpm !== undefined ? { tpm } : {}),
  };
}

function warn(lines: string[]): void {
  for (const line of lines) process.stderr.write(`dmt: warning: ${line}\n`);
}

const iso = (ms: unknown) => (typeof ms === "number" ? new Date(ms).toISOString() : undefined);

const commands: Record<string, Command> = {
  "projects create": {
    usage: "dmt projects create <id> [--tier free|pro|enterprise] [--json]",
    options: { tier: { type: "string" }, ...json },
    positionals: 1,
    run: async ({ values, positionals, open }) =>
      createProject(
        (await open()).store,
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
    run: async ({ open }) => (await open()).store.listProjects(),
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
      "dmt keys create --project <id> --name <name> [--allow <endpoint>]... [--rpm N --burst N] [--expires <date>] [--models <globs>] [--tpm N] [--json]",
    options: {
      project: { type: "string" },
      name: { type: "string" },
      allow: { type: "string", multiple: true },
      rpm: { type: "string" },
      burst: { type: "string" },
      expires: { type: "string" },
      ...policyOptions,
      ...json,
    },
    run: async ({ values, open }) => {
      const projectId = required(values, "project");
      const policy = keyPolicy(values);
      const name = required(values, "name");
      const rpm = wholeNumber(values, "rpm");
      const burst = wholeNumber(values, "burst");
      if ((rpm === undefined) !== (burst === undefined))
        throw new UsageError("give --rpm and --burst together");
      const expiresAt = parseExpiry(values.expires);
      const { key, record } = await createKey(
        (await open()).store,
        {
          projectId,
          name,
          ...(values.allow ? { allow: values.allow as string[] } : {}),
          ...(rpm !== undefined && burst !== undefined ? { rateLimit: { rpm, burst } } : {}),
          ...(expiresAt !== undefined ? { expiresAt } : {}),
          ...(policy.models ? { models: policy.models } : {}),
          ...(policy.tpm !== undefined ? { tpm: policy.tpm } : {}),
        },
        Date.now(),
      );
      warn(modelWarnings(policy.models, catalogueModels()));
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
    run: async ({ values, open }) => {
      const now = Date.now();
      return (await (await open()).store.listKeys(required(values, "project"))).map((k) => keyView(k, now));
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
          models: k.models?.join(","),
          tpm: k.tpm,
        })),
        ["id", "name", "prefix", "status", "created", "lastUsed", "allow", "models", "tpm"],
      ),
  },
  "keys update": {
    usage: "dmt keys update <key id> [--models <globs>|'*'] [--tpm N|0] [--json]",
    options: { ...policyOptions, ...json },
    positionals: 1,
    run: async ({ values, positionals, open }) => {
      const policy = keyPolicy(values);
      if (policy.models === undefined && policy.tpm === undefined)
        throw new UsageError("give --models or --tpm");
      const { record, warnings } = await updateKey(
        (await open()).store,
        positionals[0] ?? "",
        policy,
        catalogueModels(),
      );
      warn(warnings);
      return keyView(record, Date.now());
    },
    print: (k) => {
      const key = k as { keyId: string; models?: string[]; tpm?: number };
      return `Updated key ${key.keyId}: models ${key.models?.join(",") ?? "any"}, tpm ${key.tpm ?? "no limit"}.`;
    },
  },
  "budgets set": {
    usage:
      "dmt budgets set --project <id> [--key <key id> | --user <user id>] --usd <limit> --window day|month|total [--soft] [--include-byok] [--json]",
    options: {
      project: { type: "string" },
      key: { type: "string" },
      user: { type: "string" },
      usd: { type: "string" },
      window: { type: "string" },
      soft: { type: "boolean" },
      "include-byok": { type: "boolean" },
      ...json,
    },
    run: async ({ values, open }) => {
      const input = {
        projectId: required(values, "project"),
        usd: required(values, "usd"),
        window: required(values, "window"),
        ...(values.key !== undefined ? { keyId: values.key as string } : {}),
        ...(values.user !== undefined ? { userId: values.user as string } : {}),
        soft: values.soft === true,
        includeByok: values["include-byok"] === true,
      };
      if (input.keyId !== undefined && input.userId !== undefined) {
        throw new UsageError("give --key or --user, not both: a budget has one scope");
      }
      const services = await open();
      return budgetView(await setBudget(services.store, services.budgets, input, Date.now()), Date.now());
    },
    print: (b) => {
      const budget = b as BudgetView;
      return `Budget ${budget.id}: ${budget.scope}${budget.key ? ` ${budget.key}` : ""}${budget.user ? ` ${budget.user}` : ""}, $${budget.limit_usd} per ${budget.window}${budget.soft ? " (soft)" : ""}.`;
    },
  },
  "budgets list": {
    usage: "dmt budgets list --project <id> [--json]",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(required(values, "project"));
      return budgetViews(services.budgets, await services.budgets.list(projectId), Date.now());
    },
    print: (rows) =>
      table(
        (rows as BudgetView[]).map((b) => ({
          id: b.id,
          scope: b.scope,
          subject: b.key ?? b.user,
          window: b.window,
          limit: `$${b.limit_usd}`,
          spent: b.spent_usd === undefined ? undefined : `$${b.spent_usd}`,
          kind: b.soft ? "soft" : "hard",
          byok: b.include_byok ? "counted" : undefined,
          resets: b.resets_at,
        })),
        ["id", "scope", "subject", "window", "limit", "spent", "kind", "byok", "resets"],
      ),
  },
  "budgets delete": {
    usage: "dmt budgets delete <budget id> [--json]",
    options: json,
    positionals: 1,
    run: async ({ positionals, open }) => {
      const budgetId = positionals[0] ?? "";
      if (!(await (await open()).budgets.delete(budgetId))) {
        throw errors.notFound(`Budget '${budgetId}' does not exist.`);
      }
      return { id: budgetId, deleted: true };
    },
    print: (r) => `Deleted budget ${(r as { id: string }).id}.`,
  },
  "keys revoke": {
    usage: "dmt keys revoke <key id> [--json]",
    options: json,
    positionals: 1,
    run: async ({ positionals, open }) =>
      keyView(await revokeKey((await open()).store, positionals[0] ?? "", Date.now()), Date.now()),
    print: (k) => `Revoked key ${(k as { keyId: string }).keyId}.`,
  },
  "credits grant": {
    usage: "dmt credits grant --project <id> --usd <amount> [--note <text>] [--source <who>] [--json]",
    options: {
      project: { type: "string" },
      usd: { type: "string" },
      note: { type: "string" },
      source: { type: "string" },
      ...json,
    },
    run: async ({ values, open }) => {
      const micros = parseUsd(required(values, "usd"));
      const services = await open();
      const projectId = await services.project(required(values, "project"));
      const source = (values.source as string | undefined) ?? "cli";
      const entry = await services.credits.grant(
        projectId,
        micros,
        source,
        values.note as string | undefined,
      );
      const balance = await services.credits.balance(projectId);
      return { entry, balance };
    },
    print: (r) => {
      const { entry, balance } = r as {
        entry: { deltaMicros: number };
        balance: { availableMicros: number; projectId: string };
      };
      return `Granted ${formatUsd(entry.deltaMicros)} to ${balance.projectId}; available ${formatUsd(balance.availableMicros)}.`;
    },
  },
  "credits balance": {
    usage: "dmt credits balance --project <id> [--json]",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      return services.credits.balance(await services.project(required(values, "project")));
    },
    print: (b) => {
      const balance = b as { projectId: string; availableMicros: number; heldMicros: number };
      return `${balance.projectId}: available ${formatUsd(balance.availableMicros)}, held ${formatUsd(balance.heldMicros)}`;
    },
  },
  "credits ledger": {
    usage: "dmt credits ledger --project <id> [--limit N] [--cursor <c>] [--json]",
    options: { project: { type: "string" }, limit: { type: "string" }, cursor: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(required(values, "project"));
      const limit = wholeNumber(values, "limit");
      return services.credits.ledger(projectId, {
        ...(limit !== undefined ? { limit } : {}),
        ...(typeof values.cursor === "string" ? { cursor: values.cursor } : {}),
      });
    },
    print: (p) => {
      const page = p as { entries: Record<string, unknown>[]; cursor?: string };
      const rows = page.entries.map((e) => ({
        ...e,
        at: iso(e.at),
        usd: formatUsd(e.deltaMicros as number),
      }));
      const more = page.cursor ? `\n(more: --cursor ${page.cursor})` : "";
      return table(rows, ["at", "type", "usd", "ref", "source", "note"]) + more;
    },
  },
  "vendor-keys set": {
    usage:
      "dmt vendor-keys set --project <id> --vendor <groq|openai|anthropic|gemini> [--key <key>] (else read from stdin) [--json]",
    options: { project: { type: "string" }, vendor: { type: "string" }, key: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const vendor = required(values, "vendor");
      const key = typeof values.key === "string" ? values.key : await readStdinKey();
      const services = await open();
      return services.vendorKeys.set(await services.project(required(values, "project")), vendor, key);
    },
    print: (v) => {
      const view = v as { vendor: string; last4: string; projectId: string };
      return `Stored the ${view.vendor} key ending ${view.last4} for ${view.projectId}; calls to ${view.vendor} now use it (BYOK, not charged).`;
    },
  },
  "vendor-keys list": {
    usage: "dmt vendor-keys list --project <id> [--json]",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      return services.vendorKeys.list(await services.project(required(values, "project")));
    },
    print: (rows) =>
      table(
        (rows as { vendor: string; last4: string; updatedAt: number }[]).map((v) => ({
          vendor: v.vendor,
          key: `...${v.last4}`,
          updated: iso(v.updatedAt),
        })),
        ["vendor", "key", "updated"],
      ),
  },
  "vendor-keys delete": {
    usage: "dmt vendor-keys delete --project <id> --vendor <vendor> [--json]",
    options: { project: { type: "string" }, vendor: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(required(values, "project"));
      const vendor = required(values, "vendor");
      if (!(await services.vendorKeys.delete(projectId, vendor))) {
        throw errors.notFound(`Project '${projectId}' has no ${vendor} key.`);
      }
      return { projectId, vendor, deleted: true };
    },
    print: (r) => `Deleted the ${(r as { vendor: string }).vendor} key.`,
  },
  "settings set": {
    usage:
      "dmt settings set --project <id> (--export-bucket <s3://bucket/prefix | file:///folder> | --no-export-bucket) [--json]",
    options: {
      project: { type: "string" },
      "export-bucket": { type: "string" },
      "no-export-bucket": { type: "boolean" },
      ...json,
    },
    run: async ({ values, open }) => {
      const url = values["export-bucket"] as string | undefined;
      const clear = values["no-export-bucket"] === true;
      if ((url === undefined) === !clear)
        throw new UsageError("give exactly one of --export-bucket and --no-export-bucket");
      if (url !== undefined) {
        try {
          parseExportDestination(url);
        } catch (err) {
          if (err instanceof DestinationError) throw errors.invalidField("export-bucket", err.message);
          throw err;
        }
      }
      const services = await open();
      const projectId = await services.project(required(values, "project"));
      try {
        await services.exportSettings.setExportDestination(projectId, url);
      } catch (err) {
        // In AWS a folder means nothing to the data API: s3:// only.
        if (err instanceof DestinationError) throw errors.invalidField("export-bucket", err.message);
        throw err;
      }
      return { projectId, exportBucket: url ?? null };
    },
    print: (r) => {
      const { projectId, exportBucket } = r as { projectId: string; exportBucket: string | null };
      return exportBucket
        ? `Exports of ${projectId} now go to ${exportBucket}.`
        : `Exports of ${projectId} are streamed back again.`;
    },
  },
  "prices list": {
    usage: "dmt prices list [--vendor <groq|openai|anthropic|gemini>] [--json]",
    options: { vendor: { type: "string" }, ...json },
    run: async ({ values, stackName }) => {
      const vendor = values.vendor as string | undefined;
      if (vendor !== undefined && !(PRICED_VENDORS as readonly string[]).includes(vendor)) {
        throw new UsageError(`--vendor must be one of ${PRICED_VENDORS.join(", ")}`);
      }
      // A stack's catalogue is the one it was deployed with: its override and markup included.
      const catalogue =
        stackName === undefined
          ? activePriceCatalogue()
          : await (await import("./aws-target")).stackPriceCatalogue(stackName);
      const rows = catalogue.list(vendor ? { vendor: vendor as (typeof PRICED_VENDORS)[number] } : {});
      const markup = Number(catalogue.markup.num) / Number(catalogue.markup.den);
      return { priceVersion: catalogue.priceVersion, markup, rows };
    },
    print: (r) => {
      const result = r as {
        priceVersion: string;
        markup: number;
        rows: Parameters<typeof formatPriceTable>[0];
      };
      return `Prices ${result.priceVersion} (markup ${result.markup}); USD per million tokens unless noted.\n${formatPriceTable(result.rows)}`;
    },
  },
};

/** A vendor key piped on stdin: one trailing newline (from echo or a file) is not part of it. */
async function readStdinKey(): Promise<string> {
  if (process.stdin.isTTY) throw new UsageError("give --key or pipe the key on stdin");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

function help(): string {
  return [
    "dmt: metering gateway for language-model vendors",
    "",
    "  dmt serve                 run the service locally (embedded store, vendor simulator)",
    ...Object.values(commands).map((c) => `  ${c.usage}`),
    "",
    "Every command but serve takes --stack <name> (or DMT_STACK) to work on a deployed AWS stack",
    "instead of the local data dir; it finds the tables from the stack's outputs.",
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
      ...(stack.simulatedVendors.length > 0
        ? [`Simulated vendors (no API key set): ${stack.simulatedVendors.join(", ")}`, ""]
        : []),
      "Next:",
      "  npx dmt projects create demo",
      "  npx dmt keys create --project demo --name laptop",
      "  npx dmt credits grant --project demo --usd 10",
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
      options: { ...command.options, stack: { type: "string" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message.split("\n")[0]}; usage: ${command.usage}`);
  }
  if (parsed.positionals.length !== (command.positionals ?? 0)) throw new UsageError(command.usage);

  const stackName = (parsed.values.stack as string | undefined) ?? (process.env.DMT_STACK || undefined);
  const config = parseLocalConfig();
  let opened: { close(): unknown } | undefined;
  let services: Services | undefined;
  try {
    const result = await command.run({
      values: parsed.values,
      positionals: parsed.positionals,
      stackName,
      open: async () => {
        if (services) return services;
        let parts: Omit<Services, "project">;
        if (stackName !== undefined) {
          // Loaded only here: the CloudFormation and KMS clients would slow every local command's start.
          const { awsServices, openAwsTarget } = await import("./aws-target");
          const target = await openAwsTarget(stackName);
          opened = target;
          parts = awsServices(target);
        } else {
          const local = await openLocalStore(config.dataDir, config.DMT_DYNAMODB_ENDPOINT);
          opened = local;
          const names = tableNames(process.env);
          parts = {
            store: local.store,
            credits: new DynamoCredits(local.db, names),
            budgets: new DynamoBudgets(local.db, names),
            vendorKeys: new DynamoVendorKeys(local.db, names, LocalMasterKey.inDataDir(config.dataDir)),
            exportSettings: localExportSettings(config.dataDir),
          };
        }
        const { store } = parts;
        services = {
          ...parts,
          async project(projectId) {
            if (!(await store.getProject(projectId)))
              throw errors.notFound(`Project '${projectId}' does not exist.`);
            return projectId;
          },
        };
        return services;
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
