import { command } from "./command";
import { table } from "./format";
import { flag, text } from "./options";

/** `dmt retention run`: what AWS runs daily, now, over the local data dir. */
export const retentionCommands = [
  command({
    name: "retention run",
    summary: "removes what is past each project's retention now (AWS runs it daily)",
    options: {
      project: text("<id>", "only this project (default: every project)"),
      "dry-run": flag("changes nothing; shows what a run would remove"),
    },
    examples: ["dmt retention run --project demo --dry-run"],
    run: async ({ values, open }) => {
      const services = await open();
      const projectId = values.project === undefined ? undefined : await services.project(values.project);
      return services.retention({ ...(projectId !== undefined && { projectId }), dryRun: values["dry-run"] });
    },
    print: (audit) => {
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
  }),
];
