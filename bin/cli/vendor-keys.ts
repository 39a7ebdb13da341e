import { errors } from "../../lambda/core/errors";
import { command } from "./command";
import { iso, table } from "./format";
import { required, text, UsageError } from "./options";

/** A vendor key piped on stdin: one trailing newline (from echo or a file) is not part of it. */
async function readStdinKey(): Promise<string> {
  if (process.stdin.isTTY) throw new UsageError("give --key or pipe the key on stdin");
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks)
    .toString("utf8")
    .replace(/\r?\n$/, "");
}

const VENDOR = "groq|openai|anthropic|gemini";

/** `dmt vendor-keys ...`: a project's own vendor keys (BYOK), stored encrypted. */
export const vendorKeyCommands = [
  command({
    name: "vendor-keys set",
    summary: "stores a BYOK vendor key, encrypted; calls to that vendor use it and are not charged",
    details: "Without --key the key is read from stdin, which keeps it out of the shell's history.",
    options: {
      project: required("<id>", "the project"),
      vendor: required(`<${VENDOR}>`, "the vendor the key is for"),
      key: text("<key>", "the vendor's API key (else read from stdin)"),
    },
    examples: ["dmt vendor-keys set --project demo --vendor openai < openai-key.txt"],
    run: async ({ values, open }) => {
      const key = values.key ?? (await readStdinKey());
      const services = await open();
      return services.vendorKeys.set(await services.project(values.project), values.vendor, key);
    },
    print: (view) =>
      `Stored the ${view.vendor} key ending ${view.last4} for ${view.projectId}; calls to ${view.vendor} now use it (BYOK, not charged).`,
  }),
  command({
    name: "vendor-keys list",
    summary: "the project's vendor keys (only their last 4 characters)",
    options: { project: required("<id>", "the project") },
    examples: ["dmt vendor-keys list --project demo"],
    run: async ({ values, open }) => {
      const services = await open();
      return services.vendorKeys.list(await services.project(values.project));
    },
    print: (keys) =>
      table(
        keys.map((v) => ({ vendor: v.vendor, key: `...${v.last4}`, updated: iso(v.updatedAt) })),
        ["vendor", "key", "updated"],
      ),
  }),
  command({
    name: "vendor-keys delete",
    summary: "deletes a project's vendor key",
    options: {
      project: required("<id>", "the project"),
      vendor: required("<vendor>", "the vendor whose key goes"),
    },
    examples: ["dmt vendor-keys delete --project demo --vendor openai"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = await services.project(values.project);
      if (!(await services.vendorKeys.delete(projectId, values.vendor))) {
        throw errors.notFound(`Project '${projectId}' has no ${values.vendor} key.`);
      }
      return { projectId, vendor: values.vendor, deleted: true };
    },
    print: (deleted) => `Deleted the ${deleted.vendor} key.`,
  }),
];
