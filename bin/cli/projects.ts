import { createProject } from "../../lambda/core/accounts";
import { command } from "./command";
import { iso, table } from "./format";
import { text } from "./options";

/** `dmt projects ...`: the accounts that own keys and credits. */
export const projectCommands = [
  command({
    name: "projects create",
    summary: "a project: the account that owns keys and credits",
    args: ["<id>"],
    options: { tier: text("free|pro|enterprise", "the project's tier (default free)") },
    examples: ["dmt projects create demo --tier pro"],
    run: async ({ values, args: [projectId], open }) =>
      createProject((await open()).store, projectId, values.tier ?? "free", Date.now()),
    print: (project) => `Created project ${project.projectId} (tier ${project.tier}).`,
  }),
  command({
    name: "projects list",
    summary: "all projects",
    options: {},
    examples: ["dmt projects list"],
    run: async ({ open }) => (await open()).store.listProjects(),
    print: (projects) =>
      table(
        projects.map((p) => ({ project: p.projectId, tier: p.tier, created: iso(p.createdAt) })),
        ["project", "tier", "created"],
      ),
  }),
];
