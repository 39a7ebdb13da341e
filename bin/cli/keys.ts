import {
  createKey,
  type KeyView,
  keyStoreOf,
  keyView,
  modelWarnings,
  revokeKey,
  updateKey,
} from "../../lambda/core/accounts";
import { parseModels } from "../../lambda/core/budgets";
import { errors } from "../../lambda/core/errors";
import { findProjectKey } from "../../lambda/core/key-names";
import { keyCreated, keyRevoked } from "../../lambda/events/account-events";
import { command } from "./command";
import { iso, table, warn } from "./format";
import { date, repeated, required, text, UsageError, wholeNumber } from "./options";
import type { Services } from "./services";

/** The catalogue's model names, for the warning on a --models glob that matches none. */
async function catalogueModels(): Promise<string[]> {
  return (await import("../../lambda/adapters/fs/price-catalogue")).catalogueModels();
}

/** `--project`, optional where a key's id alone names it. */
const keyProject = text(
  "<id>",
  "the key's project: the key must be one of its keys, and may be given by name",
);

/** The key's id: the argument itself, or with --project the project's key of that id or name. */
async function keyIdOf(services: Services, projectId: string | undefined, key: string): Promise<string> {
  if (projectId === undefined) return key;
  return (await findProjectKey(services.store, await services.project(projectId), key)).keyId;
}

/** `--models a,b*` of `keys create` and `keys update`. */
const modelsOf = (models: string | undefined) => (models === undefined ? undefined : parseModels(models));

/** `dmt keys ...`: the keys a project's callers use. */
export const keyCommands = [
  command({
    name: "keys create",
    summary: "a key for a project, printed once",
    options: {
      project: required("<id>", "the project the key belongs to"),
      name: required("<name>", "what the key is for, shown beside its id"),
      allow: repeated(
        "<endpoint>",
        "an endpoint the key may call, e.g. openai:/v1/chat/completions or groq:* (default: all)",
      ),
      rpm: wholeNumber("N", "requests per minute, with --burst"),
      burst: wholeNumber("N", "requests allowed at once above the rate, with --rpm"),
      expires: date("<date>", "when the key stops working: 2027-01-31 or 2027-01-31T12:00:00Z"),
      store: text("metadata|none", "keeps less of this key's calls than the project does"),
      models: text("<globs>", "the models the key may call, comma-separated, * as a wildcard"),
      tpm: wholeNumber("N", "tokens per minute the key may use"),
    },
    examples: [
      "dmt keys create --project demo --name laptop",
      "dmt keys create --project demo --name ci --rpm 60 --burst 10 --models 'gpt-4o*' --expires 2027-01-31",
    ],
    run: async ({ values, open }) => {
      const models = modelsOf(values.models);
      const { rpm, burst, tpm } = values;
      if ((rpm === undefined) !== (burst === undefined))
        throw new UsageError("give --rpm and --burst together");
      const services = await open();
      const { key, record } = await createKey(
        services.store,
        {
          projectId: values.project,
          name: values.name,
          ...(values.allow ? { allow: values.allow } : {}),
          ...(rpm !== undefined && burst !== undefined ? { rateLimit: { rpm, burst } } : {}),
          ...(values.expires !== undefined ? { expiresAt: values.expires } : {}),
          ...(values.store !== undefined ? { store: values.store } : {}),
          ...(models ? { models } : {}),
          ...(tpm !== undefined ? { tpm } : {}),
        },
        Date.now(),
      );
      await (await services.events()).published(keyCreated(record));
      warn(modelWarnings(models, await catalogueModels()));
      return { id: record.keyId, key, name: record.name, project: record.projectId };
    },
    print: (created) =>
      [
        `Created key ${created.id} ("${created.name}") for project ${created.project}.`,
        "",
        `  ${created.key}`,
        "",
        "This is the only time the full key is shown. Store it now; only a hash is kept.",
      ].join("\n"),
  }),
  command({
    name: "keys list",
    summary: "a project's keys with prefix, status, created and last-used times",
    options: { project: required("<id>", "the project") },
    examples: ["dmt keys list --project demo"],
    run: async ({ values, open }) => {
      const now = Date.now();
      return (await (await open()).store.listKeys(values.project)).map((k) => keyView(k, now));
    },
    print: (keys) =>
      table(
        keys.map((k: KeyView) => ({
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
  }),
  command({
    name: "keys update",
    summary: "a key's model allowlist, tokens-per-minute limit and store level",
    args: ["<key>"],
    options: {
      project: keyProject,
      models: text("<globs>|'*'", "the models the key may call, comma-separated; '*' allows all again"),
      tpm: wholeNumber("N|0", "tokens per minute the key may use; 0 removes the limit"),
      store: text("metadata|none|project", "what the key's calls keep; project: the project's level again"),
    },
    examples: [
      "dmt keys update 3f9c0a1b2c3d4e5f --models 'gpt-4o-mini,claude-*' --tpm 20000",
      "dmt keys update --project demo laptop --tpm 0",
    ],
    run: async ({ values, args: [key], open }) => {
      const policy = {
        ...(values.models !== undefined ? { models: parseModels(values.models) } : {}),
        ...(values.tpm !== undefined ? { tpm: values.tpm } : {}),
      };
      const level = values.store;
      if (policy.models === undefined && policy.tpm === undefined && level === undefined)
        throw new UsageError("give --models, --tpm or --store");
      const services = await open();
      const keyId = await keyIdOf(services, values.project, key);
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
    print: (key) =>
      `Updated key ${key.keyId} ("${key.name}"): models ${key.models?.join(",") ?? "any"}, tpm ${key.tpm ?? "no limit"}, stores ${key.store ?? "at the project's level"}.`,
  }),
  command({
    name: "keys revoke",
    summary: "revokes a key (revoking twice is harmless)",
    args: ["<key>"],
    options: { project: keyProject },
    examples: ["dmt keys revoke 3f9c0a1b2c3d4e5f", "dmt keys revoke --project demo laptop"],
    run: async ({ values, args: [key], open }) => {
      const services = await open();
      const keyId = await keyIdOf(services, values.project, key);
      const before = await services.store.getKey(keyId);
      const revoked = await revokeKey(services.store, keyId, Date.now());
      if (before && !before.revoked) await (await services.events()).published(keyRevoked(revoked));
      return keyView(revoked, Date.now());
    },
    print: (key) => `Revoked key ${key.keyId} ("${key.name}").`,
  }),
];
