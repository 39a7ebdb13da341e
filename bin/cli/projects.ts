import { createProject } from "../../lambda/core/accounts";
import { DEFAULT_PLAN_ID, entryAt, setProjectPlan } from "../../lambda/core/plans";
import { command } from "./command";
import { iso, table } from "./format";
import { date, required, text } from "./options";

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
  command({
    name: "projects update",
    summary: "a project's price plan, from now or a stated time",
    args: ["<id>"],
    options: {
      plan: required("<plan id>", "the plan ('default': the deployment's markup)"),
      at: date("<time>", "when the change takes effect (default now; never in the past)"),
    },
    examples: [
      "dmt projects update demo --plan resellers",
      "dmt projects update demo --plan default --at 2027-01-01",
    ],
    run: async ({ values, args: [projectId], open }) => {
      const services = await open();
      await services.project(projectId);
      const now = Date.now();
      const assigned = await setProjectPlan(services.plans, projectId, values.plan, values.at, now);
      return {
        projectId,
        plan: entryAt(assigned.entries, now)?.planId ?? DEFAULT_PLAN_ID,
        entries: assigned.entries,
      };
    },
    print: ({ projectId, entries }) =>
      entries
        .map((e) =>
          e.from > Date.now()
            ? `Project ${projectId} moves to plan ${e.planId} at ${iso(e.from)}.`
            : `Project ${projectId} is on plan ${e.planId}.`,
        )
        .join("\n"),
  }),
];
