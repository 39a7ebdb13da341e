import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { type ParseArgsConfig, parseArgs } from "node:util";
import type { DynamoBudgets } from "../lambda/adapters/dynamodb/budgets";
import type { DynamoPrivacySettings } from "../lambda/adapters/dynamodb/privacy-settings";
import {
  createKey,
  createProject,
  keyStoreOf,
  keyView,
  modelWarnings,
  revokeKey,
  updateKey,
} from "../lambda/core/accounts";
import { type BudgetView, budgetView, budgetViews, parseModels, setBudget } from "../lambda/core/budgets";
import type { CompactionReport } from "../lambda/core/compaction";
import { type CreditStore, formatUsd, parseUsd } from "../lambda/core/credits";
import { ApiError, errors } from "../lambda/core/errors";
import { DestinationError, parseExportDestination } from "../lambda/core/export-destination";
import {
  addMember,
  GRANTED_ROLES,
  type GrantedRole,
  type MemberStore,
  type Membership,
  removeMember,
  type UserDirectory,
} from "../lambda/core/members";
import { formatCents } from "../lambda/core/money";
import type { Store } from "../lambda/core/ports";
import type { ImportPlan } from "../lambda/core/pricing/litellm";
import { privacyView, updatePrivacySettings } from "../lambda/core/privacy";
import type { Drift } from "../lambda/core/reconcile";
import type { RetentionAudit } from "../lambda/core/retention";
import { parseStatementQuery, readStatement, type Statement } from "../lambda/core/statement";
import type { VendorKeyStore } from "../lambda/core/vendor-keys";
import { creditsGranted, keyCreated, keyRevoked } from "../lambda/events/account-events";
import { DEFAULT_DATA_DIR, parseLocalConfig, vendorSettings } from "../lambda/local/config";
import type { CompactionOptions } from "../lambda/warehouse/compaction";
import type { RetentionOptions } from "../lambda/warehouse/retention";
import { eventCommands } from "./cli-events";
import type { CliEvents } from "./cli-events-open";

/**
 * `dmt`: the local server and the operator commands. Every command works whether or not the server
 * runs (it shares the running server's store), takes `--json`, and fails with one line and exit 1
 * (2 for a usage error).
 *
 * Start time: only light modules are imported here; a command loads what it needs when it runs (the
 * store's adapters, the price catalogue, the server), so `--help` loads almost nothing. `--version` is
 * answered before this module loads (cli-entry.ts).
 */

class UsageError extends Error {}

/** What commands work with, opened on first use (commands like `prices list` need no store). */
interface Services {
  store: Store;
  credits: CreditStore;
  vendorKeys: VendorKeyStore;
  budgets: DynamoBudgets;
  /** A file in the data dir locally; the `projectSettings` table in AWS (s3:// destinations only). */
  exportSettings: { setExportDestination(projectId: string, url: string | undefined): Promise<void> };
  members: MemberStore;
  /** The dashboard's users by email: the local provider's, or the stack's Cognito user pool. */
  users: UserDirectory;
  /** What records keep and for how long: attributes of the project and key items. */
  privacy: DynamoPrivacySettings;
  /** The retention run over the local data dir (in AWS a scheduled function runs it). */
  retention(options: RetentionOptions): Promise<RetentionAudit>;
  /** The compaction run over the local data dir (in AWS a scheduled function runs it). */
  compaction(options: CompactionOptions): Promise<CompactionReport>;
  /** The project, or a not-found error naming it. */
  project(projectId: string): Promise<string>;
  /** Alert rules, webhooks and the events commands publish, opened on first use. */
  events(): Promise<CliEvents>;
}

interface Command {
  usage: string;
  /** One line for `--help`. */
  summary: string;
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
  print?(result: unknown): string | Promise<string>;
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

/** The catalogue's model names, for the warning on a --models glob that matches none. */
async function catalogueModels(): Promise<string[]> {
  return (await import("../lambda/adapters/fs/price-catalogue")).catalogueModels();
}

function warn(lines: string[]): void {
  for (const line of lines) process.stderr.write(`dmt: warning: ${line}\n`);
}

const iso = (ms: unknown) => (typeof ms === "number" ? new Date(ms).toISOString() : undefined);

const commands: Record<string, Command> = {
  "projects create": {
    usage: "dmt projects create <id> [--tier free|pro|enterprise] [--json]",
    summary: "a project: the account that owns keys and credits",
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
    summary: "all projects",
    options: json,
    run: async ({ open }) => (await open()).store.listProjects(),
    print: (rows) =>
      table(
        (rows as { projectId: string; tier: string; createdAt: number }[]).map((p) => ({
          project: p.projectId,
          tier: p.tier,
          created: iso(p.createdAt),
        })),
        ["project", "tier", "created"],
      ),
  },
  "keys create": {
    usage:
      "dmt keys create --project <id> --name <name> [--allow <endpoint>]... [--rpm N --burst N] [--expires <date>] [--models <globs>] [--tpm N] [--store metadata|none] [--json]",
    summary: "a key for a project, printed once",
    options: {
      project: { type: "string" },
      name: { type: "string" },
      allow: { type: "string", multiple: true },
      rpm: { type: "string" },
      burst: { type: "string" },
      expires: { type: "string" },
      store: { type: "string" },
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
      const services = await open();
      const { key, record } = await createKey(
        services.store,
        {
          projectId,
          name,
          ...(values.allow ? { allow: values.allow as string[] } : {}),
          ...(rpm !== undefined && burst !== undefined ? { rateLimit: { rpm, burst } } : {}),
          ...(expiresAt !== undefined ? { expiresAt } : {}),
          ...(typeof values.store === "string" ? { store: values.store } : {}),
          ...(policy.models ? { models: policy.models } : {}),
          ...(policy.tpm !== undefined ? { tpm: policy.tpm } : {}),
        },
        Date.now(),
      );
      await (await services.events()).published(keyCreated(record));
      warn(modelWarnings(policy.models, await catalogueModels()));
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
    summary: "a project's keys with prefix, status, created and last-used times",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const now = Date.now();
      return (await (await open()).store.listKeys(required(values, "project"))).map((k) => keyView(k, now));
    },
    print: (rows) =>
      table(
        (rows as ReturnType<typeof keyView>[]).map((k) => ({
          key: k.keyId,
          name: k.name,
          prefix: k.prefix,
          status: k.status,
          created: iso(k.createdAt),
          "last-used": iso(k.lastUsedAt),
          allow: k.allow?.join(","),
          models: k.models?.join(","),
          tpm: k.tpm,
        })),
        ["key", "name", "prefix", "status", "created", "last-used", "allow", "models", "tpm"],
      ),
  },
  "keys update": {
    usage:
      "dmt keys update <key id> [--models <globs>|'*'] [--tpm N|0] [--store metadata|none|project] [--json]",
    summary: "a key's model allowlist, tokens-per-minute limit and store level",
    options: { ...policyOptions, store: { type: "string" }, ...json },
    positionals: 1,
    run: async ({ values, positionals, open }) => {
      const policy = keyPolicy(values);
      const level = values.store as string | undefined;
      if (policy.models === undefined && policy.tpm === undefined && level === undefined)
        throw new UsageError("give --models, --tpm or --store");
      const keyId = positionals[0] ?? "";
      const services = await open();
      let record = await services.store.getKey(keyId);
      if (policy.models !== undefined || policy.tpm !== undefined) {
        const updated = await updateKey(services.store, keyId, policy, await catalogueModels());
        warn(updated.warnings);
        record = updated.record;
      }
      if (level !== undefined) {
        // `project`: the key follows its project's level again.
        record = await services.privacy.setKey(keyId, level === "project" ? undefined : keyStoreOf(level));
      }
      if (!record) throw errors.notFound(`Key '${keyId}' does not exist.`);
      return keyView(record, Date.now());
    },
    print: (k) => {
      const key = k as { keyId: string; models?: string[]; tpm?: number; store?: string };
      return `Updated key ${key.keyId}: models ${key.models?.join(",") ?? "any"}, tpm ${key.tpm ?? "no limit"}, stores ${key.store ?? "at the project's level"}.`;
    },
  },
  "budgets set": {
    summary: "a spend limit per project, key or end user; setting it again changes it",
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
    summary: "a project's budgets with the current window's spend",
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
    summary: "deletes a budget",
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
    summary: "revokes a key (revoking twice is harmless)",
    options: json,
    positionals: 1,
    run: async ({ positionals, open }) => {
      const services = await open();
      const before = await services.store.getKey(positionals[0] ?? "");
      const revoked = await revokeKey(services.store, positionals[0] ?? "", Date.now());
      if (before && !before.revoked) await (await services.events()).published(keyRevoked(revoked));
      return keyView(revoked, Date.now());
    },
    print: (k) => `Revoked key ${(k as { keyId: string }).keyId}.`,
  },
  "credits grant": {
    usage: "dmt credits grant --project <id> --usd <amount> [--note <text>] [--source <who>] [--json]",
    summary: "adds prepaid credits; the ledger records the source",
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
      const events = await services.events();
      await events.published(creditsGranted(entry, balance));
      // A balance back above a low-balance threshold re-arms its alert.
      await events.alerts.check(projectId);
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
    summary: "what the project can spend now, and what calls in flight hold",
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
    usage:
      "dmt credits ledger --project <id> [--from YYYY-MM-DD] [--to YYYY-MM-DD] [--by day|lease] [--json]",
    summary: "the credit statement: grants, what calls were charged (per day or lease), a running balance",
    options: {
      project: { type: "string" },
      from: { type: "string" },
      to: { type: "string" },
      by: { type: "string" },
      ...json,
    },
    run: async ({ values, open }) => {
      const period = parseStatementQuery(
        {
          from: values.from as string | undefined,
          to: values.to as string | undefined,
          group: values.by as string | undefined,
        },
        Date.now(),
      );
      const services = await open();
      return readStatement(services.credits, await services.project(required(values, "project")), period);
    },
    print: (s) => formatStatement(s as Statement),
  },
  "members add": {
    usage: "dmt members add --project <id> --email <email> [--role viewer|admin] [--json]",
    summary: "lets a dashboard user see the project (viewer, the default) or also change it (admin)",
    options: { project: { type: "string" }, email: { type: "string" }, role: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const role = (values.role as string | undefined) ?? "viewer";
      if (!(GRANTED_ROLES as readonly string[]).includes(role)) {
        throw new UsageError(`--role must be one of ${GRANTED_ROLES.join(", ")}`);
      }
      const services = await open();
      return addMember(
        services.store,
        services.members,
        services.users,
        {
          projectId: required(values, "project"),
          email: required(values, "email"),
          role: role as GrantedRole,
        },
        Date.now(),
      );
    },
    print: (r) => {
      const { membership, added } = r as { membership: Membership; added: boolean };
      const who = membership.email ?? membership.userId;
      return added
        ? `${who} can now ${membership.role === "viewer" ? "see" : "see and change"} project ${membership.projectId} in the dashboard (${membership.role}).`
        : `${who} is already a member of ${membership.projectId} (${membership.role}); nothing changed.`;
    },
  },
  "members list": {
    usage: "dmt members list --project <id> [--json]",
    summary: "who sees the project in the dashboard",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      return services.members.listProjectMembers(await services.project(required(values, "project")));
    },
    print: (rows) =>
      table(
        (rows as Membership[]).map((m) => ({
          email: m.email ?? (m.personal ? "(personal project)" : undefined),
          user: m.userId,
          role: m.role,
          added: iso(m.createdAt),
        })),
        ["email", "user", "role", "added"],
      ),
  },
  "members remove": {
    usage: "dmt members remove --project <id> --email <email> [--json]",
    summary: "takes a dashboard user's access to the project away",
    options: { project: { type: "string" }, email: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      return removeMember(services.members, services.users, {
        projectId: required(values, "project"),
        email: required(values, "email"),
      });
    },
    print: (m) => {
      const membership = m as Membership;
      return `${membership.email ?? membership.userId} no longer sees project ${membership.projectId}.`;
    },
  },
  "vendor-keys set": {
    usage:
      "dmt vendor-keys set --project <id> --vendor <groq|openai|anthropic|gemini> [--key <key>] (else read from stdin) [--json]",
    summary: "stores a BYOK vendor key, encrypted; calls to that vendor use it and are not charged",
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
    summary: "the project's vendor keys (only their last 4 characters)",
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
    summary: "deletes a project's vendor key",
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
  "settings show": {
    usage: "dmt settings show --project <id> [--json]",
    summary: "what records keep and for how long",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const projectId = required(values, "project");
      const project = await (await open()).store.getProject(projectId);
      if (!project) throw errors.notFound(`Project '${projectId}' does not exist.`);
      return { projectId, ...privacyView(project) };
    },
    print: (r) => printPrivacy(r as PrivacyResult),
  },
  "settings set": {
    usage:
      "dmt settings set --project <id> [--export-bucket <s3://bucket/prefix | file:///folder> | --no-export-bucket] [--store full|metadata|none] [--retention-days N] [--body-retention-days N] [--json]",
    summary: "where exports go, what records keep and for how long",
    options: {
      project: { type: "string" },
      "export-bucket": { type: "string" },
      "no-export-bucket": { type: "boolean" },
      store: { type: "string" },
      "retention-days": { type: "string" },
      "body-retention-days": { type: "string" },
      ...json,
    },
    run: async ({ values, open }) => {
      const url = values["export-bucket"] as string | undefined;
      const clear = values["no-export-bucket"] === true;
      if (url !== undefined && clear)
        throw new UsageError("give one of --export-bucket and --no-export-bucket");
      const privacy = {
        ...(typeof values.store === "string" && { store: values.store }),
        ...(values["retention-days"] !== undefined && {
          retentionDays: wholeNumber(values, "retention-days"),
        }),
        ...(values["body-retention-days"] !== undefined && {
          bodyRetentionDays: wholeNumber(values, "body-retention-days"),
        }),
      };
      const changesPrivacy = Object.keys(privacy).length > 0;
      if (url === undefined && !clear && !changesPrivacy) {
        throw new UsageError(
          "give --export-bucket, --no-export-bucket, --store, --retention-days or --body-retention-days",
        );
      }
      if (changesPrivacy) {
        const services = await open();
        const projectId = required(values, "project");
        const settings = await updatePrivacySettings(services.store, services.privacy, projectId, privacy);
        if (url === undefined && !clear) return { projectId, ...privacyView(settings) };
      }
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
      if ("store" in (r as object)) return printPrivacy(r as PrivacyResult);
      const { projectId, exportBucket } = r as { projectId: string; exportBucket: string | null };
      return exportBucket
        ? `Exports of ${projectId} now go to ${exportBucket}.`
        : `Exports of ${projectId} are streamed back again.`;
    },
  },
  "retention run": {
    usage: "dmt retention run [--project <id>] [--dry-run] [--json]",
    summary: "removes what is past each project's retention now (AWS runs it daily)",
    options: { project: { type: "string" }, "dry-run": { type: "boolean" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      const projectId =
        typeof values.project === "string" ? await services.project(values.project) : undefined;
      return services.retention({
        ...(projectId !== undefined && { projectId }),
        dryRun: values["dry-run"] === true,
      });
    },
    print: (a) => {
      const audit = a as RetentionAudit;
      const rows = audit.projects.map((p) => ({
        project: p.projectId,
        days: p.retentionDays ?? "-",
        bodyDays: p.bodyRetentionDays ?? "-",
        partitionsRemoved: p.partitionsRemoved.length,
        rowsRemoved: p.rowsRemoved,
        bodiesDropped: p.rowsBlanked,
        indexRemoved: p.indexRemoved,
      }));
      const head = audit.dryRun
        ? "Dry run: nothing was changed; this is what a run would remove."
        : `Retention run ${audit.runId} ${audit.status} (audit entry under retention-audit/).`;
      return `${head}\n${table(rows, ["project", "days", "bodyDays", "partitionsRemoved", "rowsRemoved", "bodiesDropped", "indexRemoved"])}`;
    },
  },
  "compaction run": {
    usage: "dmt compaction run [--project <id>] [--json]",
    summary: "merges each closed day's small warehouse files now (AWS runs it daily)",
    options: { project: { type: "string" }, ...json },
    run: async ({ values, open }) => {
      const services = await open();
      const projectId =
        typeof values.project === "string" ? await services.project(values.project) : undefined;
      return services.compaction({ ...(projectId !== undefined && { projectId }) });
    },
    print: (r) => {
      const report = r as CompactionReport;
      const rows = report.partitions.map((p) => ({
        project: p.projectId,
        day: p.day,
        outcome: p.outcome,
        filesBefore: p.filesBefore,
        filesAfter: p.filesAfter,
        rows: p.rows,
      }));
      return rows.length === 0
        ? `Compaction run ${report.runId}: no closed day had files to merge.`
        : `Compaction run ${report.runId}:\n${table(rows, ["project", "day", "outcome", "filesBefore", "filesAfter", "rows"])}`;
    },
  },
  "prices list": {
    usage: "dmt prices list [--vendor <groq|openai|anthropic|gemini>] [--json]",
    summary: "the active price catalogue (with a deployment's override and markup)",
    options: { vendor: { type: "string" }, ...json },
    run: async ({ values, stackName }) => {
      const { VENDOR_NAMES } = await import("../lambda/core/vendor-names");
      const vendor = values.vendor as string | undefined;
      if (vendor !== undefined && !(VENDOR_NAMES as readonly string[]).includes(vendor)) {
        throw new UsageError(`--vendor must be one of ${VENDOR_NAMES.join(", ")}`);
      }
      // A stack's catalogue is the one it was deployed with: its override and markup included.
      const catalogue =
        stackName === undefined
          ? (await import("../lambda/adapters/fs/price-catalogue")).activePriceCatalogue()
          : await (await import("./aws-target")).stackPriceCatalogue(stackName);
      const rows = catalogue.list(vendor ? { vendor: vendor as (typeof VENDOR_NAMES)[number] } : {});
      const markup = Number(catalogue.markup.num) / Number(catalogue.markup.den);
      return { priceVersion: catalogue.priceVersion, markup, rows };
    },
    print: async (r) => {
      const { formatPriceTable } = await import("../lambda/core/pricing");
      const result = r as {
        priceVersion: string;
        markup: number;
        rows: Parameters<typeof formatPriceTable>[0];
      };
      return `Prices ${result.priceVersion} (markup ${result.markup}); USD per million tokens unless noted.\n${formatPriceTable(result.rows)}`;
    },
  },
  "prices import": {
    usage: "dmt prices import <litellm prices.json> [--apply [--out <override.json>]] [--json]",
    summary: "compares LiteLLM's price list with the catalogue; --apply writes it as the override",
    options: { apply: { type: "boolean" }, out: { type: "string" }, ...json },
    positionals: 1,
    run: async ({ values, positionals }) => {
      const file = positionals[0] ?? "";
      let litellm: unknown;
      try {
        litellm = JSON.parse(readFileSync(file, "utf8"));
      } catch (err) {
        throw new UsageError(`${file}: ${(err as Error).message.split("\n")[0]}`);
      }
      const { planPriceImport } = await import("../lambda/adapters/fs/price-catalogue");
      const plan = planPriceImport(litellm, new Date().toISOString().slice(0, 10));
      if (!values.apply) return { ...plan, written: null };
      // The deployment's override: --out, else the file DMT_PRICES_OVERRIDE names.
      const named = process.env.DMT_PRICES_OVERRIDE;
      const out =
        (values.out as string | undefined) ??
        (named && !named.trimStart().startsWith("{") ? named : undefined);
      if (out === undefined)
        throw new UsageError("--apply needs --out <file> (or DMT_PRICES_OVERRIDE naming a file)");
      writeFileSync(out, `${JSON.stringify(plan.override, null, 2)}\n`);
      return { ...plan, written: out };
    },
    print: (r) => {
      const { comparison, leftOut, written } = r as ImportPlan & { written: string | null };
      const lines = [
        `New models (${comparison.newModels.length}):`,
        ...comparison.newModels.map((m) => `  + ${m.vendor}/${m.model} (${m.kind})`),
        `Changed prices (${comparison.changed.length}):`,
        ...comparison.changed.map((d) => `  ~ ${d.vendor}/${d.model} ${d.field}: ${d.ours} -> ${d.theirs}`),
        `Dimensions we lack (${comparison.missing.length}):`,
        ...comparison.missing.map(
          (d) => `  ? ${d.vendor}/${d.model} ${d.field}${d.theirs ? `: ${d.theirs}` : ""}`,
        ),
        ...leftOut.map((m) => `Left out ${m.vendor}/${m.model}: ${m.why}`),
        `Entries of other providers or kinds skipped: ${comparison.skipped}`,
        written
          ? `Override written to ${written}.`
          : "Nothing written: add --apply --out <file> to write the override.",
      ];
      return lines.join("\n");
    },
  },
  reconcile: {
    usage: "dmt reconcile --vendor <openai|anthropic> --from <YYYY-MM-DD> --to <YYYY-MM-DD> [--json]",
    summary: "managed tokens per model and day against the vendor's usage report (an admin key)",
    options: { vendor: { type: "string" }, from: { type: "string" }, to: { type: "string" }, ...json },
    run: async ({ values, open, stackName }) => {
      const { ADMIN_KEYS, parseDayRange, parseVendor, ReconcileInputError } = await import(
        "../lambda/core/reconcile"
      );
      let vendor: ReturnType<typeof parseVendor>;
      let range: ReturnType<typeof parseDayRange>;
      try {
        vendor = parseVendor(required(values, "vendor"));
        range = parseDayRange(required(values, "from"), required(values, "to"));
      } catch (err) {
        if (err instanceof ReconcileInputError) throw new UsageError(err.message);
        throw err;
      }
      if (stackName !== undefined)
        throw new UsageError("reconcile reads the local data dir; --stack is not supported");
      // The admin key is read here and only handed to the request's header: never printed or logged.
      const { env, prefix } = ADMIN_KEYS[vendor];
      const adminKey = process.env[env];
      if (!adminKey) {
        throw new UsageError(
          `${env} is not set: the ${vendor} usage report needs an organization admin key (${prefix}...)`,
        );
      }
      if (!adminKey.startsWith(prefix))
        throw new UsageError(`${env} is not an admin key (those start ${prefix})`);
      const config = parseLocalConfig();
      // The upstream the proxy calls for this vendor: DMT_UPSTREAM_<VENDOR>, else the vendor's own.
      const { VENDOR_DEFINITIONS } = await import("../lambda/vendors");
      const upstream = vendorSettings(config, vendor).upstream ?? VENDOR_DEFINITIONS[vendor].defaultUpstream;
      const services = await open();
      const { openLocalWarehouseQuery } = await import("../lambda/local/warehouse");
      const { composeReconcile } = await import("./reconcile");
      const query = await openLocalWarehouseQuery(config.dataDir);
      try {
        const run = composeReconcile({
          query,
          projects: () => services.store.listProjects(),
          upstream,
          adminKey,
        });
        const drift = await run(vendor, range);
        return {
          vendor,
          from: range.from,
          to: range.to,
          drifted: drift.filter(
            (d) => d.difference.input !== 0 || d.difference.output !== 0 || d.difference.cached !== 0,
          ).length,
          rows: drift,
        };
      } finally {
        query.close();
      }
    },
    print: (r) => {
      const { vendor, from, to, drifted, rows } = r as {
        vendor: string;
        from: string;
        to: string;
        drifted: number;
        rows: Drift[];
      };
      const cells = rows.map((d) => ({
        day: d.day,
        model: d.model,
        input: `${d.ours.input}/${d.theirs.input}`,
        "input diff": signed(d.difference.input),
        output: `${d.ours.output}/${d.theirs.output}`,
        "output diff": signed(d.difference.output),
        cached: `${d.ours.cached}/${d.theirs.cached}`,
        "cached diff": signed(d.difference.cached),
      }));
      const summary =
        drifted === 0
          ? `No drift: ${rows.length} model-days agree with ${vendor}'s usage report, ${from} to ${to}.`
          : `Drift on ${drifted} of ${rows.length} model-days against ${vendor}'s usage report, ${from} to ${to} (tokens ours/theirs; diff = theirs - ours).`;
      return `${table(cells, ["day", "model", "input", "input diff", "output", "output diff", "cached", "cached diff"])}\n${summary}`;
    },
  },
  ...eventCommands({
    required,
    table,
    iso,
    wholeNumber,
    usage: (message: string) => new UsageError(message),
  }),
};

const signed = (n: number) => (n > 0 ? `+${n}` : String(n));

/** A path as a POSIX shell word. */
function shellQuote(text: string): string {
  return /^[\w./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

/** The statement as text: one line per grant or day of charges, a running balance, what is in flight. */
function formatStatement(statement: Statement): string {
  const row = (date: string, description: string, amount: string, balance: string) => ({
    date,
    description,
    amount,
    balance,
  });
  const rows = [
    row(statement.from, "opening balance", "", formatCents(statement.openingMicros)),
    ...statement.lines.map((line) => {
      const what =
        line.kind === "grant"
          ? ["credits granted", line.source, line.note].filter(Boolean).join(" · ")
          : `${line.calls} call${line.calls === 1 ? "" : "s"} on ${line.leases} lease${line.leases === 1 ? "" : "s"}${statement.grouping === "lease" ? ` (${line.ref})` : ""}`;
      const amount = formatCents(line.amountMicros);
      return row(
        line.day,
        what,
        line.amountMicros > 0 ? `+${amount}` : amount,
        formatCents(line.balanceMicros),
      );
    }),
    row(statement.to, "closing balance", "", formatCents(statement.closingMicros)),
  ];
  const { heldMicros, chargedMicros, openLeases } = statement.inFlight;
  const inFlight =
    openLeases > 0
      ? `\nIn flight on ${openLeases} open lease${openLeases === 1 ? "" : "s"}: ${formatCents(chargedMicros)} charged, ${formatCents(heldMicros)} reserved.`
      : "";
  return `${table(rows, ["date", "description", "amount", "balance"])}${inFlight}\nAvailable now: ${formatCents(statement.availableMicros)}. Amounts to the cent; --json has them in micro-USD.`;
}

type PrivacyResult = { projectId: string } & ReturnType<typeof privacyView>;

function printPrivacy({ projectId, store, retentionDays, bodyRetentionDays }: PrivacyResult): string {
  const days = (n: number | null) => (n === null ? "kept until deleted" : `${n} days`);
  return [
    `${projectId}: store level ${store}`,
    `  records: ${days(retentionDays)}`,
    `  bodies:  ${days(bodyRetentionDays ?? retentionDays)}`,
  ].join("\n");
}

/** A vendor key piped on stdin: one trailing newline (from echo or a file) is not part of it. */
async function readStdinKey(): Promise<string> {
  if (process.stdin.isTTY) throw new UsageError("give --key or pipe the key on stdin");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

const SERVE_USAGE = "dmt serve";
const SERVE_SUMMARY = "runs the service locally (embedded store, vendor simulator); npm start";

function help(): string {
  const width = Math.max(SERVE_USAGE.length, ...Object.keys(commands).map((n) => `dmt ${n}`.length));
  return [
    "dmt: metering gateway for language-model vendors",
    "",
    `  ${SERVE_USAGE.padEnd(width)}  ${SERVE_SUMMARY}`,
    ...Object.entries(commands).map(([name, c]) => `  ${`dmt ${name}`.padEnd(width)}  ${c.summary}`),
    "",
    "'dmt <command> --help' shows a command's options. Every command takes --json, and --stack <name>",
    "(or DMT_STACK) to work on a deployed AWS stack instead of the local data dir.",
    "",
    "Environment: DMT_DATA_DIR (default ./.dmt), PORT (default 8787); see README.",
  ].join("\n");
}

/** One line for what `parseArgs` refused, in our words: its own messages run to three lines. */
function argumentProblem(err: Error & { code?: string }): string {
  const option = /'(-{1,2}[^' =]+)/.exec(err.message)?.[1];
  if (option !== undefined && err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") return `unknown option ${option}`;
  if (option !== undefined && err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
    // `--usd -5`: parseArgs will not take a value that looks like an option.
    if (err.message.includes("ambiguous"))
      return `a value starting with '-' goes after '=': ${option}=<value>`;
    if (err.message.includes("argument missing")) return `${option} needs a value`;
    if (err.message.includes("does not take an argument")) return `${option} takes no value`;
  }
  return (err.message.split("\n")[0] ?? "").replace(/\.$/, "");
}

function commandHelp(usage: string, summary: string): string {
  return `usage: ${usage}\n\n${summary[0]?.toUpperCase()}${summary.slice(1)}.\n`;
}

/** Whether the data dir is another than the default, so that commands must name it. */
const otherDataDir = (dataDir: string) => dataDir !== resolve(DEFAULT_DATA_DIR);

async function serve(): Promise<void> {
  const config = parseLocalConfig();
  const [{ jsonLogger }, { startLocalStack }] = await Promise.all([
    import("../lambda/core/logger"),
    import("../lambda/local/stack"),
  ]);
  const logger = jsonLogger(config.DMT_LOG_LEVEL);
  const stack = await startLocalStack(config, logger);
  // The commands to copy must reach this data dir too.
  const dmtPrefix = otherDataDir(config.dataDir)
    ? `DMT_DATA_DIR=${shellQuote(config.dataDir)} npx dmt `
    : "npx dmt ";
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

const HELP = new Set(["--help", "-h", "help"]);

async function main(argv: string[]): Promise<number> {
  const [first, second] = argv;
  if (first === undefined || HELP.has(first)) {
    process.stdout.write(`${help()}\n`);
    return first === undefined ? 2 : 0;
  }
  if (first === "serve") {
    if (argv.slice(1).some((a) => HELP.has(a))) {
      process.stdout.write(commandHelp(SERVE_USAGE, SERVE_SUMMARY));
      return 0;
    }
    await serve();
    return -1; // keeps running
  }
  // One-word commands (`reconcile`) before two-word ones (`keys create`).
  const single = commands[first];
  const name = single ? first : `${first} ${second ?? ""}`.trim();
  const command = single ?? commands[name];
  const wantsHelp = argv.slice(1).some((a) => HELP.has(a));
  if (!command) {
    // `dmt keys --help`: the group's commands.
    const group = Object.entries(commands).filter(([n]) => n.startsWith(`${first} `));
    if (group.length > 0 && (second === undefined || wantsHelp)) {
      const lines = group.map(([, c]) => `  ${c.usage}\n      ${c.summary}`);
      process.stdout.write(`dmt ${first} commands:\n${lines.join("\n")}\n`);
      return wantsHelp ? 0 : 2;
    }
    throw new UsageError(`unknown command '${name}'; run 'dmt --help'`);
  }
  if (wantsHelp) {
    process.stdout.write(commandHelp(command.usage, command.summary));
    return 0;
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv.slice(single ? 1 : 2),
      options: { ...command.options, stack: { type: "string" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${argumentProblem(err as Error & { code?: string })}; usage: ${command.usage}`);
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
        let parts: Omit<Services, "project" | "events">;
        let openEvents: () => Promise<CliEvents & { close(): Promise<void> }>;
        if (stackName !== undefined) {
          // Loaded only here: the CloudFormation and KMS clients would slow every local command's start.
          const { awsEvents, awsServices, openAwsTarget } = await import("./aws-target");
          const target = await openAwsTarget(stackName);
          opened = target;
          parts = awsServices(target);
          openEvents = async () => awsEvents(target);
        } else {
          // Told to a person at a terminal, on stderr: output read by scripts stays as it was.
          if (otherDataDir(config.dataDir) && process.stderr.isTTY) {
            process.stderr.write(`dmt: data dir ${config.dataDir}\n`);
          }
          const { openLocalTarget } = await import("./local-target");
          const target = await openLocalTarget(config.dataDir, config.DMT_DYNAMODB_ENDPOINT);
          opened = target;
          parts = target.services;
          const credits = target.services.credits;
          openEvents = async () =>
            (await import("./cli-events-open")).localEvents(
              target.db,
              target.tables,
              credits,
              config.dataDir,
            );
        }
        let events: Promise<CliEvents & { close(): Promise<void> }> | undefined;
        const storeParts = opened;
        opened = {
          async close() {
            await (await events)?.close();
            await storeParts?.close();
          },
        };
        const { store } = parts;
        services = {
          ...parts,
          events: () => {
            events ??= openEvents();
            return events;
          },
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
      parsed.values.json || !command.print ? JSON.stringify(result, null, 2) : await command.print(result);
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
